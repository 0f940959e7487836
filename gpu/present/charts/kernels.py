"""Plotly figures for the kernel pages (coalescing, reductions, occupancy). No Streamlit here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gpu.core.occupancy import DeviceLimits, KernelResources, occupancy
from gpu.core.text import chart_text
from gpu.core.units import format_bytes
from gpu.experiments.coalescing import CONTIGUOUS_REFERENCE
from gpu.experiments.coalescing import LABELS as COALESCING_LABELS
from gpu.experiments.occupancy_sweep import LABELS as OCCUPANCY_LABELS
from gpu.experiments.reduction import LABELS as REDUCTION_LABELS
from gpu.present.charts._common import LEGEND_BELOW, LOG_VALUE_AXIS, mark_not_clean, series_color, source_title


def with_peak_share(frame: pd.DataFrame) -> pd.DataFrame:
    """Adds pct_of_dtod: each point's GB/s over memcpy_dtod's at the same block size in the same run."""
    peak = frame[frame["variant"] == "memcpy_dtod"].set_index(["run_id", "block_size"])["gbps"]
    keys = list(zip(frame["run_id"], frame["block_size"], strict=True))
    share = [frame["gbps"].iloc[i] / peak.get(key, np.nan) * 100 for i, key in enumerate(keys)]
    return frame.assign(pct_of_dtod=share)


def _reference_lines(fig: go.Figure, frame: pd.DataFrame, x_range) -> None:
    dtod = frame[frame["variant"] == "memcpy_dtod"]["gbps"]
    if not dtod.empty:
        fig.add_trace(go.Scatter(x=x_range, y=[dtod.iloc[0]] * 2, mode="lines",
                                 name=f"memcpy_dtod ({dtod.iloc[0]:.0f} GB/s)", line={"color": "gray", "dash": "dash"},
                                 hovertemplate="measured device copy: %{y:.0f} GB/s"))
    hbm = frame["hbm_gbps_theoretical"].dropna()
    if not hbm.empty:
        fig.add_trace(go.Scatter(x=x_range, y=[hbm.iloc[0]] * 2, mode="lines",
                                 name=f"HBM theoretical ({hbm.iloc[0]:.0f} GB/s)",
                                 line={"color": "black", "dash": "dot"},
                                 hovertemplate="theoretical: %{y:.0f} GB/s"))


# One name for each swept unit on every page and in the talk: the kernels read 4-byte floats.
SWEEP_LABELS = {"strided": ("stride (floats)", "Strided reads"),
                "offset": ("offset from alignment (floats)", "Misaligned reads")}


def sweep_figure(frame: pd.DataFrame, variant: str) -> go.Figure:
    """GB/s against a swept parameter (stride or offset), with the device copy and HBM lines."""
    axis_title, title = SWEEP_LABELS[variant]
    data = with_peak_share(frame)
    part = data[data["variant"] == variant].sort_values("param_value")
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=part["param_value"], y=part["gbps"], mode="lines+markers", name=COALESCING_LABELS[variant],
        customdata=np.column_stack([part["pct_of_dtod"], part["median_ms"] * 1e3, part["cv"] * 100]),
        hovertemplate=axis_title + " %{x}: %{y:.0f} GB/s (%{customdata[0]:.0f} % of memcpy_dtod)<br>"
                      "median %{customdata[1]:.1f} µs, cv %{customdata[2]:.2f} %<extra></extra>"))
    mark_not_clean(fig, part, "param_value", "gbps")
    if not part.empty:
        x_range = [part["param_value"].min(), part["param_value"].max()]
        _reference_lines(fig, data, x_range)
        # the read the verdicts judge this sweep against (facts.contiguous_reference), drawn where they name it
        same_block = data["block_size"] == part["block_size"].iloc[0]
        contiguous = data[(data["variant"] == CONTIGUOUS_REFERENCE) & same_block]
        if not contiguous.empty:
            gbps = float(contiguous["gbps"].iloc[0])
            label = COALESCING_LABELS[CONTIGUOUS_REFERENCE]
            fig.add_trace(go.Scatter(x=x_range, y=[gbps] * 2, mode="lines", line={"color": "#00CC96", "dash": "dash"},
                                     name=f"contiguous read: {label} ({gbps:.0f} GB/s)",
                                     hovertemplate="the contiguous read the costs are judged against: %{y:.0f} GB/s"
                                                   "<extra></extra>"))
    fig.update_layout(title=source_title(title, frame), xaxis_title=axis_title, yaxis_title="effective GB/s (10⁹ B/s)",
                      legend=LEGEND_BELOW, height=420)
    if variant == "strided":
        fig.update_xaxes(type="log", tickvals=sorted(part["param_value"].unique()))
    return fig


def variants_figure(frame: pd.DataFrame, variants, title: str) -> go.Figure:
    """Bars of GB/s for chosen variants side by side, labelled with their share of memcpy_dtod."""
    data = with_peak_share(frame)
    part = data[data["variant"].isin(variants)].copy()
    part["order"] = part["variant"].map({v: i for i, v in enumerate(variants)})
    part = part.sort_values("order")
    fig = go.Figure(go.Bar(
        x=[COALESCING_LABELS[v] for v in part["variant"]], y=part["gbps"],
        text=[f"{p:.0f} %" for p in part["pct_of_dtod"]], textposition="outside", cliponaxis=False,
        name="effective GB/s",
        marker_color=[series_color(i) for i in range(len(part))],
        error_y={"type": "data", "symmetric": False,
                 "array": part["bytes"] / (part["min_ms"] * 1e6) - part["gbps"],
                 "arrayminus": part["gbps"] - part["bytes"] / (part["max_ms"] * 1e6)},
        customdata=np.column_stack([part["median_ms"] * 1e3, part["samples"]]),
        hovertemplate="%{x}: %{y:.0f} GB/s (%{text} of memcpy_dtod)<br>median %{customdata[0]:.1f} µs, "
                      "%{customdata[1]} samples<extra></extra>"))
    mark_not_clean(fig, part, [COALESCING_LABELS[v] for v in part["variant"]], "gbps")
    fig.update_layout(title=source_title(title + " · labels: % of memcpy_dtod in this run", frame),
                      yaxis_title="effective GB/s (10⁹ B/s)", height=420, showlegend=False)
    return fig


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


def occupancy_curve(device: DeviceLimits, kernel: KernelResources, block_size: int, dynamic: int,
                    axis: str) -> go.Figure:
    """Theoretical occupancy as one input varies, the current point marked and each point's limiter."""
    if axis == "block":
        xs = list(range(32, device.max_threads_per_block + 1, 32))
        results = [occupancy(device, kernel, x, dynamic) for x in xs]
        current = occupancy(device, kernel, block_size, dynamic)
        x_now, title, x_title = block_size, "Occupancy vs block size", "threads per block"
    elif axis == "registers":
        xs = list(range(8, 256, 8)) + [255]
        results = [occupancy(device, KernelResources(x, kernel.static_shared_bytes, kernel.max_dynamic_shared_bytes),
                             block_size, dynamic) for x in xs]
        current = occupancy(device, kernel, block_size, dynamic)
        x_now, title, x_title = kernel.registers_per_thread, "Occupancy vs registers per thread", "registers per thread"
    else:
        top = device.shared_per_block_optin - kernel.static_shared_bytes
        xs = sorted(set(list(range(0, top + 1, 2048)) + [top]))
        results = [occupancy(device, kernel, block_size, x) for x in xs]
        current = occupancy(device, kernel, block_size, dynamic)
        x_now, title, x_title = dynamic, "Occupancy vs dynamic shared memory per block", "dynamic shared memory"
    fig = go.Figure(go.Scatter(
        x=xs, y=[r.occupancy * 100 for r in results], mode="lines", line_shape="hv", name="theoretical occupancy",
        customdata=np.column_stack([[r.blocks_per_sm for r in results], [r.limiter for r in results]]),
        hovertemplate=x_title + " %{x}: %{y:.0f} % (%{customdata[0]} blocks/SM, limited by %{customdata[1]})"
                                "<extra></extra>"))
    fig.add_trace(go.Scatter(x=[x_now], y=[current.occupancy * 100], mode="markers+text", name="current",
                             marker={"size": 13, "color": "#EF553B"}, text=[f"{current.limiter}"],
                             textposition="top center",
                             hovertemplate="current: %{y:.0f} %, limited by %{text}<extra></extra>"))
    subtitle = f"{chart_text(device.name)} · computed, checked against the driver"
    fig.update_layout(title={"text": f"{title}<br><sup>{subtitle}</sup>"},
                      xaxis_title=x_title, yaxis_title="occupancy (% of max warps per SM)", yaxis_range=[0, 105],
                      height=360, showlegend=False)
    if axis == "shared":  # bytes in KiB, as every other axis writes them (Plotly's own ticks read "50k")
        ticks = list(range(0, xs[-1] + 1, 32 * 1024))
        fig.update_xaxes(tickvals=ticks, ticktext=[format_bytes(t) for t in ticks])
        curve = fig.data[0]
        curve.customdata = np.column_stack([[r.blocks_per_sm for r in results], [r.limiter for r in results],
                                            [format_bytes(x) for x in xs]])
        curve.hovertemplate = (x_title + " %{customdata[2]}: %{y:.0f} % (%{customdata[0]} blocks/SM, limited by "
                               "%{customdata[1]})<extra></extra>")
    return fig


