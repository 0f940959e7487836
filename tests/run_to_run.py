"""Runs of unchanged software for the run-to-run checks (tests and tests/benchmarks/run_to_run_floors.py): the
repeated runs in assets/noise/, the day-apart H200 transfers pair, and a candidate with a known change."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from gpu.core import schema
from gpu.results.analysis import compare

ASSETS = Path(__file__).resolve().parent.parent / "assets"
NOISE = ASSETS / "noise"
DAY_APART = (ASSETS / "replay" / "transfers_nvidia-h200_2026-11-21.parquet",
             ASSETS / "runs" / "transfers_nvidia-h200_2026-11-22.parquet")


def runs_of(paths) -> list[pd.DataFrame]:
    """Every run of the files, one frame each, oldest first."""
    frames = []
    for path in paths:
        frame = schema.read_results(path)
        frames += [part.reset_index(drop=True) for _, part in frame.groupby("run_id", sort=False)]
    return sorted(frames, key=lambda f: str(f["timestamp"].iloc[0]))


def repeated_runs() -> dict[str, list[pd.DataFrame]]:
    """The runs of assets/noise/, grouped by experiment and device ('transfers on NVIDIA H200'), oldest first, each
    group joined by the bundled review runs (assets/runs/) of its experiment and device: the H100 transfers and
    streams runs of 2026-11-22 sit in assets/noise/ beside their reruns of 2026-11-23 in assets/runs/."""
    def group(run: pd.DataFrame) -> str:
        return f"{run['experiment'].iloc[0]} on {run['device_name'].iloc[0]}"

    groups: dict[str, list[pd.DataFrame]] = {}
    for run in runs_of(sorted(NOISE.glob("*.parquet"))):
        groups.setdefault(group(run), []).append(run)
    # The day-apart pair is judged on its own (unchanged_pairs), so its runs are not added again.
    seen = {run["run_id"].iloc[0] for runs in [*groups.values(), runs_of(DAY_APART)] for run in runs}
    for run in runs_of(sorted((ASSETS / "runs").glob("*.parquet"))):
        if group(run) in groups and run["run_id"].iloc[0] not in seen:
            groups[group(run)].append(run)
    return {name: sorted(runs, key=lambda f: str(f["timestamp"].iloc[0])) for name, runs in groups.items()}


def _hours_apart(first: pd.DataFrame, second: pd.DataFrame) -> float:
    gap = pd.Timestamp(str(second["timestamp"].iloc[0])) - pd.Timestamp(str(first["timestamp"].iloc[0]))
    return abs(gap.total_seconds()) / 3600


def spread_by_source() -> dict[str, pd.DataFrame]:
    """|log(median ratio)| per point of every two runs of a group, pooled as 'one board' (both runs name the same
    ``gpu_uuid``), 'same day' (other repeats within hours, on one board or several) or 'days apart' (the H200
    transfers pair, the H100 runs of 2026-11-22 and -23)."""
    pairs = {"one board": [], "same day": [], "days apart": [compare.run_to_run_spread(runs_of(DAY_APART))]}
    for runs in repeated_runs().values():
        for j, second in enumerate(runs):
            for first in runs[:j]:
                source = "one board" if compare.same_board(first, second) else \
                    "same day" if _hours_apart(first, second) < 12 else "days apart"
                pairs[source].append(compare.run_to_run_spread([first, second]))
    return {source: pd.concat(parts, ignore_index=True) for source, parts in pairs.items() if parts}


def scaled(run: pd.DataFrame, factor: float = 0.9, every: int = 3, run_id: str = "scaled") -> pd.DataFrame:
    """A copy of ``run`` measured later whose times (samples, median, min, max) are × ``factor`` on every
    ``every``-th point (a real change of 1/factor − 1 in speed there), with a ``changed`` column marking them."""
    out = run.copy()
    changed = np.arange(len(out)) % every == 0
    out["samples_ms"] = [np.asarray(s, dtype=float) * (factor if c else 1.0)
                         for s, c in zip(out["samples_ms"], changed, strict=True)]
    for column in ("median_ms", "min_ms", "max_ms"):
        out.loc[changed, column] = out.loc[changed, column] * factor
    out.loc[changed, "gbps"] = out.loc[changed, "gbps"] / factor
    stamp = pd.Timestamp(str(run["timestamp"].iloc[0])) + pd.Timedelta(hours=1)
    return out.assign(run_id=run_id, timestamp=stamp.isoformat(), changed=changed)


QUANTILE = 0.95


def spread_table(leave_out: str | None = None) -> pd.DataFrame:
    """Per source and kind: pairs of runs, points, and quantiles of the relative change of medians between
    runs of unchanged software; ``q95_log`` on a log scale. ``leave_out``: a pair ('run_a · run_b') to leave out."""
    rows = []
    for source, spread in spread_by_source().items():
        for kind, part in spread[spread["runs"] != leave_out].groupby("kind"):
            values = part["abs_log_ratio"]
            rows.append({"source": source, "kind": kind, "pairs": part["runs"].nunique(), "points": len(part),
                         "experiments": ", ".join(sorted(set(part["experiment"]))),
                         **{f"q{round(q * 100)}": math.expm1(values.quantile(q)) for q in (0.5, 0.9, QUANTILE)},
                         "max": math.expm1(values.max()), "q95_log": values.quantile(QUANTILE)})
    return pd.DataFrame(rows)


def derived_floors(table: pd.DataFrame | None = None) -> dict[str, float]:
    """Per kind: the largest source's 95th percentile of |log(median ratio)|, rounded up to 0.005."""
    table = spread_table() if table is None else table
    return {kind: math.ceil(q * 200 - 1e-9) / 200 for kind, q in table.groupby("kind")["q95_log"].max().items()}


def derived_one_board_floors(table: pd.DataFrame | None = None) -> dict[str, float]:
    """The same, from the pairs of runs on one board alone, for the kinds measured there."""
    table = spread_table() if table is None else table
    return derived_floors(table[table["source"] == "one board"])


def unchanged_pairs():
    """(label, baseline, candidate, earlier runs) of unchanged software: the day-apart pair, and every two of
    the repeated runs with the runs of their group as the history (compare keeps those before the candidate)."""
    day = runs_of(DAY_APART)
    pairs = [("day apart, transfers on NVIDIA H200", day[0], day[1], [])]
    for name, runs in repeated_runs().items():
        pairs += [(f"{name}: run {j + 1} vs run {i + 1}", runs[i], runs[j], runs)
                  for j in range(len(runs)) for i in range(j)
                  if not compare.run_to_run_spread([runs[i], runs[j]]).empty]  # runs that share points
    return pairs


def changed_cases():
    """(label, baseline, earlier runs) to scale by 0.9: the day-apart candidate with the floors, and the largest
    repeated run of each group with the floors alone and, when its group has ``MIN_HISTORY`` runs, with them as
    the history (compare keeps those measured before the scaled copy)."""
    cases = [("transfers on NVIDIA H200 2026-11-22, floors", runs_of(DAY_APART)[1], [])]
    for name, runs in repeated_runs().items():
        largest = max(runs, key=len)
        cases.append((f"{name}, {len(largest)}-point repeat, floors", largest, []))
        if len(runs) >= compare.MIN_HISTORY:
            cases.append((f"{name}, {len(largest)}-point repeat, history of {len(runs)} runs", largest, runs))
    return cases
