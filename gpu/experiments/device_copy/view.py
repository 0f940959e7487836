"""The device-to-device copy chart: GB/s against copy size, the copy engine against the SM copy kernel, in both
timing methods, with the HBM and L2 ceilings the run measured (``device_copy.roofs``). No Streamlit here."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gpu.core.text import chart_text
from gpu.core.units import format_bytes
from gpu.experiments import device_copy
from gpu.present import roofline as rl
from gpu.present.charts._common import LEGEND_BELOW, LOG_VALUE_AXIS, mark_not_clean, source_label, stage_figure

COLORS = {"copy_engine": "#EF553B", "sm_copy": "#636EFA"}
DASHES = {"single": "dot", "batched": "solid"}
ROOF_COLORS = {"HBM": "black", "L2": "#00CC96"}
STAGE_HEIGHT = 480  # px, as the stage view's other charts
HOVER = ("%{customdata[0]}: %{y:,.0f} GB/s<br>median %{customdata[1]:.2f} µs a copy, cv %{customdata[2]:.2f} %"
         "<br>%{customdata[3]}")


def _size_ticks(sizes) -> dict:
    values = sorted({int(s) for s in sizes})
    shown = values[::max(1, -(-len(values) // 11))]
    return {"tickvals": shown, "ticktext": [format_bytes(v) for v in shown]}


def _samples_note(series: pd.DataFrame) -> list[str]:
    if "copies_per_sample" not in series:
        return ["one copy a sample"] * len(series)
    # an L2-resident copy makes its passes in one launch: as many copies back to back
    repeats = series["copies_per_sample"].fillna(series.get("passes_per_launch", series["copies_per_sample"]))
    return [f"{int(n)} back-to-back copies a sample" if pd.notna(n) else "one copy a sample" for n in repeats]


def _l2_band(fig: go.Figure, frame: pd.DataFrame) -> None:
    """The sizes whose working set (source + destination) fits in half the L2, shaded: where the L2 roof is read."""
    l2 = pd.to_numeric(frame.get("l2_bytes"), errors="coerce").dropna() if "l2_bytes" in frame else pd.Series()
    if l2.empty:
        return
    largest = l2.iloc[0] / 4
    if largest < frame["elements"].min():
        return
    fig.add_vrect(x0=frame["elements"].min(), x1=largest, fillcolor=ROOF_COLORS["L2"], opacity=0.08, line_width=0,
                  layer="below")
    # Placed by hand: on a log axis an annotation's x is log10(size), which add_vrect's own label does not do.
    fig.add_annotation(text=chart_text(f"source + destination fit in half the {format_bytes(l2.iloc[0])} L2"),
                       xref="x", x=math.log10(largest), xanchor="right", yref="y domain", y=0.02, yanchor="bottom",
                       showarrow=False, font={"color": ROOF_COLORS["L2"]})


def _roof(fig: go.Figure, frame: pd.DataFrame, roof, x_range: list, unused: bool) -> None:
    """A roof as a dashed line across the sizes and a ring on the point it was read from, named on the chart. A
    cache roof measured below the DRAM roof is drawn as what it is: a figure that bounds nothing."""
    gbps = roof.per_second / 1e9
    color = ROOF_COLORS.get(roof.name, "gray")
    name = (f"{roof.name} figure ({gbps:,.0f} GB/s): below HBM, not a roof" if unused
            else f"{roof.name} roof ({gbps:,.0f} GB/s)")
    fig.add_trace(go.Scatter(
        x=x_range, y=[gbps, gbps], mode="lines", name=chart_text(name),
        line={"color": color, "dash": "dot" if unused else "dash", "width": 1.5},
        customdata=[chart_text(roof.source)] * 2,
        hovertemplate=chart_text(name) + "<br>%{customdata}<extra></extra>"))
    source = frame[np.isclose(frame["gbps"] * 1e9, roof.per_second)]
    if not source.empty:
        fig.add_trace(go.Scatter(
            x=source["elements"].iloc[:1], y=source["gbps"].iloc[:1], mode="markers", showlegend=False,
            marker={"symbol": "circle-open", "size": 18, "color": color, "line": {"width": 2.5}},
            hovertemplate=chart_text(f"{name}: read here") + "<extra></extra>"))


def figure(frame: pd.DataFrame, *, stage: bool = False) -> go.Figure:
    """GB/s (read + write counted: 2 × size) against copy size on a log axis, one line per copy and timing method
    (solid: batched, dotted: single copy), and the HBM and L2 roofs of this run as dashed lines."""
    fig = go.Figure()
    for (variant, timer), series in frame.groupby(["variant", "timer"], sort=False):
        method = device_copy.METHOD_OF_TIMER.get(timer, timer)
        series = series.sort_values("elements")
        name = f"{device_copy.LABELS.get(variant, variant)}, {device_copy.METHOD_LABELS.get(method, method)}"
        fig.add_trace(go.Scatter(
            x=series["elements"], y=series["gbps"], mode="lines+markers", name=chart_text(name),
            line={"color": COLORS.get(variant, "gray"), "dash": DASHES.get(method, "solid")},
            customdata=np.column_stack([series["elements"].map(format_bytes), series["median_ms"] * 1e3,
                                        series["cv"] * 100, _samples_note(series)]),
            hovertemplate=HOVER + "<extra>%{fullData.name}</extra>"))
        mark_not_clean(fig, series, "elements", "gbps")
    if not frame.empty:
        x_range = [frame["elements"].min(), frame["elements"].max()]
        _l2_band(fig, frame)
        roofs = device_copy.roofs(frame)
        unused = {cache.name for cache, _ in rl.unused_roofs(roofs)}
        for roof in roofs:
            _roof(fig, frame, roof, x_range, roof.name in unused)
        fig.update_xaxes(**_size_ticks(frame["elements"]))
    fig.update_xaxes(type="log", title_text="copy size")
    fig.update_yaxes(**LOG_VALUE_AXIS, title_text="GB/s (10⁹ B/s), read + write counted")
    title = "Device-to-device copies: copy engine vs SM copy"
    fig.update_layout(title={"text": f"{title}<br><sup>{source_label(frame)}</sup>"}, hovermode="closest",
                      legend=LEGEND_BELOW, height=480)
    return stage_figure(fig, STAGE_HEIGHT) if stage else fig
