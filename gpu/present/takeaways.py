"""One-sentence takeaways, computed from a page's results, shown under its chart on stage (presentation mode).

Each function reads a results frame in the schema of ``gpu.core.schema`` and returns a sentence with the numbers it
found, or None when the frame lacks what the sentence needs. Nothing is written in advance: change the data and
the sentence changes. No Streamlit, no CUDA."""

from __future__ import annotations

import pandas as pd

from gpu.core import text
from gpu.core.overlap import gain_text as overlap_gain
from gpu.core.units import format_bytes
from gpu.present import facts
from gpu.present.claims import ClaimError, pinned_allocated_per_call, pinned_speedups
from gpu.results import peer_matrix
from gpu.results.analysis import causes, compare, normal

_ratio_text = facts.ratio_text  # the one style of a speed ratio, as the talk's verdicts write it


def transfers(frame: pd.DataFrame) -> str | None:
    """Pinned against pageable host-to-device speed at the largest and smallest size, and allocated per copy."""
    def speedups(include_alloc: bool) -> pd.Series:
        try:
            return pinned_speedups(frame, include_alloc)
        except ClaimError:
            return pd.Series(dtype=float)

    copy_only = speedups(False)
    if copy_only.empty:
        return None
    line = f"Host → device: pinned copies {_ratio_text(copy_only.iloc[-1])} as fast as pageable at " \
           f"{format_bytes(copy_only.index[-1])}"
    if len(copy_only) > 1:
        line += f", {_ratio_text(copy_only.iloc[0])} at {format_bytes(copy_only.index[0])}"
    per_call = speedups(True)
    if not per_call.empty:
        try:  # what the allocation itself costs, as the talk's verdict says it
            cost = f" ({pinned_allocated_per_call(frame)['alloc_text']} each)"
        except (ClaimError, IndexError, KeyError):
            cost = ""
        line += f"; allocated per copy{cost}, {_ratio_text(per_call.iloc[-1])} at {format_bytes(per_call.index[-1])}"
    return line + "."


def _sentence(parts: list[str]) -> str | None:
    """Clauses joined into one sentence, capitalised; None when there are none."""
    if not parts:
        return None
    joined = "; ".join(parts)
    return joined[0].upper() + joined[1:] + "."


def _found(fact, frame: pd.DataFrame) -> dict | None:
    """A figure of ``gpu.present.facts``, or None when the frame lacks what it needs."""
    try:
        return fact(frame)
    except ClaimError:
        return None


def coalescing(frame: pd.DataFrame) -> str | None:
    """What strided and misaligned reads cost against the contiguous read of the same bytes (one baseline, named)."""
    parts = []
    strides = _found(facts.stride_costs, frame)
    if strides:
        parts.append(f"against {strides['baseline']}, stride {strides['two']} "
                     f"costs {strides['at_two_text']} and reads {text.count(strides['worst'], 'float')} apart cost "
                     f"{strides['at_worst_text']} ({strides['worst_gbps']:,.0f} GB/s)")
    offsets = _found(facts.misaligned_cost, frame)
    if offsets:
        parts.append(f"misaligned reads cost at most {offsets['cost_text']}"
                     + ("" if strides else f" against {offsets['baseline']}"))
    return _sentence(parts)


def reduction(frame: pd.DataFrame) -> str | None:
    """The best reduction's bandwidth, and what an atomicAdd per element costs against it."""
    best = _found(facts.best_reduction, frame)
    if best is None:
        return None
    line = f"The best of our reductions here ({best['label']}) reads {best['gbps']:,.0f} GB/s"
    atomic = _found(facts.atomic_slowdown, frame)
    if atomic:
        line += (f"; one atomicAdd per element is {atomic['slower_text']} slower than {atomic['baseline_label']} "
                 f"({text.count(best['elements'], 'float')}, block {best['block']})")
    return line + "."


def occupancy(frame: pd.DataFrame) -> str | None:
    """Where each kernel peaks, and how little occupancy the memory-bound copy needs."""
    parts = []
    for variant, label in (("stream", "the memory-bound copy"), ("chase", "the latency-bound chase")):
        mine = frame[frame["variant"] == variant]
        if mine.empty:
            continue
        top = mine.loc[mine["gbps"].idxmax()]
        parts.append(f"{label} peaks at {top['gbps']:,.0f} GB/s with blocks of {int(top['block_size'])} "
                     f"({text.percent(top['theoretical_occupancy'])} occupancy)")
    return _sentence(parts)


def streams(frame: pd.DataFrame) -> str | None:
    """The best pipeline that can overlap against one stream, per host memory, or 'no measurable overlap'."""
    try:
        found = facts.best_pipelines(frame)
    except ClaimError:
        return None
    parts = [(f"{best['host_memory']}: {best['config']} run {best['speedup_text']} as fast as one stream "
              f"({overlap_gain(best)}; {best['searched_text']})" if best["gain_measurable"] else
              f"{best['host_memory']}: no measurable overlap ({best['config']} against one stream)")
             + f"; the ceiling here is {best['ceiling_text']}" for best in found]
    return _sentence(parts)


