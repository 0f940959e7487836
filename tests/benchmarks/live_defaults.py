"""How long a live Measure takes with each page's defaults, and whether the quick answer agrees with a precise one.
Prints, never asserts: the figures a talk waits for.

For each page's default request, with the interactive profile: when the first points reached the client (the page
draws them at its next poll, 0.1 s later), the whole sweep, how the points stopped, and the worst CV of points of
16 MiB or more (pinned-type copies and kernels apart from pageable copies, whose own spread is far above 2 %). Then
the same points with the precise profile (nvbench's rule, capped per point), and the largest difference between the
two medians, so the user sees that the quick answer agrees.

Run on the GPU machine: ``python3 tests/benchmarks/live_defaults.py [--pages transfers,coalescing]
[--precise precise/timeout_s=2] [--no-precise] [--save DIR]``.
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
TARGETS = {"transfers": 8.0, "coalescing": 6.0, "streams": 6.0}  # whole-sweep targets on the H200 (seconds)
FIRST_TARGET_S = 1.5


def timed(backend, page: str, profile: str):
    """(frame, seconds to the first streamed row, seconds to the whole result)."""
    started = time.perf_counter()
    from gpu.service.backends import submit_values

    handle = submit_values(backend, page, {**DEFAULTS[page], "profile": profile})
    first = None
    while not handle.wait(0.005):
        if first is None and handle.rows:
            first = time.perf_counter() - started
    total = time.perf_counter() - started
    frame = handle.outcome()
    return frame, (first if first is not None else total), total


def worst_cv(frame, pageable: bool) -> str:
    big = frame[(frame["bytes"] >= 16 << 20)]
    if "host_memory" in big:
        is_pageable = big["variant"].str.contains("pageable") | (big["host_memory"].fillna("") == "pageable")
    else:
        is_pageable = big["variant"].str.contains("pageable")  # also Reductions' end_to_end_pageable
    part = big[is_pageable] if pageable else big[~is_pageable]
    if part.empty:
        return "n/a"
    row = part.loc[part["cv"].idxmax()]
    return f"{row['cv']:.2%} ({row['variant']}, {row['bytes'] / 2**20:.0f} MiB, {int(row['samples'])} samples)"


def largest_difference(module, quick, precise) -> str:
    keys = module.KEY_COLUMNS
    merged = quick.merge(precise, on=keys, suffixes=("_quick", "_precise"))
    if merged.empty:
        return "no common points"
    merged["diff"] = merged["median_ms_quick"] / merged["median_ms_precise"] - 1
    merged["abs"] = merged["diff"].abs()
    worst = merged.loc[merged["abs"].idxmax()]
    big = merged[merged["bytes" if "bytes" in merged else "bytes_quick"] >= 16 << 20]  # bytes is a key of transfers
    big_worst = f"; at >= 16 MiB {big['abs'].max():.2%}" if not big.empty else ""
    median = merged["abs"].median()
    pageable = merged["variant"].str.contains("pageable") | (merged["host_memory"].fillna("").eq("pageable")
                                                   if "host_memory" in merged else False)
    rest = merged[~pageable]
    rest_text = "" if not pageable.any() or rest.empty else \
        f"; without pageable-memory points the largest is {rest['abs'].max():.2%}"
    point = ", ".join(f"{k}={worst[k]}" for k in keys if str(worst[k]) not in ("nan", "None"))
    return (f"largest difference {worst['diff']:+.2%} at {point} (quick {worst['median_ms_quick']:.4f} ms vs precise "
            f"{worst['median_ms_precise']:.4f} ms){big_worst}{rest_text}; median |difference| {median:.2%} over "
            f"{len(merged)} points")


def main() -> None:
    from gpu.experiments import get_experiment
    from gpu.service.backends import start_live, submit_values

    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="interactive")
    parser.add_argument("--precise", default="precise/timeout_s=2")
    parser.add_argument("--no-precise", action="store_true")
    parser.add_argument("--no-warm", action="store_true",
                        help="do not pin the pooled host buffers first (the app's worker does when it starts)")
    parser.add_argument("--pages", default=",".join(DEFAULTS))
    parser.add_argument("--save", metavar="DIR", help="also write each frame (samples included) as CSV into DIR")
    args = parser.parse_args()
    if args.save:
        Path(args.save).mkdir(parents=True, exist_ok=True)
    backend, reason = start_live()
    if backend is None:
        sys.exit(f"needs a GPU: {reason}")
    try:
        if not args.no_warm:
            backend.warm()  # as the app's worker does when it starts: pin the pooled host buffers first
        submit_values(backend, "reduction",
                      {"sizes": [1 << 20], "variants": ["grid_stride"]}).outcome()  # warm the worker
        for page in args.pages.split(","):
            frame, first, total = timed(backend, page, args.profile)
            if args.save:
                frame.to_csv(Path(args.save) / f"{page}-quick.csv", index=False)
            target = f" (target <= {TARGETS[page]:.0f} s)" if page in TARGETS else ""
            stops = frame["stop_reason"].value_counts().to_dict()
            print(f"LIVE {page:<11} {args.profile}: first points at the client {first:.2f} s (target <= "
                  f"{FIRST_TARGET_S} s drawn), whole sweep {total:.2f} s{target}, {len(frame)} points, stops {stops}; "
                  f"worst CV at >= 16 MiB: {worst_cv(frame, False)}; pageable {worst_cv(frame, True)} "
                  f"(device {frame['device_name'].iloc[0]})", flush=True)
            if args.no_precise:
                continue
            precise, _, precise_total = timed(backend, page, args.precise)
            if args.save:
                precise.to_csv(Path(args.save) / f"{page}-precise.csv", index=False)
            print(f"  vs {args.precise} ({precise_total:.1f} s): "
                  f"{largest_difference(get_experiment(page), frame, precise)}; precise worst CV at >= 16 MiB: "
                  f"{worst_cv(precise, False)}; pageable {worst_cv(precise, True)}", flush=True)
    finally:
        backend.client.close()


if __name__ == "__main__":
    main()
