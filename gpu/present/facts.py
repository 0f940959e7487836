"""Figures that appear in more than one place (a page's stage takeaway and desk headline, a talk's verdict), each
worked out by one function here that also names what it is measured against. Callers format the figure with the
``*_text`` values given, so a ratio reads the same wherever it is shown ("1.24×" on the page and in the talk).

Each function reads a results frame (``gpu.core.schema``) and raises ``ClaimError`` (saying what is missing) when the
frame lacks what the figure needs. No Streamlit, no CUDA."""

from __future__ import annotations

import pandas as pd

from gpu.core import overlap, text
from gpu.core.errors import ClaimError
from gpu.experiments import coalescing as coalescing_experiment
from gpu.experiments import reduction as reduction_experiment


def ratio_text(value: float) -> str:
    """A speed ratio in the one style of verdicts: two decimals below 1.95× (where the second digit matters), one
    above, none from 100× on."""
    if value >= 100:
        return text.times(value, 0)
    return text.times(value, 1) if value >= 1.95 else text.times(value, 2)


def one_configuration(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of one vector size and block size (the largest size; block 256 where measured), so a figure never
    mixes configurations of a recording that holds several."""
    if frame.empty:
        return frame
    frame = frame[frame["elements"] == frame["elements"].max()]
    blocks = set(frame["block_size"].dropna())
    block = 256 if 256 in blocks else min(blocks, default=None)
    return frame if block is None else frame[frame["block_size"] == block]


# --- coalescing: the strided and misaligned reads against the one contiguous read -----------------------------------
def contiguous_reference(frame: pd.DataFrame) -> dict:
    """The contiguous read the access patterns are judged against (``coalescing.CONTIGUOUS_REFERENCE``, the same
    bytes with one load and one store per thread), in the configuration shown."""
    variant = coalescing_experiment.CONTIGUOUS_REFERENCE
    rows = frame[frame["variant"] == variant]
    if rows.empty:
        raise ClaimError(f"the measurement has no contiguous read ({coalescing_experiment.LABELS[variant]})")
    gbps = float(rows["gbps"].iloc[0])
    return {"gbps": gbps, "label": coalescing_experiment.LABELS[variant],
            "baseline": f"the contiguous read ({coalescing_experiment.LABELS[variant]}, {gbps:,.0f} GB/s)"}


def stride_costs(frame: pd.DataFrame) -> dict:
    """What each stride costs: the contiguous read's GB/s ÷ the strided read's, for the second-smallest stride
    measured (``two``) and the largest (``worst``)."""
    frame = one_configuration(frame)
    strides = frame[frame["variant"] == "strided"].set_index("param_value")["gbps"]
    strides = strides[strides.index > 1]
    if strides.empty:
        raise ClaimError("the measurement needs at least one stride above 1")
    reference = contiguous_reference(frame)
    two, worst = int(min(strides.index)), int(max(strides.index))
    at_two, at_worst = reference["gbps"] / float(strides[two]), reference["gbps"] / float(strides[worst])
    return {"two": two, "at_two": at_two, "at_two_text": ratio_text(at_two), "worst": worst, "at_worst": at_worst,
            "at_worst_text": ratio_text(at_worst), "worst_gbps": float(strides[worst]),
            "reference_gbps": reference["gbps"], "baseline": reference["baseline"]}


def misaligned_cost(frame: pd.DataFrame) -> dict:
    """The slowest misaligned read (offsets not a multiple of 32 floats, i.e. of 128 bytes) against the contiguous
    read: 1 − its GB/s ÷ the reference's."""
    frame = one_configuration(frame)
    offsets = frame[frame["variant"] == "offset"].set_index("param_value")["gbps"]
    misaligned = offsets[[int(o) % 32 != 0 for o in offsets.index]]
    if misaligned.empty:
        raise ClaimError("the measurement needs at least one misaligned read (an offset that is not a multiple of 32)")
    reference = contiguous_reference(frame)
    worst = int(misaligned.idxmin())
    cost = 1 - float(misaligned.min()) / reference["gbps"]
    return {"worst_offset": worst, "cost": cost, "cost_text": text.percent(cost, 1), "aligned": reference["gbps"],
            "baseline": reference["baseline"]}


# --- reductions ------------------------------------------------------------------------------------------------------
def best_reduction(frame: pd.DataFrame) -> dict:
    """The fastest of PinPoint's reduction kernels (not the library's) in the configuration shown."""
    kernels = one_configuration(frame[frame["group"] == "kernel"])
    ours = kernels[kernels["variant"] != reduction_experiment.LIBRARY]
    if ours.empty:
        raise ClaimError("the measurement has no reduction kernel")
    best = ours.loc[ours["gbps"].idxmax()]
    library = kernels[kernels["variant"] == reduction_experiment.LIBRARY]["gbps"]
    return {"variant": best["variant"], "label": reduction_experiment.LABELS[best["variant"]],
            "gbps": float(best["gbps"]), "ms": float(best["median_ms"]), "elements": int(best["elements"]),
            "block": int(best["block_size"]), "searched": len(ours),
            "library_gbps": float(library.iloc[0]) if not library.empty else None}


def atomic_slowdown(frame: pd.DataFrame) -> dict:
    """One atomicAdd per element against the fastest of our reductions measured beside it (same size and block)."""
    best = best_reduction(frame)
    kernels = one_configuration(frame[frame["group"] == "kernel"])
    atomic = kernels[kernels["variant"] == "atomic_per_element"]["median_ms"]
    if atomic.empty or best["variant"] == "atomic_per_element":
        raise ClaimError("the measurement needs the atomic-per-element variant and a faster reduction beside it")
    slower = float(atomic.iloc[0]) / best["ms"]
    return {"slower": slower, "slower_text": ratio_text(slower), "atomic_ms": float(atomic.iloc[0]),
            "baseline_ms": best["ms"], "baseline_label": best["label"],
            "baseline": f"the fastest of {text.count(best['searched'] - 1, 'other reduction')} measured, "
                        f"{best['label']}"}


# --- streams ---------------------------------------------------------------------------------------------------------
def best_pipelines(frame: pd.DataFrame) -> list[dict]:
    """Per host memory, at its lightest kernel (the copy-bound case the page opens with): the best pipeline that
    can overlap against one stream, with how many configurations were searched (``searched``)."""
    table = overlap.pipeline_table(frame)
    if table.empty:
        raise ClaimError("the measurement has no pipeline")
    summary = overlap.overlap_summary(table)
    summary = summary.sort_values("intensity", kind="stable").drop_duplicates("host_memory")
    found = []
    for best in summary.to_dict("records"):
        searched = int(best["configurations"])
        if not searched:
            continue
        config = overlap.config_text(best["best_streams"], best["best_chunks"], best["best_order"])
        found.append({**best, "config": config, "searched": searched,
                      "speedup_text": text.times(best["best_speedup"], 2),
                      "searched_text": "the only pipeline measured that can overlap" if searched == 1 else
                      f"the best of {searched} pipelines measured that can overlap",
                      "ceiling": float(best["best_serial_ms"] / best["best_bound_ms"]),
                      "ceiling_text": text.times(best["best_serial_ms"] / best["best_bound_ms"], 2)})
    return found


def pinned_best_pipeline(frame: pd.DataFrame) -> dict:
    """``best_pipelines`` for pinned host memory."""
    found = [b for b in best_pipelines(frame) if b["host_memory"] == "pinned"]
    if not found:
        raise ClaimError("the measurement has no pinned configuration that can overlap (≥ 2 chunks and ≥ 2 streams)")
    return found[0]

