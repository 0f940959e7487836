"""Live Transfers and Streams with their pages' defaults, timed from the client as a person meets them. Prints,
never asserts (targets: the whole Measure at most 6 s, its first points within 1 s).

For each of ``--fresh`` fresh workers: the worker's start (spawn, CUDA context, kernels from the cubin cache or
compiled, the sweeps' warm-ups; ``warmed`` from its hello), the app's first job (pinning the pooled host buffers),
then each page's default Measure with the interactive profile twice: the first points at the client and the whole
sweep. The page draws the points at its next poll, 0.1 s after they arrive. ``tests/benchmarks/live_defaults.py``
times every page's defaults in one worker and compares the quick answer with a precise one.

``--cold-cubins`` starts the first worker with an empty cubin cache (a temporary ``PINPOINT_CUBIN_CACHE``), as on a
machine that has never run PinPoint: its start then includes compiling every kernel.

Run on the GPU machine: ``python3 tests/benchmarks/live_pages.py [--pages transfers,streams] [--fresh 2]
[--cold-cubins]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from live_defaults import DEFAULTS, timed  # noqa: E402

TOTAL_TARGET_S, FIRST_TARGET_S = 6.0, 1.0


def main() -> None:
    from gpu.device import cubins
    from gpu.service.backends import LiveBackend
    from gpu.service.client import WorkerClient

    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", default="transfers,streams")
    parser.add_argument("--fresh", type=int, default=2, help="fresh workers, one after another")
    parser.add_argument("--repeats", type=int, default=2, help="Measures of each page in each worker")
    parser.add_argument("--profile", default="interactive")
    parser.add_argument("--cold-cubins", action="store_true", help="the first worker starts with no cubin cache")
    args = parser.parse_args()
    empty = tempfile.TemporaryDirectory(prefix="pinpoint-cubins-") if args.cold_cubins else None
    for attempt in range(args.fresh):
        if empty is not None and attempt == 0:
            os.environ[cubins.CACHE_ENV] = empty.name
        elif empty is not None:
            os.environ.pop(cubins.CACHE_ENV, None)
        started = time.perf_counter()
        client = WorkerClient()
        start_s = time.perf_counter() - started
        try:
            backend = LiveBackend(client)
            began = time.perf_counter()
            backend.warm().outcome()
            warm_s = time.perf_counter() - began
            cache = "an empty cubin cache" if empty is not None and attempt == 0 else "the cubin cache"
            print(f"WORKER {attempt + 1} ({client.info['facts']['device_name']}): started in {start_s:.2f} s with "
                  f"{cache} (warm-ups {client.info.get('warmed')}), the app's first job (pinning the pool) "
                  f"{warm_s:.2f} s", flush=True)
            for page in args.pages.split(","):
                for repeat in range(args.repeats):
                    frame, first, total = timed(backend, page, args.profile)
                    print(f"  {page:<10} Measure {repeat + 1}: first points at the client {first:.2f} s (target <= "
                          f"{FIRST_TARGET_S:.0f} s), whole {total:.2f} s (target <= {TOTAL_TARGET_S:.0f} s), "
                          f"{len(frame)} points, {int(frame['samples'].sum()):,} samples, "
                          f"stops {frame['stop_reason'].value_counts().to_dict()}", flush=True)
        finally:
            client.close()
    if empty is not None:
        empty.cleanup()


if __name__ == "__main__":
    assert set(DEFAULTS) >= {"transfers", "streams"}
    main()
