"""How the occupancy experiment is shown: the calculator's curve (theoretical occupancy as one input varies), the
measured sweep beside theoretical occupancy, and its stage takeaway. No Streamlit here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gpu.core import text
from gpu.core.occupancy import DeviceLimits, KernelResources, occupancy
from gpu.core.text import chart_text
from gpu.core.units import format_bytes
from gpu.experiments.occupancy_sweep import LABELS as OCCUPANCY_LABELS
from gpu.present.charts._common import LEGEND_BELOW, mark_not_clean, series_color, source_title
from gpu.present.takeaways import sentence


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


def takeaway(frame: pd.DataFrame) -> str | None:
    """Where each kernel peaks, and how little occupancy the memory-bound copy needs."""
    parts = []
    for variant, label in (("stream", "the memory-bound copy"), ("chase", "the latency-bound chase")):
        mine = frame[frame["variant"] == variant]
        if mine.empty:
            continue
        top = mine.loc[mine["gbps"].idxmax()]
        parts.append(f"{label} peaks at {top['gbps']:,.0f} GB/s with blocks of {int(top['block_size'])} "
                     f"({text.percent(top['theoretical_occupancy'])} occupancy)")
    return sentence(parts)
