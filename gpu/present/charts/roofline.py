"""The Roofline page's figure: the measured roofs, the ridge, every kernel placed, the intensity path. No Streamlit.

Two panels of one figure. Left, the classic roofline (log-log): FLOP/s against FLOP/byte, each memory roof a
slope (bytes/s × intensity), each compute roof flat, the ridge where the DRAM (HBM) roof meets the FP32 roof,
kernels with arithmetic as markers, and the points of one kernel that differ only in intensity joined in
intensity order (the Streams FMA chain climbing from the memory roof to the compute roof). Right, the kernels
without arithmetic (copies, strided and offset reads, transposes), which have no place on a FLOP axis: their
bytes/s against the memory roofs, one column per experiment. Every hover is the point's sentence, escaped.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gpu.core.roofline import COMPUTE, MEMORY, Roof
from gpu.core.text import chart_text
from gpu.present import roofline as rl
from gpu.present.charts._common import LEGEND_BELOW, LOG_VALUE_AXIS, mark_not_clean, stage_figure

PALETTE = ["#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880"]
ROOF_COLOURS = {MEMORY: "#444444", COMPUTE: "#B22222"}
ROOF_DASHES = ["solid", "dash", "dot", "dashdot"]
LABEL_BACKGROUND = "rgba(255,255,255,0.85)"
STAGE_HEIGHT = 640  # two panels over six decades: taller than the stage's one-panel charts; fits 1920×960
DESK_HEIGHT = 620
TERA = 1e12  # the left panel's FLOP/s are drawn in TFLOP/s: plain ticks (0.01 … 100), never "500G"
TITLE = "Roofline: every kernel under the measured ceilings"


def _span(values: list[float], pad: float = 2.0) -> tuple[float, float]:
    finite = [v for v in values if v and v > 0 and math.isfinite(v)]
    if not finite:
        return 0.01, 100.0
    return min(finite) / pad, max(finite) * pad


def _hover(points: pd.DataFrame) -> list[str]:
    """Each point's sentence, escaped: run content (variant, device) never becomes markup."""
    return [chart_text(s) for s in points["sentence"]]


def _roofs_left(fig: go.Figure, roofs: list[Roof], x_range: tuple[float, float], stage: bool) -> None:
    compute = sorted((r for r in roofs if r.kind == COMPUTE), key=lambda r: -r.per_second)
    top = compute[0].per_second if compute else None
    lowest = rl.memory_roofs(roofs)[:1]
    for i, roof in enumerate(rl.memory_roofs(roofs)):
        end = min(x_range[1], top / roof.per_second) if top else x_range[1]
        xs = np.geomspace(x_range[0], max(end, x_range[0] * 1.01), 2)
        fig.add_trace(go.Scatter(
            x=xs, y=xs * roof.per_second / TERA, mode="lines",
            name=chart_text(f"{roof.name} roof: {rl.roof_rate(roof)}"),
            line={"color": ROOF_COLOURS[MEMORY], "dash": ROOF_DASHES[i % 4], "width": 2},
            hovertext=chart_text(f"{roof.name}: {rl.roof_rate(roof)}, measured by {roof.source}"),
            hoverinfo="text"), row=1, col=1)
    for i, roof in enumerate(compute):
        start = max(x_range[0], roof.per_second / lowest[0].per_second) if lowest else x_range[0]
        fig.add_trace(go.Scatter(
            x=[start, x_range[1]], y=[roof.per_second / TERA] * 2, mode="lines",
            name=chart_text(f"{roof.name} roof: {rl.roof_rate(roof)}"),
            line={"color": ROOF_COLOURS[COMPUTE], "dash": ROOF_DASHES[i % 4], "width": 2},
            hovertext=chart_text(f"{roof.name}: {rl.roof_rate(roof)}, measured by {roof.source}"),
            hoverinfo="text"), row=1, col=1)
    for ridge in rl.ridges(roofs):
        fig.add_trace(go.Scatter(
            x=[ridge.intensity, ridge.intensity], y=[ridge.compute.per_second / TERA / 1e3,
                                                     ridge.compute.per_second / TERA],
            mode="lines+markers", marker={"size": [0, 12], "symbol": "diamond", "color": ROOF_COLOURS[COMPUTE]},
            line={"color": "gray", "dash": "dot", "width": 1},
            name=chart_text(f"ridge: {rl.number(ridge.intensity)} FLOP/B ({ridge.compute.precision.upper()})"),
            hovertext=chart_text(f"ridge: {rl.number(ridge.intensity)} FLOP/B, where the {ridge.memory.name} roof "
                                 f"meets the {ridge.compute.name} roof"), hoverinfo="text"), row=1, col=1)


