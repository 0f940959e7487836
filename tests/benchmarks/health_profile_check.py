"""Would another profile for one run of the health suite keep its figures within their noise? Prints, never asserts.

The suite's run of ``--experiment`` (default: transfers) measured ``--repeats`` times with the suite's profile (A)
and as many times with ``--candidate`` (B), alternately (A B, B A, A B, …: a drift of the machine falls on both), in
this process on GPU ``--gpu`` alone. Then, per point: each profile's median over its repeats and its run-to-run
spread (largest over smallest median, as a log ratio), B's shift from A (log ratio of their medians), and the point's
one-board run-to-run floor, the band the Fleet page and Compare judge it by (``gpu.results.analysis.bands``). A point
"keeps its noise" when B's shift and B's spread both stay within that floor; the last lines give each profile's time
per run. Nothing here changes the suite: a change to it is made only on such figures.

Run on the GPU machine: ``python3 tests/benchmarks/health_profile_check.py [--experiment transfers]
[--candidate precise/timeout_s=0.5] [--repeats 4] [--gpu 0]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gpu.experiments import registry, suites  # noqa: E402
from gpu.results.analysis.bands import floor  # noqa: E402
from gpu.results.analysis.points import point_kind  # noqa: E402


def measure(experiment: str, params, gpu) -> tuple[list[dict], float]:
    module = registry.entry_of(experiment).sweep_module()
    started = time.perf_counter()
    rows = module.run(params, gpu, lambda *a: None, lambda: False)
    return rows, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--experiment", default="transfers")
    parser.add_argument("--candidate", default="precise/timeout_s=0.5", help="the profile B tried against the suite's")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--gpu", type=int, default=0)
    args = parser.parse_args()
    from gpu.device.context import GpuRuntime

    run = suites.load("health").run_for(args.experiment)
    declared = registry.get_experiment(args.experiment)
    profiles = {"A": run.checked().params.profile, "B": args.candidate}
    params = {name: declared.parse_params({**run.params, "profile": profile}) for name, profile in profiles.items()}
    key_columns = declared.KEY_COLUMNS
    medians: dict[str, dict[tuple, list[float]]] = {"A": {}, "B": {}}
    seconds: dict[str, list[float]] = {"A": [], "B": []}
    rows_by_key: dict[tuple, dict] = {}
    gpu = GpuRuntime(args.gpu)
    try:
        measure(args.experiment, params["A"], gpu)  # a first run, not counted: pools, caches and clocks settle
        for repeat in range(args.repeats):
            for name in ("A", "B") if repeat % 2 == 0 else ("B", "A"):
                rows, took = measure(args.experiment, params[name], gpu)
                seconds[name].append(took)
                for row in rows:
                    key = tuple(row.get(c) for c in key_columns)
                    rows_by_key.setdefault(key, row)
                    medians[name].setdefault(key, []).append(float(row["median_ms"]))
    finally:
        device = gpu.facts["device_name"]
        gpu.close()
    print(f"PROFILE CHECK of the health suite's {args.experiment} run on GPU {args.gpu} ({device}): A "
          f"{profiles['A']} against B {profiles['B']}, {args.repeats} repeats each, alternated", flush=True)
    kept = 0
    for key, row in rows_by_key.items():
        a, b = medians["A"].get(key, []), medians["B"].get(key, [])
        if not a or not b:
            continue
        kind = point_kind(args.experiment, row)
        limit = floor(kind, one_board=True)
        shift = math.log(statistics.median(b) / statistics.median(a))
        spread_a, spread_b = math.log(max(a) / min(a)), math.log(max(b) / min(b))
        keeps = abs(shift) <= limit and spread_b <= limit
        kept += keeps
        label = ", ".join(f"{c}={v}" for c, v in zip(key_columns, key, strict=True))
        print(f"  {label} [{kind}, one-board floor ±{100 * limit:.1f} %]: A {statistics.median(a):.4f} ms (spread "
              f"{100 * spread_a:.1f} %), B {statistics.median(b):.4f} ms (spread {100 * spread_b:.1f} %), shift "
              f"{100 * shift:+.1f} %: {'keeps its noise' if keeps else 'OUTSIDE its noise'}", flush=True)
    print(f"  {kept} of {len(rows_by_key)} points keep their noise under B", flush=True)
    for name in ("A", "B"):
        print(f"  {name} ({profiles[name]}): {statistics.median(seconds[name]):.2f} s a run (median of "
              f"{', '.join(f'{s:.2f}' for s in seconds[name])})", flush=True)


if __name__ == "__main__":
    main()
