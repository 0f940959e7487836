"""The witness on a real GPU (run on the GPU machine: pytest -m gpu): a run alone is clean, and a foreign CuPy
process copying on the same GPU is named on the points it overlapped, by its pid. Nothing changes the GPU's
settings: the foreign load is a process."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu.core import conditions
from gpu.core.units import MiB
from gpu.service.backends import submit_values

pytestmark = pytest.mark.gpu
LOOP = Path(__file__).with_name("foreign_copy_loop.py")
TRANSFERS = {"sizes": [64 * MiB, 256 * MiB], "modes": ["pinned"], "directions": ["h2d", "d2h"],
             "profile": "interactive"}


def start_foreign_loop(device: int = 0, nbytes: int = 1 << 30) -> subprocess.Popen:
    """The CuPy copy loop in its own process, once its first copy has run."""
    loop = subprocess.Popen([sys.executable, str(LOOP), "--device", str(device), "--bytes", str(nbytes)],
                            stdout=subprocess.PIPE, text=True)
    line = loop.stdout.readline()
    if not line.startswith("ready"):
        loop.kill()
        pytest.skip(f"the CuPy copy loop did not start: {line!r}")
    return loop


def test_a_run_alone_is_clean_and_its_readings_are_kept(live_backend):
    frame = submit_values(live_backend, "transfers", TRANSFERS).outcome()
    print("\nconditions:", frame["conditions"].tolist())
    print("witness:", frame["witness"].iloc[0])
    assert (frame["conditions"] == conditions.CLEAN).all()
    raw = json.loads(frame["witness"].iloc[0])
    assert raw["n"] >= 1 and raw["sm_mhz"][1] > 0 and raw["pcie"][0] >= 1


def test_a_foreign_cupy_loop_is_named_with_its_pid_on_every_point(live_backend):
    loop = start_foreign_loop()
    try:
        frame = submit_values(live_backend, "transfers", TRANSFERS).outcome()
    finally:
        loop.kill()
        loop.wait()
    print("\nforeign pid", loop.pid, "conditions:", frame["conditions"].tolist())
    named = frame["conditions"].map(lambda c: any(f"pid {loop.pid} " in cause for cause in conditions.causes(c)))
    assert named.all()
