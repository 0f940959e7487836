"""The bold lines above a page's charts, worked out from its results: pinned ÷ pageable, the best reduction, the
copy reference, managed memory's migration cost, pools' per-call cost, batching's per-copy cost and duplex copies.

Each function reads a results frame (``gpu.core.schema``) or a table built from one and returns Markdown (or None
when the data lacks what the line needs). No Streamlit, no CUDA."""

from __future__ import annotations

import pandas as pd

from gpu.core import overlap, stats, text
from gpu.core.units import format_bytes

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


def transfers_verdict(view: pd.DataFrame, label: str) -> str | None:
    """Pinned ÷ pageable at the largest size measured, per direction."""
    table = speedups(view)
    table = table[(table["variant"] == "pinned")]
    if table.empty:
        return None
    top = table[table["bytes"] == table["bytes"].max()]
    parts = [f"{r.direction.upper()} {r.speedup:.2f}×" for r in top.itertuples()]
    return f"{label}, {format_bytes(top['bytes'].iloc[0])}: pinned ÷ pageable = " + ", ".join(parts)


def managed(row) -> str:
    """First touch against resident and prefetched, from a row of ``memory_charts.managed_table``."""
    return (f"**{format_bytes(row['bytes'])}: first touch {row['first_touch GB/s']:,.1f} GB/s, resident "
            f"{row['resident GB/s']:,.0f} GB/s** — migrating on fault costs {row['first touch extra ms']:,.1f} ms "
            f"more ({row['first touch ÷ resident']:,.0f}× the resident time); prefetching first moves the pages "
            f"at {row['prefetch GB/s']:,.1f} GB/s, then the kernel runs at {row['after_prefetch GB/s']:,.0f} GB/s "
            f"({row['prefetch + kernel ms']:,.1f} ms in all).")


def pools(table: pd.DataFrame, crossover) -> list[str]:
    """Per call ÷ pooled for device and pinned memory, from ``memory_charts.pool_table``; ``crossover(table, kind)``
    is the size from which on allocating per call costs more than the copy (``memory_charts.pool_crossover``)."""
    parts = []
    for kind in ("device", "pinned"):
        ratio = table[f"{kind}: per call ÷ pooled"]
        if ratio.notna().any():
            size = crossover(table, kind)
            where = (f"from {format_bytes(size)} up, allocating per call costs more than the copy itself "
                     "(pooled is ≥ 2× faster at every larger size)" if size else
                     "allocating per call costs more than the copy itself at no size measured")
            parts.append(f"**{kind}**: per call ÷ pooled = {ratio.min():.2f}× … {ratio.max():.2f}×; {where}")
    return parts


def batching(table: pd.DataFrame) -> str | None:
    """What each separate copy costs beyond its share of one big copy, from ``memory_charts.batching_table``."""
    overhead = table["per-copy overhead µs"].dropna()
    if overhead.empty:
        return None
    return (f"**Each separate copy costs about {overhead.median():.1f} µs more than its share of one "
            f"big copy** (median over piece sizes; {overhead.min():.1f} … {overhead.max():.1f} µs).")


def bidirectional(frame: pd.DataFrame) -> str:
    """Per host memory: both directions at once against the faster direction alone, and the rate of their fastest
    tenth of samples where it is over 1 % above the median's, since that is the rate the Streams bound uses."""
    rows = frame[frame["variant"] == "bidir_both"].set_index("host_memory")
    alone = frame[frame["variant"].isin(["bidir_h2d", "bidir_d2h"])].groupby("host_memory")["gbps"].max()
    parts = []
    for h, row in rows.iterrows():
        if h not in alone:
            continue
        line = f"{h}: both directions at once move **{row['gbps']:.1f} GB/s**, {row['gbps'] / alone[h]:.2f}× the " \
               "faster direction alone"
        if {"bytes", "median_ms"} <= set(row.index):
            fast = overlap.duplex_gbps(row)
            if fast > 1.01 * row["gbps"]:
                line += f" ({fast:.1f} GB/s in their fastest tenth of samples: the rate the pipelines' bound uses)"
        parts.append(line)
    return " · ".join(parts)


STOPS = {"converged": "reached the noise target", "max_samples": "stopped at the sample limit",
         "timeout": "at the time limit", "budget": "at their time budget"}


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
              "max_samples": f" ({profile.max_samples:,} samples)" if profile else "",
              "timeout": f" ({profile.timeout_s:g} s)" if profile else ""}
    parts = [f"{counts[reason]:,} {STOPS.get(reason, reason)}{limits.get(reason, '')}" for reason in
             [*STOPS, *sorted(set(counts.index) - set(STOPS))] if reason in counts]
    line = f"How the {len(frame):,} points stopped: " + ", ".join(parts) + "."
    stopped = frame[frame["stop_reason"] != "converged"]
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
