"""What every chart module shares: the source line under a title, the palette, the log axes, the legend under the
chart, reference lines, byte-size ticks and the stage sizing. No Streamlit here."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from gpu.core.devices import uuid_tail
from gpu.core.text import chart_text
from gpu.core.units import format_bytes
from gpu.results import causes

# Plotly's default qualitative colours, in its order: a series keeps its colour from chart to chart.
PALETTE = ["#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880"]

# Log axes of values: one plain tick per decade (1, 10, 100, 1,000), never "5, 2, 1000" or "10B".
LOG_VALUE_AXIS = {"type": "log", "dtick": 1, "tickformat": ",~g", "exponentformat": "none"}
STAGE_FONT_PX = 20  # ticks, legends, annotations and bar labels on stage: readable from the back of a room
STAGE_AXIS_TITLE_PX = 22
STAGE_TITLE_PX = 26

# A horizontal legend under the chart, anchored to the figure's bottom edge (not to the plot area): Plotly then makes
# room for it below the x axis' ticks and title, where a legend at y=-0.25 of the plot sat on top of long tick labels.
LEGEND_BELOW = {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0, "xanchor": "left"}


def source_label(frame: pd.DataFrame) -> str:
    """'Live · NVIDIA H200 · 2026-11-21 22:10 UTC' or 'Replay of a run recorded on … · date', for a chart title:
    the run's own text (device, profile) escaped for Plotly."""
    if frame.empty:
        return ""
    first = frame.iloc[0]
    when = str(first["timestamp"]).replace("T", " ")[:16] + " UTC"
    prefix = "Live" if first["backend"] == "live" else "Replay of a run recorded on"
    board = first.get("gpu_uuid")  # the board that measured, where the run names it (boards of a model differ)
    # "board …50595206": the end of its GPU UUID, named as such (a bare "…50595206" read as a cut-off name)
    device = (f"{first['device_name']} (board {uuid_tail(board)})" if isinstance(board, str) and board
              else first["device_name"])
    return f"{prefix} {chart_text(device)} · {chart_text(when)} · profile {chart_text(first['profile'])}"


def source_title(text: str, frame: pd.DataFrame) -> dict:
    """A chart's title with the source of its numbers under it (``source_label``)."""
    return {"text": f"{text}<br><sup>{source_label(frame)}</sup>"}


def series_color(index: int) -> str:
    """The ``index``-th colour of the palette (it wraps around)."""
    return PALETTE[index % len(PALETTE)]


def size_ticks(sizes, most: int = 10) -> dict:
    """Ticks for a byte-size axis: at most ``most`` of the measured sizes, written as sizes (4 KiB, 1 MiB)."""
    values = sorted({int(s) for s in sizes})
    shown = values[::max(1, math.ceil(len(values) / most))]
    return {"tickvals": shown, "ticktext": [format_bytes(v) for v in shown]}


def stage_figure(fig: go.Figure, height: int) -> go.Figure:
    """The figure at stage size: every text at least STAGE_FONT_PX, axis titles STAGE_AXIS_TITLE_PX, bar labels
    allowed past the plot area (never clipped), and the given height."""
    fig.update_layout(font={"size": STAGE_FONT_PX}, title_font={"size": STAGE_TITLE_PX},
                      legend_font={"size": STAGE_FONT_PX}, height=height,
                      hoverlabel={"font_size": STAGE_FONT_PX})
    for update in (fig.update_xaxes, fig.update_yaxes):
        update(tickfont={"size": STAGE_FONT_PX}, title_font={"size": STAGE_AXIS_TITLE_PX})
    for annotation in fig.layout.annotations:
        annotation.font.size = max(annotation.font.size or 0, STAGE_FONT_PX)
    for kind in ("bar", "scatter"):
        fig.update_traces(textfont={"size": STAGE_FONT_PX}, cliponaxis=False, selector={"type": kind})
    _stage_title_room(fig, height)
    _stage_ticks(fig)
    # A legend click on stage would hide a series mid-talk (and Plotly's "Double-click on legend…" tip covers the page)
    fig.update_layout(legend={"itemclick": False, "itemdoubleclick": False})
    return fig


STAGE_MOST_TICKS = 8  # a written-out axis (sizes, points) on stage: at 20 px more labels than this ran into each other
STAGE_MOST_CATEGORIES = 4  # named points ("block 128 · 1,048,576 elements", slanted) are longer: fewer of them
STAGE_LONGEST_NAME = 32  # letters: a longer point name, slanted, took half the chart's height on stage


