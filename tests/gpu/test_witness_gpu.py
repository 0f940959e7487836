"""The witness on a real GPU (run on the GPU machine: pytest -m gpu): a run alone is clean, and a foreign CuPy
process copying on the same GPU is named on the points it overlapped, by its pid. Nothing changes the GPU's
settings: the foreign load is a process."""

import json
import statistics
import subprocess
import sys
import time
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


class _OwnCallsOnly:
    """pynvml without ``nvmlDeviceGetFieldValues``: the witness reads every counter by its own call."""

    def __init__(self, nvml):
        self._nvml = nvml

    def __getattr__(self, name):
        if name == "nvmlDeviceGetFieldValues":
            raise AttributeError(name)
        return getattr(self._nvml, name)


def _median_s(read, times: int = 5) -> float:
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        read()
        spent.append(time.perf_counter() - started)
    return statistics.median(spent)


def test_the_counters_read_in_one_field_call_equal_their_own_calls_on_every_gpu():
    """The witness's counters (PCIe replays, volatile ECC, every active NVLink's errors) read both ways on the real
    boards: equal, each way's time printed. A counter that moves between the readings (a link's corrected CRC errors)
    is read again, up to five times; the field ids are the installed pynvml's."""
    pynvml = pytest.importorskip("pynvml")
    from gpu.device import witness

    for read, name in witness.FIELD_NAMES.items():
        assert getattr(pynvml, name, None) == witness.FIELD_IDS[read], name
    pynvml.nvmlInit()
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            by_fields = witness.Witness(pynvml, handle)
            by_calls = witness.Witness(_OwnCallsOnly(pynvml), handle)
            for _ in range(5):
                before, fields, after = by_calls._counters(), by_fields._counters(), by_calls._counters()
                if before == after:
                    break
            own = sorted(by_fields._own_calls)
            print(f"\nGPU {index}: {len(by_fields._active_links())} NVLink links; counters by fields {fields}")
            print(f"  fields the board refused (read by their own calls): {len(own)} {own[:8]}")
            print(f"  one reading: own calls {_median_s(by_calls._counters) * 1e3:.2f} ms, fields "
                  f"{_median_s(by_fields._counters) * 1e3:.2f} ms (median of 5)")
            assert by_fields._fields_work, "nvmlDeviceGetFieldValues refused: every counter by its own call"
            assert before == after, "a counter moved in each of five tries: cannot compare"
            assert fields == before
    finally:
        pynvml.nvmlShutdown()