def _roof_labels(fig: go.Figure, roofs: list[Roof], x_range: tuple[float, float], columns: int) -> None:
    """Each roof and ridge drawn is named on the chart, at the desk and on stage ("HBM 4,299 GB/s"): a memory
    roof's label above its slope (ending where the slope has climbed 1.3 decades, a decade further right for each
    next roof) and above its line on the right panel; the top compute roof's above its flat line just right of the
    FP32 ridge, the next one's under the right end of its line (clear of the kernels that climb to it); each
    ridge's under its dotted line. Labels have a pale background, so a roof that passes behind one leaves it
    readable. Plotly places annotations on a log axis in log10 units."""
    memory = rl.memory_roofs(roofs)
    found = rl.ridges(roofs)
    compute = sorted((r for r in roofs if r.kind == COMPUTE), key=lambda r: -r.per_second)
    left = {"xref": "x", "yref": "y", "showarrow": False, "yanchor": "bottom", "bgcolor": LABEL_BACKGROUND}
    for i, roof in enumerate(memory):
        x_label = x_range[0] * 10 ** (1.3 + i)
        y = x_label * roof.per_second / TERA
        fig.add_annotation(text=chart_text(f"{roof.name} {rl.roof_rate(roof)}"), x=math.log10(x_label),
                           y=math.log10(y), xanchor="right", font={"color": ROOF_COLOURS[MEMORY]}, **left)
        fig.add_annotation(text=chart_text(f"{roof.name} {rl.roof_rate(roof)}"), xref="x2", yref="y2",
                           x=columns - 0.5, y=roof.per_second / 1e9, xanchor="right", yanchor="bottom",
                           showarrow=False, font={"color": ROOF_COLOURS[MEMORY]}, bgcolor=LABEL_BACKGROUND)
    start = found[0].intensity * 1.6 if found else x_range[0] * 10 ** 2
    for i, roof in enumerate(compute):  # the top roof above its line by the ridge, the next under its line's end
        fig.add_annotation(text=chart_text(f"{roof.name} {rl.roof_rate(roof)}"),
                           x=math.log10(start if i == 0 else x_range[1]), y=math.log10(roof.per_second / TERA),
                           font={"color": ROOF_COLOURS[COMPUTE]},
                           **{**left, **({"xanchor": "left"} if i == 0 else
                                         {"xanchor": "right", "yanchor": "top", "yshift": -8})})
    for i, ridge in enumerate(found):
        fig.add_annotation(text=chart_text(f"ridge {rl.number(ridge.intensity)} FLOP/B "
                                           f"({ridge.compute.precision.upper() or ridge.compute.name})"),
                           x=math.log10(ridge.intensity), y=math.log10(ridge.compute.per_second / TERA / 1e3),
                           xanchor="left" if i == 0 else "right", **{**left, "yanchor": "top"},
                           font={"color": "gray"})


def _roofs_right(fig: go.Figure, roofs: list[Roof], columns: int) -> None:
    for i, roof in enumerate(rl.memory_roofs(roofs)):
        fig.add_trace(go.Scatter(
            x=[-0.5, columns - 0.5], y=[roof.per_second / 1e9] * 2, mode="lines", showlegend=False,
            line={"color": ROOF_COLOURS[MEMORY], "dash": ROOF_DASHES[i % 4], "width": 2},
            hovertext=chart_text(f"{roof.name}: {rl.roof_rate(roof)}"), hoverinfo="text"), row=1, col=2)


def _marker(highlight: bool, colour: str, stage: bool) -> dict:
    size = 11 if stage else 9
    if highlight:
        return {"size": size * 2.2, "symbol": "star", "color": colour, "line": {"width": 2, "color": "black"}}
    return {"size": size, "color": colour, "line": {"width": 1, "color": "white"}}


