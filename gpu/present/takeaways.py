"""One-sentence takeaways, computed from a page's results, shown under its chart on stage (presentation mode).

Each function reads a results frame in the schema of ``gpu.core.schema`` and returns a sentence with the numbers it
found, or None when the frame lacks what the sentence needs. Nothing is written in advance: change the data and
the sentence changes. No Streamlit, no CUDA."""

from __future__ import annotations

import pandas as pd

from gpu.core import overlap, text
from gpu.core.units import format_bytes
from gpu.experiments.reduction import LABELS as REDUCTION_LABELS
from gpu.present.claims import ClaimError, pinned_speedups


def _ratio_text(value: float) -> str:
    return f"{value:.1f}×" if value >= 1.95 else f"{value:.2f}×"


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
    line = f"Pinned host memory copies {_ratio_text(copy_only.iloc[-1])} as fast as pageable at " \
           f"{format_bytes(copy_only.index[-1])}"
    if len(copy_only) > 1:
        line += f", {_ratio_text(copy_only.iloc[0])} at {format_bytes(copy_only.index[0])}"
    per_call = speedups(True)
    if not per_call.empty:
        line += f"; allocated per copy it is {_ratio_text(per_call.iloc[-1])} at {format_bytes(per_call.index[-1])}"
    return line + " (host → device)."


def _sentence(parts: list[str]) -> str | None:
    """Clauses joined into one sentence, capitalised; None when there are none."""
    if not parts:
        return None
    joined = "; ".join(parts)
    return joined[0].upper() + joined[1:] + "."


def _one_configuration(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of one vector size and block size (the largest size; block 256 where measured), so a sentence
    never mixes configurations of a recording that holds several."""
    if frame.empty:
        return frame
    frame = frame[frame["elements"] == frame["elements"].max()]
    blocks = set(frame["block_size"].dropna())
    block = 256 if 256 in blocks else min(blocks, default=None)
    return frame if block is None else frame[frame["block_size"] == block]


def coalescing(frame: pd.DataFrame) -> str | None:
    """How much bandwidth scattered and misaligned reads lose against contiguous ones."""
    frame = _one_configuration(frame)
    parts = []
    strided = frame[frame["variant"] == "strided"].set_index("param_value")["gbps"]
    if 1 in strided.index and len(strided) > 1:
        worst = int(strided.idxmin())
        parts.append(f"reads {text.count(worst, 'float')} apart get {strided[worst]:,.0f} GB/s; contiguous ones "
                     f"get {strided[1]:,.0f} GB/s, {text.times(strided[1] / strided[worst])} as much")
    offset = frame[frame["variant"] == "offset"].set_index("param_value")["gbps"]
    if 0 in offset.index and len(offset) > 1:
        parts.append(f"misaligned reads cost at most {text.percent(1 - offset.drop(index=0).min() / offset[0])}")
    return _sentence(parts)


def reduction(frame: pd.DataFrame) -> str | None:
    """The best reduction's bandwidth, and what an atomicAdd per element costs against it."""
    kernels = _one_configuration(frame[frame["group"] == "kernel"])
    if kernels.empty:
        return None
    best = kernels.loc[kernels["gbps"].idxmax()]
    name = REDUCTION_LABELS.get(best["variant"], best["variant"])
    line = f"The best reduction here ({name}) reads {best['gbps']:,.0f} GB/s"
    ms = kernels.set_index("variant")["median_ms"]
    if "atomic_per_element" in ms.index and best["variant"] != "atomic_per_element":
        # The baseline is named: the talk compares against warp_shuffle, so its figure differs from this one.
        line += (f"; one atomicAdd per element is {text.times(ms['atomic_per_element'] / best['median_ms'], 0)} "
                 f"slower than {name} ({text.count(int(best['elements']), 'float')}, "
                 f"block {int(best['block_size'])})")
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
    table = overlap.pipeline_table(frame)
    if table.empty:
        return None
    parts = []
    summary = overlap.overlap_summary(table)
    # One sentence per host memory, at its lightest kernel (the copy-bound case the page opens with).
    summary = summary.sort_values("intensity", kind="stable").drop_duplicates("host_memory")
    for best in summary.to_dict("records"):
        if not best["configurations"]:
            continue
        config = overlap.config_text(best["best_streams"], best["best_chunks"], best["best_order"])
        parts.append(f"{best['host_memory']}: {config} run {best['best_speedup']:.2f}× as fast as one stream "
                     f"({overlap.gain_text(best)})" if best["gain_measurable"] else
                     f"{best['host_memory']}: no measurable overlap ({config} against one stream)")
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
