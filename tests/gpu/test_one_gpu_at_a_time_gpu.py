"""Two runners on one GPU take turns (run on the GPU machine: pytest -m gpu): the second waits while the first
measures, says whose measurement it waits for, and measures once the first has let go. Through the machine's own lock
folder (tests/gpu/conftest.py), as every PinPoint process of the machine uses it."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpu.service import host_locks

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
# Nine sizes of pinned H2D copies, precise: long enough that the second runner starts while the first measures.
FIRST = ["transfers", "--sizes", "4MiB:1GiB", "--modes", "pinned", "--directions", "h2d", "--no-store", "--device", "0"]
SECOND = ["transfers", "--sizes", "1GiB", "--modes", "pinned", "--directions", "h2d", "--no-store", "--device", "0"]


def test_two_runners_on_one_gpu_are_serialized_and_the_second_names_the_first():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    held: dict[int, list[float]] = {}
    stop = threading.Event()

    def watch() -> None:  # when each process holds GPU 0's lock: it measures only then
        while not stop.is_set():
            now = time.monotonic()
            for holder in host_locks.holders():
                if holder.pid is not None and holder.gpu == 0:
                    held.setdefault(holder.pid, [now, now])[1] = now
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        first = subprocess.Popen([sys.executable, "-m", "gpu.bench", *FIRST], cwd=ROOT, env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 300
        while first.pid not in held and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert first.pid in held, "the first runner never held GPU 0"
        second = subprocess.Popen([sys.executable, "-m", "gpu.bench", *SECOND], cwd=ROOT, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, second_err = second.communicate(timeout=600)
        _, first_err = first.communicate(timeout=600)
    finally:
        stop.set()
        watcher.join()
    assert first.returncode == 0, first_err
    assert second.returncode == 0, second_err
    assert f"GPU 0 is measuring for `python -m gpu.bench transfers` (pid {first.pid}, for " in second_err
