"""A process that measures on simulated board 0 through ``WorkerClient``, as the runner, a fleet task or the app does,
for the tests of one measurement per GPU across processes (tests/test_host_locks.py).

``python -m tests.gpu_lock_process TAG LOG SECONDS [WAIT_S|-] [RELEASE]``: one ``measure`` job of ``GpuSetService``
on GPU 0 that logs its start and end to LOG and ends after SECONDS or once the file RELEASE exists; prints
``worker PID`` once its worker is up, ``waiting: TEXT`` the first time it waits for another process, then ``done``,
or ``refused: …`` (exit code ``host_locks.EXIT_GPU_BUSY``)."""

from __future__ import annotations

import sys

from gpu.service.client import WorkerClient
from gpu.service.host_locks import EXIT_GPU_BUSY, GpuBusy, set_process_purpose


def main(tag: str, log: str, seconds: float, wait_s: float | None, release: str | None = None) -> int:
    set_process_purpose(f"lock test {tag}")
    client = WorkerClient(service="tests.fake_service:GpuSetService", service_options={"device": 0}, wait_s=wait_s)
    print(f"worker {client.worker_pid}", flush=True)
    handle = client.submit("measure", {"tag": tag, "log": log, "seconds": seconds, "release": release})
    said = False
    while not handle.wait(0.02):
        if handle.waiting and not said:
            print(f"waiting: {handle.waiting}", flush=True)
            said = True
    try:
        handle.outcome()
    except GpuBusy as exc:
        print(exc, flush=True)
        return EXIT_GPU_BUSY
    finally:
        client.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    tag, log, seconds, wait, release = (sys.argv[1:] + ["-", ""])[:5]
    sys.exit(main(tag, log, float(seconds), None if wait == "-" else float(wait), release or None))


def worker_pids(service: str) -> tuple[int, int]:
    """Run on a Dask worker: its pid and its GPU worker process's pid (started here, as a fleet's first task does)."""
    import os

    from gpu.fleet import task

    return os.getpid(), task.backend(service).client.worker_pid


class SlowListing:
    """A service whose GPUs take minutes to list: a process asking for them is killed meanwhile."""

    @staticmethod
    def visible_gpus() -> list[dict]:
        import time

        time.sleep(120)
        return []
