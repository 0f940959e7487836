"""Figures and derived tables for the Memory modes page: managed memory, pools and batched copies.

No Streamlit here. Tables derive only from measured rows of one run (``gpu.core.schema``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gpu.core.units import format_bytes
from gpu.experiments import batching, host_latency, managed, pools
from gpu.present.charts._common import (
    LEGEND_BELOW,
    LOG_VALUE_AXIS,
    mark_not_clean,
    source_title,
    theoretical_lines,
    variant_parts,
)

COLORS = {"device": "#888888", "first_touch": "#EF553B", "prefetch": "#FFA15A", "after_prefetch": "#00CC96",
          "resident": "#636EFA", "device_per_call": "#FFA15A", "device_pooled": "#19D3F3",
          "pinned_per_call": "#EF553B", "pinned_pooled": "#636EFA", "separate": "#EF553B", "packed": "#FFA15A",
          "one_copy": "#636EFA"}


def _size_axis(values) -> dict:
    values = sorted({int(v) for v in values})
    return {"type": "log", "tickvals": values, "ticktext": [format_bytes(v) for v in values]}


def _per_variant(part: pd.DataFrame, column: str) -> pd.Series:
    """``column`` of one point's rows, by variant."""
    return part.set_index("variant")[column]


# --- managed memory -------------------------------------------------------------------------------------------
def managed_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per size: GB/s of each case, and the migration cost (first touch and prefetch+kernel over resident)."""
    rows = []
    for size, part in frame.groupby("bytes"):
        ms, gbps = _per_variant(part, "median_ms"), _per_variant(part, "gbps")
        resident = ms.get("resident", math.nan)
        rows.append({
            "bytes": int(size), **{f"{v} GB/s": gbps.get(v, math.nan) for v in managed.VARIANTS},
            "first touch extra ms": ms.get("first_touch", math.nan) - resident,
            "prefetch + kernel ms": ms.get("prefetch", math.nan) + ms.get("after_prefetch", math.nan),
            "first touch ÷ resident": ms.get("first_touch", math.nan) / resident if resident else math.nan,
        })
    return pd.DataFrame(rows)


def managed_figure(frame: pd.DataFrame) -> go.Figure:
    """GB/s of the checksum kernel in each managed-memory case (log scale), per size."""
    fig = go.Figure()
    for variant, part in variant_parts(frame, managed.VARIANTS, "bytes"):
        fig.add_trace(go.Bar(
            x=part["bytes"].map(format_bytes), y=part["gbps"], name=managed.LABELS[variant],
            marker={"color": COLORS[variant]}, text=[f"{g:,.1f}" for g in part["gbps"]], cliponaxis=False,
            textposition="auto",  # inside a tall bar (clear of the reference lines), above a short one
            customdata=np.column_stack([part["median_ms"], part["cv"] * 100, part["samples"]]),
            hovertemplate="%{y:,.1f} GB/s · median %{customdata[0]:.3f} ms · cv %{customdata[1]:.2f} % · "
                          "%{customdata[2]} samples<extra>%{fullData.name}</extra>"))
    theoretical_lines(fig, frame, {"hbm_gbps_theoretical": "HBM theoretical",
                                   "pcie_gbps_theoretical": "PCIe theoretical"}, log=True)
    fig.update_layout(title=source_title("Managed memory: a kernel reading the buffer (GB/s, log scale)", frame),
                      barmode="group", yaxis={**LOG_VALUE_AXIS, "title": "GB/s (10⁹ B/s)"}, xaxis_title="buffer size",
                      height=460, legend=LEGEND_BELOW)
    return fig


# --- pools ---------------------------------------------------------------------------------------------------
def pool_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per size: ms per iteration of each variant and the pool's saving (per call ÷ pooled)."""
    ms = frame.pivot_table(index="bytes", columns="variant", values="median_ms")
    out = pd.DataFrame({"bytes": ms.index.astype(int)})
    for variant in pools.VARIANTS:
        out[f"{variant} ms"] = ms[variant].to_numpy() if variant in ms else math.nan
    for kind in ("device", "pinned"):
        per_call, pooled = out[f"{kind}_per_call ms"], out[f"{kind}_pooled ms"]
        out[f"{kind}: per call ÷ pooled"] = per_call / pooled
    return out


def pool_crossover(table: pd.DataFrame, kind: str, factor: float = 2.0) -> int | None:
    """The smallest measured size from which allocating per call costs more than the copy itself, i.e. per call
    ÷ pooled ≥ ``factor`` (2) at that size and every larger one; None when no such size was measured."""
    column = f"{kind}: per call ÷ pooled"
    if column not in table or table[column].isna().all():
        return None
    ordered = table.sort_values("bytes")
    crossover = None
    for size, ratio in zip(ordered["bytes"], ordered[column], strict=True):
        if ratio >= factor:
            crossover = crossover or int(size)
        else:
            crossover = None
    return crossover