def _stage_ticks(fig: go.Figure) -> None:
    """On stage an axis whose ticks are written out (tickvals and ticktext) or named (categories) keeps every k-th
    label, evenly spread, so that no two run into each other (long point names: none, the axis says they are on
    hover); every point is still drawn and named on hover."""
    def thinned(values: list, most: int) -> list:  # every step-th, the last one (the largest size) always kept
        step = -(-len(values) // most)
        return values[(len(values) - 1) % step::step]

    for axis in [getattr(fig.layout, name) for name in fig.layout if name.startswith("xaxis")]:
        if axis.tickvals is not None and len(axis.tickvals) > STAGE_MOST_TICKS:
            pairs = thinned(list(zip(axis.tickvals, axis.ticktext or axis.tickvals, strict=False)), STAGE_MOST_TICKS)
            axis.update(tickvals=[v for v, _ in pairs], ticktext=[t for _, t in pairs])
        elif axis.type == "category" and axis.categoryarray is not None \
                and len(axis.categoryarray) > STAGE_MOST_CATEGORIES:
            if max(len(str(c)) for c in axis.categoryarray) > STAGE_LONGEST_NAME:  # named on hover only
                axis.update(showticklabels=False, title_text=f"{axis.title.text or 'point'} (names on hover)")
            else:
                shown = thinned(list(axis.categoryarray), STAGE_MOST_CATEGORIES)
                axis.update(tickmode="array", tickvals=shown, ticktext=shown)


def _stage_title_room(fig: go.Figure, height: int) -> None:
    """At stage fonts a title with its source line under it is two lines tall, and panels' own titles (subplot
    titles: annotations at the top of the plot area) sat on it: the title block is centred in a band at the top of the
    figure (Plotly centres a block of several lines; anchored at its top, it drew the first line above the figure)
    and the plot area starts below that band and the panel titles."""
    title = fig.layout.title.text or ""
    if not title:
        return
    lines = title.count("<br>") + 1
    block = STAGE_TITLE_PX * 1.3 + (lines - 1) * STAGE_TITLE_PX * 0.8
    panel_titles = any(a.yref == "paper" and (a.y or 0) >= 1 and a.yanchor == "bottom"
                       for a in fig.layout.annotations)
    top = 8 + block + 10 + (STAGE_FONT_PX + 12 if panel_titles else 0)
    fig.update_layout(title={"y": 1 - (8 + block / 2) / height, "yref": "container", "yanchor": "middle"},
                      margin={"t": round(max(top, fig.layout.margin.t or 0))})


def reference_line(fig: go.Figure, value: float, name: str, level: str, log: bool) -> None:
    """A dotted horizontal line at ``value``, labelled "name<br>level" in the right margin, clear of bars and their
    labels. Plotly places an annotation on a log axis in log10 units (a value of 4,800 would stretch the axis to
    10^4800), so the label goes at log10(value) there."""
    fig.add_hline(y=value, line={"dash": "dot", "color": "gray"}, layer="below")
    fig.add_annotation(text=f"{name}<br>{level}", xref="paper", x=1.01, xanchor="left", align="left",
                       y=math.log10(value) if log else value, yref="y", showarrow=False, font={"color": "gray"})
    fig.update_layout(margin={"r": 190})


def theoretical_lines(fig: go.Figure, frame: pd.DataFrame, columns: dict[str, str], log: bool) -> None:
    """A ``reference_line`` for each device limit the run recorded: ``columns`` maps a column of the schema (e.g.
    ``hbm_gbps_theoretical``) to its name on the chart."""
    for column, name in columns.items():
        known = frame[column].dropna()
        if not known.empty:
            reference_line(fig, float(known.iloc[0]), name, f"{known.iloc[0]:,.0f} GB/s", log=log)


def variant_parts(frame: pd.DataFrame, variants, by: str):
    """(variant, its rows sorted by ``by``) for each of ``variants`` (in that order) that ``frame`` holds."""
    for variant in variants:
        part = frame[frame["variant"] == variant].sort_values(by)
        if not part.empty:
            yield variant, part


NOT_CLEAN_NAME = "not clean (hover: its conditions)"
NOT_CLEAN_MARKER = {"symbol": "circle-open", "size": 18, "color": "#222222", "line": {"width": 3}}


def conditions_hover(value) -> str:
    """'conditions: SW power cap in 38 % of samples' for a hover text: clean, not observed or the causes, escaped
    (stored text, from any run)."""
    return f"conditions: {chart_text(causes.words(value))}"


def mark_not_clean(fig: go.Figure, frame: pd.DataFrame, x, y, **where) -> None:
    """A dark ring around each point of ``frame`` whose witness named a cause, with its conditions in the hover:
    ``x`` and ``y`` are the columns the chart plots (or Series aligned with the frame), ``where`` the subplot
    (``row``, ``col``). Nothing is drawn for clean points or runs no witness watched (those read 'not observed'
    in the page's conditions line, never 'clean')."""
    seen = causes.of_frame(frame)
    named = seen.map(causes.has_causes)
    if frame.empty or not named.any():
        return
    xs = (frame[x] if isinstance(x, str) else pd.Series(list(x), index=frame.index))[named]
    ys = (frame[y] if isinstance(y, str) else pd.Series(list(y), index=frame.index))[named]
    shown = any(trace.name == NOT_CLEAN_NAME for trace in fig.data)
    fig.add_trace(go.Scatter(x=list(xs), y=list(ys), mode="markers", name=NOT_CLEAN_NAME, legendgroup="not clean",
                             showlegend=not shown, marker=NOT_CLEAN_MARKER,
                             customdata=[[conditions_hover(v)] for v in seen[named]],
                             hovertemplate="%{customdata[0]}<extra>not clean</extra>"), **where)


def log_size_axis(values) -> dict:
    """A log axis of byte sizes, ticked at each value measured and written as sizes (4 KiB, 1 MiB …)."""
    values = sorted({int(v) for v in values})
    return {"type": "log", "tickvals": values, "ticktext": [format_bytes(v) for v in values]}


def per_variant(part: pd.DataFrame, column: str) -> pd.Series:
    """``column`` of one point's rows, by variant."""
    return part.set_index("variant")[column]

