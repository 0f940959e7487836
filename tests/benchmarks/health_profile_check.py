"""Would another profile for one run of the health suite keep its figures within their noise? Prints, never asserts.

The suite's run of ``--experiment`` (default: transfers) measured ``--repeats`` times with the suite's profile (A, or
``--baseline``) and as many times with ``--candidate`` (B), alternately (A B, B A, A B, …: a drift of the machine falls
on both), in this process on GPU ``--gpu`` alone. Then, per point: each profile's median over its repeats and its
run-to-run spread (largest over smallest median, as a log ratio), B's shift from A (log ratio of their medians), the
point's one-board run-to-run floor, the band the Fleet page and Compare judge it by (``gpu.results.analysis.bands``),
how each profile's repeats stopped, and its copies a sample where it is batched. Two verdicts a point:

* B "keeps its noise" when B's shift and B's spread both stay within that floor (the first verdict, as before);
* B is "no worse than A" when B's spread and |shift| both stay within max(floor, A's spread): a point whose spread
  under A is already wider than its floor (a pageable copy's, 31-56 % against a 28 % floor on an H200) cannot be held
  to a floor A does not keep. Each point also says whether A keeps the floor itself.

Then the counts, all points and the batched and single ones apart (``--only-batched`` prints only the batched
points, whose samples are each the mean of several copies: the ones a profile's ``hot_max_noise`` changes), and each
profile's time a run. Nothing here changes the suite: a change to it is made only on such figures.

Run on the GPU machine: ``python3 tests/benchmarks/health_profile_check.py [--experiment transfers]
[--candidate precise/timeout_s=1,hot_max_noise=1] [--baseline precise/timeout_s=1] [--repeats 3] [--gpu 0]
[--only-batched]``. A profile with several overrides is one argument (``a/x=1,y=2``: no spaces).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gpu.core import stats  # noqa: E402
from gpu.experiments import registry, suites  # noqa: E402
from gpu.results.analysis.bands import floor  # noqa: E402
from gpu.results.analysis.points import point_kind  # noqa: E402


def measure(experiment: str, params, gpu) -> tuple[list[dict], float]:
    module = registry.entry_of(experiment).sweep_module()
    started = time.perf_counter()
    rows = module.run(params, gpu, lambda *a: None, lambda: False)
    return rows, time.perf_counter() - started


@dataclass(frozen=True)
class PointVerdict:
    """One point's figures under A and B (log ratios) and both verdicts."""

    shift: float
    spread_a: float
    spread_b: float
    limit: float  # the point's one-board floor
    a_keeps_floor: bool  # A's own spread within the floor
    keeps: bool  # B's shift and spread within the floor (the first verdict)
    no_worse: bool  # B's shift and spread within max(floor, A's spread)


def judge(a: list[float], b: list[float], limit: float) -> PointVerdict:
    """Both verdicts on a point's medians under A (``a``) and B (``b``), one a repeat, against its floor ``limit``."""
    shift = math.log(statistics.median(b) / statistics.median(a))
    spread_a, spread_b = math.log(max(a) / min(a)), math.log(max(b) / min(b))
    fair = max(limit, spread_a)  # A's own run-to-run spread where it is wider than the floor
    return PointVerdict(shift, spread_a, spread_b, limit, spread_a <= limit,
                        abs(shift) <= limit and spread_b <= limit, abs(shift) <= fair and spread_b <= fair)


def copies_a_sample(row: dict) -> int:
    """The copies each of a point's samples is the mean of: 1 for a single (or one-copy) sample."""
    value = row.get("copies_per_sample")
    try:
        return max(1, int(value)) if value is not None and math.isfinite(float(value)) else 1
    except (TypeError, ValueError):
        return 1


def sampled_s(row: dict) -> float:
    """The seconds a point's samples measured (each sample's mean times its copies): what its profile spent on it."""
    values = row.get("samples_ms")
    return float(sum(values)) * copies_a_sample(row) / 1e3 if values is not None else math.nan


def stops(reasons: list[str]) -> str:
    """How a point's repeats stopped: 'converged ×2, min_time'."""
    return ", ".join(f"{reason} ×{count}" if count > 1 else reason for reason, count in Counter(reasons).items())