def pools_figure(frame: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for variant, part in variant_parts(frame, pools.VARIANTS, "bytes"):
        fig.add_trace(go.Scatter(
            x=part["bytes"], y=part["median_ms"] * 1e3, mode="lines+markers", name=pools.LABELS[variant],
            line={"color": COLORS[variant], "dash": "solid" if variant.endswith("pooled") else "dash"},
            customdata=np.column_stack([part["bytes"].map(format_bytes), part["cv"] * 100, part["samples"]]),
            hovertemplate="%{customdata[0]}: %{y:,.1f} µs per iteration · cv %{customdata[1]:.1f} % · "
                          "%{customdata[2]} iterations<extra>%{fullData.name}</extra>"))
        mark_not_clean(fig, part, "bytes", part["median_ms"] * 1e3)
    fig.update_layout(title=source_title("Allocate → copy → free: time per iteration", frame), xaxis=_size_axis(
        frame["bytes"]), yaxis={**LOG_VALUE_AXIS, "title": "µs per iteration (median)"}, xaxis_title="buffer size",
        height=440, legend=LEGEND_BELOW)
    return fig


# --- batching --------------------------------------------------------------------------------------------------
def batching_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per piece size: effective GB/s of each way and the per-copy overhead (separate − one copy) / K in µs."""
    rows = []
    for (piece, count), part in frame.groupby(["param_value", "chunks"]):
        ms, gbps = _per_variant(part, "median_ms"), _per_variant(part, "gbps")
        rows.append({"piece bytes": int(piece), "pieces": int(count),
                     **{f"{v} GB/s": gbps.get(v, math.nan) for v in batching.VARIANTS},
                     "per-copy overhead µs": (ms.get("separate", math.nan) - ms.get("one_copy", math.nan))
                     / count * 1e3})
    return pd.DataFrame(rows)


def batching_figure(frame: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for variant, part in variant_parts(frame, batching.VARIANTS, "param_value"):
        fig.add_trace(go.Scatter(
            x=part["param_value"], y=part["gbps"], mode="lines+markers", name=batching.LABELS[variant],
            line={"color": COLORS[variant]},
            customdata=np.column_stack([part["param_value"].map(format_bytes), part["chunks"],
                                        part["median_ms"] * 1e3, part["cv"] * 100]),
            hovertemplate="%{customdata[1]} × %{customdata[0]}: %{y:.2f} GB/s · %{customdata[2]:,.1f} µs in all · "
                          "cv %{customdata[3]:.1f} %<extra>%{fullData.name}</extra>"))
        mark_not_clean(fig, part, "param_value", "gbps")
    theoretical_lines(fig, frame, {"pcie_gbps_theoretical": "PCIe theoretical"}, log=True)
    fig.update_layout(title=source_title("K small copies vs one copy (effective GB/s of all K pieces)", frame),
                      xaxis={**_size_axis(frame["param_value"]), "title": "piece size s"},
                      yaxis={**LOG_VALUE_AXIS, "title": "effective GB/s (K·s / time)"}, height=440,
                      legend=LEGEND_BELOW)
    return fig


# --- host-memory latency ---------------------------------------------------------------------------------------
def host_latency_figure(frame: pd.DataFrame) -> go.Figure:
    """Nanoseconds per dependent load (log scale) against the chain's working set: mapped host memory (zero-copy)
    and device memory, one line each, from the pointer-chase rows of one run."""
    fig = go.Figure()
    # Labels above the host line and below the device line: at small working sets the two nearly meet.
    styles = {"mapped": ("#AB63FA", "square", "solid", "top center"),
              "device": ("#636EFA", "circle", "dot", "bottom center")}
    for variant, part in variant_parts(frame, styles, "param_value"):
        color, marker, dash, place = styles[variant]
        ns = part["median_ms"] * 1e6 / part["elements"]  # elements: the dependent loads of one sample
        fig.add_trace(go.Scatter(
            x=part["param_value"], y=ns, mode="lines+markers+text", name=host_latency.LABELS[variant],
            line={"color": color, "dash": dash, "width": 3}, marker={"symbol": marker, "size": 10},
            text=[f"{v:,.0f} ns" for v in ns], textposition=place, cliponaxis=False,
            customdata=np.column_stack([part["param_value"].map(format_bytes), part["elements"], part["cv"] * 100]),
            hovertemplate="%{customdata[0]} chain · %{y:,.1f} ns per load · %{customdata[1]:,} loads a sample · "
                          "cv %{customdata[2]:.2f} %<extra>%{fullData.name}</extra>"))
        mark_not_clean(fig, part, "param_value", ns)
    fig.update_layout(title=source_title(
                          "Host-memory latency: one GPU thread chasing pointers (ns per load, log scale)", frame),
                      xaxis={**_size_axis(frame["param_value"]), "title": "chain's working set"},
                      yaxis={**LOG_VALUE_AXIS, "title": "ns per dependent load"}, height=460,
                      legend=LEGEND_BELOW)
    return fig
