"""Claims that GPU tutorials make, judged by a measurement: each function reads a results frame (``gpu.core.schema``)
and returns the numbers and the verdict that a talk scene shows. Nothing here is written in advance: change the
measurement and the verdict changes with it. No Streamlit, no CUDA."""

from __future__ import annotations

import math

import pandas as pd

from gpu.core import overlap
from gpu.core.errors import ClaimError
from gpu.core.units import format_bytes
from gpu.present import headlines


def _need(frame: pd.DataFrame, mask, what: str) -> pd.DataFrame:
    part = frame[mask]
    if part.empty:
        raise ClaimError(f"the measurement has no {what}")
    return part


def pinned_speedups(frame: pd.DataFrame, include_alloc: bool, direction: str = "h2d") -> pd.Series:
    """Pageable time ÷ pinned time per size (ascending), for copy-only or allocation-including points; ClaimError
    when the frame lacks either mode. The talk's verdicts and the pages' stage takeaways read it."""
    rows = _need(frame, (frame["include_alloc"].fillna(False) == include_alloc) & (frame["direction"] == direction),
                 f"{'allocation-including' if include_alloc else 'copy-only'} {direction.upper()} points")
    if not {"pinned", "pageable"} <= set(rows["variant"]):
        raise ClaimError("the measurement needs both pinned and pageable copies")
    return headlines.pinned_over_pageable(rows)


def pinned_up_to_2x(frame: pd.DataFrame) -> dict:
    """'Pinned memory is up to 2× faster': pinned ÷ pageable speed at the largest and the smallest size."""
    speed = pinned_speedups(frame, False)
    large, small = float(speed.iloc[-1]), float(speed.iloc[0])
    if large > 2.2:
        verdict = "Understated for large copies" + (", and no gain for small ones" if small < 1.1 else "")
    elif large < 1.8:
        verdict = "Overstated"
    else:
        verdict = "About right"
    return {"verdict": verdict, "large": large, "small": small, "large_size": format_bytes(speed.index[-1]),
            "small_size": format_bytes(speed.index[0])}


def pinned_allocated_per_call(frame: pd.DataFrame) -> dict:
    """'Pinned beats pageable' in code that allocates its pinned buffer on every call."""
    with_alloc = pinned_speedups(frame, True)
    copy_only = pinned_speedups(frame, False)
    size = with_alloc.index[-1]
    ratio = float(with_alloc.iloc[-1])
    pinned = _need(frame, (frame["variant"] == "pinned") & (frame["include_alloc"].fillna(False))
                   & (frame["direction"] == "h2d") & (frame["bytes"] == size), "pinned point with allocation")
    alloc_ms = float(pinned["median_ms"].iloc[0]) - float(
        frame[(frame["variant"] == "pinned") & ~frame["include_alloc"].fillna(False) & (frame["direction"] == "h2d")
              & (frame["bytes"] == size)]["median_ms"].iloc[0])
    verdict = f"False at {format_bytes(size)}" if ratio < 1 else f"True at {format_bytes(size)}"
    return {"verdict": verdict, "ratio": ratio, "copy_only": float(copy_only.get(size, math.nan)),
            "size": format_bytes(size), "alloc_s": alloc_ms / 1e3}


def misaligned_is_expensive(frame: pd.DataFrame) -> dict:
    """'Misaligned access is expensive': the worst misaligned read against the aligned one, same kernel."""
    offsets = _need(frame, frame["variant"] == "offset", "misaligned-read points").set_index("param_value")["gbps"]
    if 0 not in offsets.index or len(offsets) < 2:
        raise ClaimError("the measurement needs the aligned read (offset 0) and at least one misaligned one")
    misaligned = offsets.drop(index=0)
    worst_offset = int(misaligned.idxmin())
    cost = 1 - float(misaligned.min()) / float(offsets[0])
    verdict = "True" if cost > 0.2 else "Mostly false on this GPU"
    return {"verdict": verdict, "cost": cost, "worst_offset": worst_offset, "aligned": float(offsets[0])}


def non_coalesced_costs_1_2x(frame: pd.DataFrame) -> dict:
    """'Non-coalesced access costs about 1.2×': stride 1 over stride 2 and over the largest stride measured."""
    strides = _need(frame, frame["variant"] == "strided", "strided-read points").set_index("param_value")["gbps"]
    if 1 not in strides.index or len(strides) < 2:
        raise ClaimError("the measurement needs stride 1 and at least one larger stride")
    second = sorted(strides.index)[1]
    worst = max(strides.index)
    at_two, at_worst = float(strides[1] / strides[second]), float(strides[1] / strides[worst])
    verdict = "Depends on the stride" if at_worst > 1.5 else "True"
    return {"verdict": verdict, "at_two": at_two, "two": int(second), "at_worst": at_worst, "worst": int(worst)}


def atomic_dot_is_fine(frame: pd.DataFrame) -> dict:
    """'One atomicAdd per element is a fine dot product': against a warp-shuffle reduction, same run."""
    ms = frame.set_index("variant")["median_ms"]
    if not {"atomic_per_element", "warp_shuffle"} <= set(ms.index):
        raise ClaimError("the measurement needs the atomic-per-element and warp-shuffle variants")
    slower = float(ms["atomic_per_element"] / ms["warp_shuffle"])
    verdict = "False" if slower > 2 else "True"
    return {"verdict": verdict, "slower": slower, "atomic_ms": float(ms["atomic_per_element"]),
            "shuffle_ms": float(ms["warp_shuffle"])}


def streams_double_throughput(frame: pd.DataFrame) -> dict:
    """'Overlapping with streams doubles throughput': the best pinned pipeline that can overlap (≥ 2 chunks and
    ≥ 2 streams) against one stream; 'no measurable overlap' when its gain is within the noise."""
    table = overlap.pipeline_table(frame)
    pinned = table[table["host_memory"] == "pinned"]
    if pinned.empty:
        raise ClaimError("the measurement has no pinned pipeline")
    summary = overlap.overlap_summary(pinned)
    best = summary[summary["configurations"] > 0]
    if best.empty:
        raise ClaimError("the measurement has no pinned configuration that can overlap (≥ 2 chunks and ≥ 2 streams)")
    best = best.iloc[0]
    speedup = float(best["best_speedup"])
    if not best["gain_measurable"]:
        verdict = "False"
    else:
        verdict = "True" if speedup >= 1.9 else ("Close" if speedup >= 1.6 else "False")
    return {"verdict": verdict, "speedup": speedup, "efficiency": float(best["best_efficiency"]),
            "gain": overlap.gain_text(best), "streams": int(best["best_streams"]), "chunks": int(best["best_chunks"]),
            "bound_x": float(best["best_serial_ms"] / best["best_bound_ms"])}


CLAIMS = {f.__name__: f for f in (pinned_up_to_2x, pinned_allocated_per_call, misaligned_is_expensive,
                                  non_coalesced_costs_1_2x, atomic_dot_is_fine, streams_double_throughput)}