def profile_argument(spec: str) -> str:
    """A profile spec, checked as the suite checks it (``stats.get_profile``): a bad one is one line, not a trace."""
    try:
        return stats.get_profile(spec).name
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--experiment", default="transfers")
    parser.add_argument("--candidate", default="precise/timeout_s=0.5", type=profile_argument,
                        help="profile B, tried against the suite's (one argument: precise/timeout_s=1,hot_max_noise=1)")
    parser.add_argument("--baseline", default=None, type=profile_argument,
                        help="the profile A (default: the suite's run's own)")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--only-batched", action="store_true",
                        help="print only the batched points (samples of several copies each); the counts stay whole")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, not {args.repeats}")
    from gpu.device.context import GpuRuntime

    run = suites.load("health").run_for(args.experiment)
    declared = registry.get_experiment(args.experiment)
    profiles = {"A": args.baseline or run.checked().params.profile, "B": args.candidate}
    params = {name: declared.parse_params({**run.params, "profile": profile}) for name, profile in profiles.items()}
    key_columns = declared.KEY_COLUMNS
    medians: dict[str, dict[tuple, list[float]]] = {"A": {}, "B": {}}
    reasons: dict[str, dict[tuple, list[str]]] = {"A": {}, "B": {}}
    sampled: dict[str, dict[tuple, list[float]]] = {"A": {}, "B": {}}
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
                    reasons[name].setdefault(key, []).append(str(row.get("stop_reason")))
                    sampled[name].setdefault(key, []).append(sampled_s(row))
    finally:
        device = gpu.facts["device_name"]
        gpu.close()
    print(f"PROFILE CHECK of the health suite's {args.experiment} run on GPU {args.gpu} ({device}): A "
          f"{profiles['A']} against B {profiles['B']}, {args.repeats} repeats each, alternated"
          + (" (batched points only; the counts are of every point)" if args.only_batched else ""), flush=True)
    verdicts: dict[tuple, PointVerdict] = {}
    batched: set[tuple] = set()
    for key, row in rows_by_key.items():
        a, b = medians["A"].get(key, []), medians["B"].get(key, [])
        if not a or not b:
            continue
        kind = point_kind(args.experiment, row)
        verdict = verdicts[key] = judge(a, b, floor(kind, one_board=True))
        copies = copies_a_sample(row)
        if copies > 1:
            batched.add(key)
        elif args.only_batched:
            continue
        label = ", ".join(f"{c}={v}" for c, v in zip(key_columns, key, strict=True))
        print(f"  {label} [{kind}, one-board floor ±{100 * verdict.limit:.1f} %"
              + (f", {copies} copies a sample" if copies > 1 else "") + f"]: A {statistics.median(a):.4f} ms (spread "
              f"{100 * verdict.spread_a:.1f} %), B {statistics.median(b):.4f} ms (spread {100 * verdict.spread_b:.1f} "
              f"%), shift {100 * verdict.shift:+.1f} %: {'keeps its noise' if verdict.keeps else 'OUTSIDE its noise'}"
              f"; A {'keeps' if verdict.a_keeps_floor else 'does NOT keep'} the floor itself; B "
              f"{'no worse than A' if verdict.no_worse else 'WORSE than A'} (within ±"
              f"{100 * max(verdict.limit, verdict.spread_a):.1f} %); stops A {stops(reasons['A'][key])}, B "
              f"{stops(reasons['B'][key])}; samples A {statistics.median(sampled['A'][key]):.2f} s, B "
              f"{statistics.median(sampled['B'][key]):.2f} s", flush=True)
    print(f"  {sum(v.keeps for v in verdicts.values())} of {len(rows_by_key)} points keep their noise under B",
          flush=True)
    groups = {"all": set(verdicts), "batched": batched & set(verdicts), "single": set(verdicts) - batched}
    for group, keys in groups.items():
        if not keys:
            continue
        chosen = [verdicts[k] for k in keys]
        print(f"  {group} ({len(chosen)} points): B keeps the floor at {sum(v.keeps for v in chosen)}, B no worse than "
              f"A at {sum(v.no_worse for v in chosen)}, A keeps the floor itself at "
              f"{sum(v.a_keeps_floor for v in chosen)}", flush=True)
    for name in ("A", "B"):
        print(f"  {name} ({profiles[name]}): {statistics.median(seconds[name]):.2f} s a run (median of "
              f"{', '.join(f'{s:.2f}' for s in seconds[name])})", flush=True)

if __name__ == "__main__":
    main()
