"""The lines above a page's charts that more than one experiment or the talk reads: each mode ÷ a baseline at the
same point (pinned ÷ pageable, the one rule behind the Transfers chart, its takeaway and the talk's claims) and how a
run's points stopped sampling. Each experiment's own headlines (the best reduction, the copy reference, managed
memory's migration cost, pools' per-call cost, batching's per-copy cost, duplex copies) are in its package's view.

Each function reads a results frame (``gpu.core.schema``) or a table built from one and returns Markdown (or None
when the data lacks what the line needs). No Streamlit, no CUDA."""

from __future__ import annotations

import pandas as pd

from gpu.core import stats, text

SPEEDUP_KEY = ["direction", "include_alloc", "bytes"]


def speedups(frame: pd.DataFrame, baseline: str = "pageable") -> pd.DataFrame:
    """Each mode against ``baseline`` at the same point (direction, allocation setting, size): the baseline's median
    time ÷ the mode's, which is the mode's GB/s ÷ the baseline's. One row per measured non-baseline point with a
    baseline beside it, in the frame's order. The one rule behind the speedup chart, the takeaway and the claims."""
    columns = ["variant", *SPEEDUP_KEY, "speedup"]
    base = frame[frame["variant"] == baseline][SPEEDUP_KEY + ["median_ms"]].rename(columns={"median_ms": "base_ms"})
    modes = frame[frame["variant"] != baseline][["variant", *SPEEDUP_KEY, "median_ms"]]
    paired = modes.merge(base, on=SPEEDUP_KEY, how="inner", sort=False)
    return paired.assign(speedup=paired["base_ms"] / paired["median_ms"])[columns].reset_index(drop=True)


def pinned_over_pageable(frame: pd.DataFrame) -> pd.Series:
    """Pinned ÷ pageable speed per size (ascending) in ``frame`` (one direction and allocation setting)."""
    table = speedups(frame)
    table = table[table["variant"] == "pinned"]
    return table.set_index("bytes")["speedup"].rename(None).dropna().sort_index()


STOPS = {"converged": "reached the noise target",
         "min_time": "batched, stopped at the minimum samples and time (nvbench's hot rule for batched samples)",
         "max_samples": "stopped at the sample limit", "timeout": "at the time limit", "budget": "at their time budget"}
DONE = ("converged", "min_time")  # stopped by the profile's rule, not on one of its limits


def transfer_stops(frame: pd.DataFrame) -> str | None:
    """How each point of a run stopped sampling, counted from its ``stop_reason`` column and said with its profile's
    limits; of those stopped on a limit, how many were still noisier than the target and how many lacked only
    sampled time; and why such a point still stands (its spread is kept and shown)."""
    if frame.empty or "stop_reason" not in frame:
        return None
    counts = frame["stop_reason"].value_counts()
    try:
        profile = stats.get_profile(str(frame["profile"].iloc[0]))
    except ValueError:
        profile = None
    limits = {"converged": f" (cv ≤ {text.percent(profile.max_noise, 1)} over ≥ {profile.min_time_s:g} s of "
                           "samples)" if profile else "",
              "min_time": f" ({profile.min_samples:,} samples, {profile.min_time_s:g} s)" if profile else "",
              "max_samples": f" ({profile.max_samples:,} samples)" if profile else "",
              "timeout": f" ({profile.timeout_s:g} s)" if profile else ""}
    parts = [f"{counts[reason]:,} {STOPS.get(reason, reason)}{limits.get(reason, '')}" for reason in
             [*STOPS, *sorted(set(counts.index) - set(STOPS))] if reason in counts]
    line = f"How the {len(frame):,} points stopped: " + ", ".join(parts) + "."
    stopped = frame[~frame["stop_reason"].isin(DONE)]
    if stopped.empty:
        return line
    if profile:
        noisy = int((stopped["cv"] > profile.max_noise).sum())
        share = f"All {noisy:,}" if noisy == len(stopped) else f"Of those {len(stopped):,}, {noisy:,}"
        line += (f" {share} were still noisier than the target (mostly copies that include host work, such as "
                 "pageable staging, allocation or a small copy's issue time: they vary more than that from sample to "
                 "sample, and more samples do not narrow it)"
                 + (f" and {len(stopped) - noisy:,} were within it but short of {profile.min_time_s:g} s of samples"
                    if noisy < len(stopped) else "") + ".")
    return line + (" Each keeps its spread (cv, min and max here, the error bars on the chart); Compare judges a "
                   "median by how far it moves between runs, not by its own cv.")