def occupancy_sweep_figure(frame: pd.DataFrame) -> go.Figure:
    """One panel per kernel: measured GB/s (solid, left axis) beside theoretical occupancy (dotted, right)."""
    kernels = [k for k in OCCUPANCY_LABELS if k in set(frame["variant"])]
    fig = make_subplots(rows=1, cols=len(kernels), subplot_titles=[OCCUPANCY_LABELS[k] for k in kernels],
                        specs=[[{"secondary_y": True}] * len(kernels)], horizontal_spacing=0.2)
    for col, kernel in enumerate(kernels, start=1):
        part = frame[frame["variant"] == kernel].sort_values("block_size")
        fig.add_trace(go.Scatter(
            x=part["block_size"], y=part["gbps"], mode="lines+markers", name=f"{OCCUPANCY_LABELS[kernel]}: GB/s",
            line={"color": series_color(col - 1)}, customdata=np.column_stack([part["registers_per_thread"],
                                                               part["theoretical_occupancy"] * 100]),
            hovertemplate="block %{x}: %{y:.0f} GB/s · %{customdata[0]} registers · occupancy "
                          "%{customdata[1]:.0f} %<extra></extra>"), row=1, col=col, secondary_y=False)
        mark_not_clean(fig, part, "block_size", "gbps", row=1, col=col, secondary_y=False)
        fig.add_trace(go.Scatter(
            x=part["block_size"], y=part["theoretical_occupancy"] * 100, mode="lines", line_shape="hv",
            line={"color": "gray", "dash": "dot"}, name=f"{OCCUPANCY_LABELS[kernel]}: theoretical occupancy",
            hovertemplate="block %{x}: occupancy %{y:.0f} %<extra></extra>"), row=1, col=col, secondary_y=True)
        fig.update_xaxes(title_text="threads per block", row=1, col=col)
        fig.update_yaxes(title_text="measured GB/s (10⁹ B/s)", rangemode="tozero", row=1, col=col, secondary_y=False)
        fig.update_yaxes(title_text="theoretical occupancy (%)", range=[0, 105], dtick=25, row=1, col=col,
                         secondary_y=True)
    fig.update_layout(title=source_title("Measured throughput beside theoretical occupancy", frame),
                      legend=LEGEND_BELOW, height=480)
    return fig
