"""How the reduction experiment is shown: its Plotly figures (kernel-only GB/s per dot product, where an end-to-end
job's time goes), its figures said on the page, on stage and in the talk (the best reduction, what an atomicAdd per
element costs against it), its stage takeaway, its desk headline and the talk's judge of the atomic dot product. No
Streamlit here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gpu.core import text
from gpu.core.errors import ClaimError
from gpu.experiments.reduction import LABELS as REDUCTION_LABELS
from gpu.experiments.reduction import LIBRARY
from gpu.present.charts._common import LOG_VALUE_AXIS, mark_not_clean, source_title
from gpu.present.claims import beyond
from gpu.present.facts import one_configuration, ratio_text
from gpu.present.takeaways import fact_or_none


def reduction_figure(frame: pd.DataFrame) -> go.Figure:
    """Kernel-only GB/s per dot-product variant (log scale: the seed's atomics are ~1000× slower)."""
    part = frame[frame["group"] == "kernel"]
    order = [v for v in REDUCTION_LABELS if v in set(part["variant"])]
    part = part.set_index("variant").loc[order].reset_index()
    fig = go.Figure(go.Bar(
        x=[REDUCTION_LABELS[v] for v in part["variant"]], y=part["gbps"], text=[f"{g:,.0f}" for g in part["gbps"]],
        textposition="outside", cliponaxis=False,
        marker_color=["#7F7F7F" if v == "gpuarray_dot" else "#636EFA" for v in part["variant"]],
        customdata=np.column_stack([part["median_ms"], part["rel_error"], part["samples"]]),
        hovertemplate="%{x}: %{y:,.0f} GB/s<br>median %{customdata[0]:.3f} ms · relative error %{customdata[1]:.1e}"
                      " · %{customdata[2]} samples<extra></extra>"))
    mark_not_clean(fig, part, [REDUCTION_LABELS[v] for v in part["variant"]], "gbps")
    fig.update_yaxes(**LOG_VALUE_AXIS, title_text="GB/s read (both vectors, 10⁹ B/s)")
    title = "Dot product, kernel only" + (" (grey: PyCUDA's gpuarray.dot)" if "gpuarray_dot" in order else "")
    fig.update_layout(title=source_title(title, frame), height=440, showlegend=False)
    return fig


def end_to_end_figure(frame: pd.DataFrame) -> go.Figure:
    """Milliseconds for the whole job (copies + kernel + result) vs the kernel alone."""
    wanted = ["grid_stride", "end_to_end_pinned", "end_to_end_pageable"]
    part = frame[frame["variant"].isin(wanted)].set_index("variant")
    order = [v for v in wanted if v in part.index]
    labels = {"grid_stride": "kernel only (grid-stride)", "end_to_end_pinned": "host → GPU → result, pinned",
              "end_to_end_pageable": "host → GPU → result, pageable"}
    fig = go.Figure(go.Bar(
        y=[labels[v] for v in order], x=[part.loc[v, "median_ms"] for v in order], orientation="h",
        text=[f"{part.loc[v, 'median_ms']:.2f} ms" for v in order], textposition="outside", cliponaxis=False,
        marker_color=["#636EFA", "#EF553B", "#00CC96"][:len(order)],
        hovertemplate="%{y}: %{x:.3f} ms<extra></extra>"))
    fig.update_layout(title=source_title("Where the time goes: transfers swamp the kernel", frame),
                      xaxis={"title": "median time (ms)", "range": [0, 1.25 * max(part["median_ms"], default=1)]},
                      height=320, showlegend=False)
    return fig


# --- the best reduction and the atomic dot product against it (the page, the stage and the talk) --------------------
def best_reduction(frame: pd.DataFrame) -> dict:
    """The fastest of PinPoint's reduction kernels (not the library's) in the configuration shown."""
    kernels = one_configuration(frame[frame["group"] == "kernel"])
    ours = kernels[kernels["variant"] != LIBRARY]
    if ours.empty:
        raise ClaimError("the measurement has no reduction kernel")
    best = ours.loc[ours["gbps"].idxmax()]
    library = kernels[kernels["variant"] == LIBRARY]["gbps"]
    return {"variant": best["variant"], "label": REDUCTION_LABELS[best["variant"]],
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


def takeaway(frame: pd.DataFrame) -> str | None:
    """The best reduction's bandwidth, and what an atomicAdd per element costs against it."""
    best = fact_or_none(best_reduction, frame)
    if best is None:
        return None
    line = f"The best of our reductions here ({best['label']}) reads {best['gbps']:,.0f} GB/s"
    atomic = fact_or_none(atomic_slowdown, frame)
    if atomic:
        line += (f"; one atomicAdd per element is {atomic['slower_text']} slower than {atomic['baseline_label']} "
                 f"({text.count(best['elements'], 'float')}, block {best['block']})")
    return line + "."


def reduction_best(frame: pd.DataFrame, labels: dict[str, str]) -> str | None:
    """The fastest of our kernels (``best_reduction``, as the stage says it) against gpuarray.dot, and the
    HBM's theoretical rate."""
    try:
        best = best_reduction(frame)
    except ClaimError:
        return None
    if best["library_gbps"] is None:
        return None
    return (f"**Best: {labels[best['variant']]} at {best['gbps']:,.0f} GB/s, "
            f"{best['gbps'] / best['library_gbps']:.2f}× gpuarray.dot** ({best['library_gbps']:,.0f} GB/s) · "
            f"HBM theoretical {frame['hbm_gbps_theoretical'].iloc[0]:,.0f} GB/s")


# The talk's charts of a reduction scene, by the name its talk file gives them (``chart = "reduction"``).
TALK_FIGURES = {"reduction": reduction_figure}


# The talk's judge of a reduction scene (``gpu.present.claims``), on a figure the page says too.
atomic_dot_is_fine = beyond(
    "atomic_dot_is_fine", atomic_slowdown, "slower", 2, "False", "True",
    """'One atomicAdd per element is a fine dot product': against the fastest reduction measured beside it
    (``atomic_slowdown``, as the Reductions page says it).""")

CLAIMS = {atomic_dot_is_fine.__name__: atomic_dot_is_fine}
# The figures of the verdict that the page's stage takeaway shows too, as text (tests/test_one_fact.py).
SHARED_FIGURES = {"atomic_dot_is_fine": ("slower_text", "baseline_label")}