def managed(frame: pd.DataFrame) -> str | None:
    """First touch against resident, at the largest size measured."""
    if frame.empty:
        return None
    ms = frame[frame["bytes"] == frame["bytes"].max()].set_index("variant")["gbps"]
    if not {"first_touch", "resident"} <= set(ms.index):
        return None
    return (f"Managed memory on first touch moves {ms['first_touch']:,.1f} GB/s at "
            f"{format_bytes(frame['bytes'].max())}; once resident the same kernel "
            f"reads {ms['resident']:,.0f} GB/s ({ms['resident'] / ms['first_touch']:,.0f}× faster).")


def _rate_range(values: pd.Series, unit: str) -> str:
    """"391 GB/s", or "388–396 GB/s" where the figures differ once rounded."""
    low, high = f"{values.min():,.0f}", f"{values.max():,.0f}"
    return f"{low} {unit}" if low == high else f"{low}–{high} {unit}"


def peers(frame: pd.DataFrame, view: peer_matrix.View | None = None) -> str | None:
    """The matrix in the view (by default the batched copy engine at its largest size): the rates of every pair and
    their link, the slowest pair where it is slow for its link type, both directions at once, and the latency."""
    view = view or peer_matrix.default_view(frame)
    rows = peer_matrix.matrix_rows(frame, view) if view else frame.iloc[:0]
    if rows.empty:
        return None
    links = rows["link"].map(lambda v: peer_matrix.link_of(v).text)
    common = links.mode().iloc[0]
    over = f" over {common}" if common else ""
    usual = rows[links == common]
    every = peer_matrix.gpus(frame)
    pairs = f"GPU {every[0]} and GPU {every[1]}" if len(every) == 2 else text.count(len(usual), "ordered pair")
    method = peer_matrix.METHODS.get(view.timer, view.timer)
    parts = [f"at {format_bytes(view.size)} ({peer_matrix.LABELS.get(view.variant, view.variant)}, {method}) "
             f"{pairs} copy {_rate_range(usual['gbps'], 'GB/s')} one way{over}"]
    for link, other in rows[links != common].groupby(links[links != common]):
        parts.append(f"{text.count(len(other), 'ordered pair')} {'go' if len(other) > 1 else 'goes'} "
                     f"{link or 'by a link not named'} at {_rate_range(other['gbps'], 'GB/s')}")
    slow = peer_matrix.slow_pairs(frame, view)
    if not slow.empty:
        worst = slow.iloc[0]
        source, destination = (worst["a"], worst["b"]) if not worst["forward"] > worst["backward"] else \
            (worst["b"], worst["a"])
        parts.append(f"GPU {source} → GPU {destination} is slow at {worst['one_way']:,.0f} GB/s, "
                     f"{text.percent(worst['of_median'])} of the median {worst['kind']} pair")
    both = peer_matrix.matrix_rows(frame, peer_matrix.View(peer_matrix.BIDIRECTIONAL, view.timer, view.size))
    if not both.empty:
        ends = both[["source", "destination"]]
        totals = both.groupby([ends.min(axis=1), ends.max(axis=1)])["gbps"].sum()
        parts.append(f"both ways at once {_rate_range(totals, 'GB/s')} a pair")
    latency = peer_matrix.latency_view(frame)
    if latency is not None:
        chased = peer_matrix.matrix_rows(frame, latency)
        parts.append(f"latency into the peer's memory {_rate_range(peer_matrix.ns_per_access(chased), 'ns')}")
    return _sentence(parts)


def context(frame: pd.DataFrame, stage: bool = False) -> str | None:
    """The line under a page's headline or takeaway: is its headline figure normal (``gpu.results.analysis.normal``:
    against its physical limit and the bundled recording of its GPU model), and how many of its points were not clean
    and why; a run no witness watched says so. On stage (``stage``), where the chart and takeaway fill the screen, only
    the points that were not clean are said, and None when there are none."""
    if frame.empty:
        return None
    seen = causes.count_line(frame)
    if stage:
        return seen + "." if seen and causes.of_frame(frame).map(causes.has_causes).any() else None
    figure = normal.is_this_normal(frame)
    parts = [f"Is this normal? {figure}"] if figure else []
    parts += [seen] if seen else []
    return ". ".join(parts) + "." if parts else None


def comparison_context(baseline: pd.DataFrame, candidate: pd.DataFrame) -> str:
    """Under a comparison's headline: each run's headline figure against its limit and the bundled recording of its
    model (``normal.is_this_normal``), and both runs' conditions (``compare.conditions_words``)."""
    figures = [f"{role} {said}" for role, frame in (("candidate", candidate), ("baseline", baseline))
               for said in [normal.is_this_normal(frame)] if said]
    return ("Is this normal? " + "; ".join(figures) + ". " if figures else "") + \
        f"Conditions: {compare.conditions_words(baseline, candidate)}."
