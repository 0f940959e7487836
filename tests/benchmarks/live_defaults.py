"""How long a live Measure takes with each page's defaults (prints, does not assert): time to the first
finished point, the whole sweep, and the worst CV of points of 16 MiB or more. The numbers a talk waits for.

Run on the GPU machine: ``python3 tests/benchmarks/live_defaults.py [--profile interactive]``.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# Each page's request with its default controls (as the pages build them).
DEFAULTS = {
    "transfers": {"sizes": [4096 * 2**i for i in range(19)], "modes": ["pageable", "pinned", "pinned_wc", "mapped"],
                  "directions": ["h2d", "d2h"], "include_alloc": [False]},
    "coalescing": {"elements": 1 << 26, "block_sizes": [256],
                   "groups": ["copy", "strided", "offset", "layout", "transpose"]},
    "reduction": {"sizes": [1 << 24], "block_sizes": [256]},
    "occupancy": {"block_sizes": list(range(32, 1025, 32)), "kernels": ["stream", "chase"], "extra_registers": 0,
                  "dynamic_shared_bytes": 0},
    "streams": {},
}


def main() -> None:
    from gpu.backend import start_live

    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="interactive")
    args = parser.parse_args()
    backend, reason = start_live()
    if backend is None:
        sys.exit(f"needs a GPU: {reason}")
    try:
        backend.submit("reduction", {"sizes": [1 << 20], "variants": ["grid_stride"]}).outcome()  # warm the worker
        for page, params in DEFAULTS.items():
            started = time.perf_counter()
            handle = backend.submit(page, {**params, "profile": args.profile})
            first = None
            while not handle.wait(0.01):
                if first is None and handle.done >= 1:
                    first = time.perf_counter() - started
            total = time.perf_counter() - started
            frame = handle.outcome()
            big = frame[frame["bytes"] >= 16 << 20]
            worst = f"{big['cv'].max():.2%}" if not big.empty else "n/a"
            print(f"LIVE {page:<11} profile {args.profile}: first point {first if first is not None else total:.2f} s, "
                  f"whole sweep {total:.2f} s, {len(frame)} points, worst CV at >= 16 MiB {worst} "
                  f"(device {frame['device_name'].iloc[0]})")
    finally:
        backend.client.close()


if __name__ == "__main__":
    main()
