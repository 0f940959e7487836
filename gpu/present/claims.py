"""Claims that GPU tutorials make, judged by a measurement: each function reads a results frame (``gpu.core.schema``)
and returns the numbers and the verdict that a talk scene shows. Nothing here is written in advance: change the
measurement and the verdict changes with it. No Streamlit, no CUDA."""

from __future__ import annotations

import math

import pandas as pd

from gpu.core import overlap
from gpu.core.errors import ClaimError
from gpu.core.units import format_bytes
from gpu.present import facts, headlines


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
            "small_size": format_bytes(speed.index[0]), "large_text": facts.ratio_text(large),
            "small_text": facts.ratio_text(small)}


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
    copy_ratio = float(copy_only.get(size, math.nan))
    return {"verdict": verdict, "ratio": ratio, "ratio_text": facts.ratio_text(ratio), "copy_only": copy_ratio,
            "copy_only_text": facts.ratio_text(copy_ratio), "size": format_bytes(size), "alloc_s": alloc_ms / 1e3,
            "alloc_text": f"{alloc_ms / 1e3:.2f} s"}


def _beyond(name: str, fact, figure: str, limit: float, beyond: str, within: str, doc: str):
    """A claim judged on one figure of a fact that a page also states (``gpu.present.facts``): the verdict is
    ``beyond`` when the figure exceeds ``limit``, else ``within``; the fact's numbers come with it."""
    def judge(frame: pd.DataFrame) -> dict:
        found = fact(frame)
        return {"verdict": beyond if found[figure] > limit else within, **found}

    judge.__name__ = judge.__qualname__ = name
    judge.__doc__ = doc
    return judge


misaligned_is_expensive = _beyond(
    "misaligned_is_expensive", facts.misaligned_cost, "cost", 0.2, "True", "Mostly false on this GPU",
    """'Misaligned access is expensive': the worst misaligned read against the contiguous read of the same bytes
    (``facts.misaligned_cost``, as the Coalescing page says it).""")

non_coalesced_costs_1_2x = _beyond(
    "non_coalesced_costs_1_2x", facts.stride_costs, "at_worst", 1.5, "Depends on the stride", "True",
    """'Non-coalesced access costs about 1.2×': the contiguous read over stride 2 and over the largest stride
    measured (``facts.stride_costs``, as the Coalescing page says it).""")

atomic_dot_is_fine = _beyond(
    "atomic_dot_is_fine", facts.atomic_slowdown, "slower", 2, "False", "True",
    """'One atomicAdd per element is a fine dot product': against the fastest reduction measured beside it
    (``facts.atomic_slowdown``, as the Reductions page says it).""")


def streams_double_throughput(frame: pd.DataFrame) -> dict:
    """'Overlapping with streams doubles throughput': the best pinned pipeline that can overlap (≥ 2 chunks and
    ≥ 2 streams) against one stream, among those measured (``facts.pinned_best_pipeline``, as the Streams page says
    it); 'no measurable overlap' when its gain is within the noise."""
    best = facts.pinned_best_pipeline(frame)
    speedup = float(best["best_speedup"])
    if not best["gain_measurable"]:
        verdict = "False"
    else:
        verdict = "True" if speedup >= 1.9 else ("Close" if speedup >= 1.6 else "False")
    return {"verdict": verdict, "speedup": speedup, "speedup_text": best["speedup_text"],
            "efficiency": float(best["best_efficiency"]), "gain": overlap.gain_text(best),
            "streams": int(best["best_streams"]), "chunks": int(best["best_chunks"]), "config": best["config"],
            "searched": best["searched"], "searched_text": best["searched_text"], "bound_x": best["ceiling"],
            "ceiling_text": best["ceiling_text"]}


CLAIMS = {f.__name__: f for f in (pinned_up_to_2x, pinned_allocated_per_call, misaligned_is_expensive,
                                  non_coalesced_costs_1_2x, atomic_dot_is_fine, streams_double_throughput)}

# The figures of each verdict that a page also shows (its stage takeaway), as text: tests/test_one_fact.py holds
# every talk verdict against the page of the same recording with these.
SHARED_FIGURES = {"pinned_up_to_2x": ("large_text", "small_text"),
                  "pinned_allocated_per_call": ("ratio_text", "alloc_text"),
                  "misaligned_is_expensive": ("cost_text",),
                  "non_coalesced_costs_1_2x": ("at_two_text", "at_worst_text"),
                  "atomic_dot_is_fine": ("slower_text", "baseline_label"),
                  "streams_double_throughput": ("speedup_text", "config", "searched_text", "ceiling_text")}