def figure(points: pd.DataFrame, roofs: list[Roof], subtitle: str = "", stage: bool = False,
           highlight: str | None = None) -> go.Figure:
    """The roofline of ``points`` (``gpu.present.roofline.kernel_points``) under ``roofs``; ``subtitle`` is the
    source in words (escaped here); ``highlight``: one point's ``kernel`` text, drawn as a star."""
    with_flops = points[~points["memory_only"]] if not points.empty else points
    memory_only = points[points["memory_only"]] if not points.empty else points
    fig = make_subplots(rows=1, cols=2, column_widths=[0.66, 0.34], horizontal_spacing=0.09,
                        subplot_titles=("Kernels with arithmetic: FLOP/s against FLOP/byte",
                                        "Kernels without arithmetic: bytes/s"))
    ridges = [r.intensity for r in rl.ridges(roofs)]
    x_range = _span(list(with_flops["flop_per_byte"]) + ridges, 4)
    _roofs_left(fig, roofs, x_range, stage)
    experiments = list(dict.fromkeys(points["experiment"])) if not points.empty else []
    colours = {e: PALETTE[i % len(PALETTE)] for i, e in enumerate(experiments)}
    columns = list(dict.fromkeys(memory_only["experiment"])) if not memory_only.empty else []
    _roofs_right(fig, roofs, max(len(columns), 1))
    # The intensity paths: one line per kernel, in intensity order.
    for path, part in with_flops[with_flops["path"] != ""].groupby("path", sort=False):
        part = part.sort_values("flop_per_byte")
        fig.add_trace(go.Scatter(
            x=part["flop_per_byte"], y=part["flops_per_s"] / TERA, mode="lines+markers", name=chart_text(path),
            line={"color": colours[part["experiment"].iloc[0]], "width": 3},
            marker={"size": 11 if stage else 9, "symbol": "circle-open"},
            hovertext=_hover(part), hoverinfo="text"), row=1, col=1)
    for experiment in experiments:
        colour = colours[experiment]
        part = with_flops[(with_flops["experiment"] == experiment) & (with_flops["path"] == "")]
        if not part.empty:
            fig.add_trace(go.Scatter(
                x=part["flop_per_byte"], y=part["flops_per_s"] / TERA, mode="markers", name=chart_text(experiment),
                legendgroup=experiment, marker=_marker(False, colour, stage), hovertext=_hover(part),
                hoverinfo="text"), row=1, col=1)
        strip = memory_only[memory_only["experiment"] == experiment]
        if not strip.empty:
            column = columns.index(experiment)
            spread = np.linspace(-0.3, 0.3, len(strip)) if len(strip) > 1 else np.zeros(1)
            fig.add_trace(go.Scatter(
                x=column + spread, y=strip["bytes_per_s"] / 1e9, mode="markers", name=chart_text(experiment),
                legendgroup=experiment, showlegend=part.empty, marker=_marker(False, colour, stage),
                hovertext=_hover(strip), hoverinfo="text"), row=1, col=2)
            mark_not_clean(fig, strip, column + spread, strip["bytes_per_s"] / 1e9, row=1, col=2)
    mark_not_clean(fig, with_flops, "flop_per_byte", with_flops["flops_per_s"] / TERA, row=1, col=1)
    if highlight and not points.empty and (points["kernel"] == highlight).any():
        chosen = points[points["kernel"] == highlight].iloc[0]
        on_left = not chosen["memory_only"]
        column = 0 if on_left else columns.index(chosen["experiment"])
        x, y = ((chosen["flop_per_byte"], chosen["flops_per_s"] / TERA) if on_left
                else (column, chosen["bytes_per_s"] / 1e9))
        fig.add_trace(go.Scatter(
            x=[x], y=[y], mode="markers", name="highlighted", showlegend=not stage,
            marker=_marker(True, colours[chosen["experiment"]], stage),
            hovertext=[chart_text(chosen["sentence"])], hoverinfo="text"), row=1, col=1 if on_left else 2)
    y_values = [v / TERA for v in with_flops["flops_per_s"]] + [r.per_second / TERA for r in roofs
                                                                 if r.kind == COMPUTE]
    y_range = _span(y_values, 3)
    fig.update_xaxes(title_text="arithmetic intensity (FLOP/byte)", range=[math.log10(v) for v in x_range],
                     **LOG_VALUE_AXIS, row=1, col=1)
    fig.update_yaxes(title_text="TFLOP/s (10¹² FLOP/s)", range=[math.log10(v) for v in y_range], **LOG_VALUE_AXIS,
                     row=1, col=1)
    fig.update_xaxes(tickvals=list(range(len(columns))), ticktext=[chart_text(e) for e in columns],
                     range=[-0.6, max(len(columns), 1) - 0.4], row=1, col=2)
    highest = max([*memory_only["bytes_per_s"], *(r.per_second for r in rl.memory_roofs(roofs)), 1e9]) / 1e9
    fig.update_yaxes(title_text="GB/s (10⁹ B/s)", range=[0, highest * 1.15], row=1, col=2)  # room for the labels
    _roof_labels(fig, roofs, x_range, max(len(columns), 1))
    title = f"{TITLE}<br><sup>{chart_text(subtitle)}</sup>" if subtitle else TITLE
    fig.update_layout(title={"text": title}, legend={**LEGEND_BELOW, "traceorder": "normal"}, height=DESK_HEIGHT,
                      hovermode="closest", margin={"b": 140})
    if stage:  # the legend names every colour (each experiment) and line; the chart names each roof and ridge
        stage_figure(fig, STAGE_HEIGHT)
        fig.update_layout(margin={"b": 110, "t": 120})
    return fig
