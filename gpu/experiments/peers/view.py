"""How the peers experiment is shown: its stage takeaway and the Peers page's Plotly figures, the source ×
destination matrix (one-way, both ways at once, latency), one pair's size sweep and the node's host links, drawn
from a peer run's rows (``matrix`` beside this file reads them). No Streamlit here. Every figure names where its
numbers come from: the node's GPUs, host and date."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gpu.core import text
from gpu.core.text import chart_text
from gpu.core.units import format_bytes
from gpu.experiments.peers import matrix as pm
from gpu.present.charts._common import (
    LEGEND_BELOW,
    STAGE_FONT_PX,
    conditions_hover,
    series_color,
    size_ticks,
    stage_figure,
)
from gpu.present.takeaways import sentence
from gpu.results.analysis import causes

VARIANT_COLORS = {v: series_color(i) for i, v in enumerate(pm.SWEPT)}
# Each variant its own marker: both directions at once copy each way about as fast as one direction alone, and a
# line drawn on another with the same look would hide it.
VARIANT_MARKERS = dict(zip(pm.SWEPT, ("circle", "diamond", "square", "x", "triangle-up"), strict=True))
METHOD_DASHES = {pm.BATCHED: "solid", pm.SINGLE: "dot"}
MATRIX_HEIGHT = 560  # px at the desk; 8 GPUs keep cells of two lines (figure, link) readable
STAGE_MATRIX_HEIGHT = 600  # on stage: with the title, two controls and the takeaway the page fits 1920×1080
# On stage, a node of up to SMALL_NODE GPUs: cells of about 90 px or more still hold their two lines, and the page keeps
# room at 1920×960 for a recording menu folded into More settings and a line of conditions under the takeaway.
STAGE_SMALL_MATRIX_HEIGHT = 500
SMALL_NODE = 4
DESK_CELL_FONT_PX = 15


def source_line(frame: pd.DataFrame) -> str:
    """"Replay of a run recorded on 2 × NVIDIA H100 80GB HBM3 · node-1 · 2026-11-25 18:00 UTC · profile precise":
    the node, not one board (a peer run has a row per GPU); the run's own text escaped for Plotly."""
    if frame.empty:
        return ""
    first = frame.iloc[0]
    prefix = "Live on" if first["backend"] == "live" else "Replay of a run recorded on"
    when = str(first["timestamp"]).replace("T", " ")[:16] + " UTC"
    host = f" · {chart_text(first['host'])}" if isinstance(first["host"], str) and first["host"] else ""
    return f"{prefix} {chart_text(pm.gpu_names(frame))}{host} · {chart_text(when)} · profile " \
           f"{chart_text(first['profile'])}"


def _title(text: str, frame: pd.DataFrame) -> dict:
    return {"text": f"{text}<br><sup>{source_line(frame)}</sup>"}


def for_stage(fig: go.Figure, height: int | None = None) -> go.Figure:
    """A figure of this page at stage size: ``stage_figure``'s fonts, and the matrix cells' and colour bar's too;
    ``height`` by default by the matrix's GPUs (``STAGE_SMALL_MATRIX_HEIGHT`` up to ``SMALL_NODE``)."""
    if height is None:
        sides = [len(trace.z) for trace in fig.data if trace.type == "heatmap" and trace.z is not None]
        height = STAGE_SMALL_MATRIX_HEIGHT if sides and max(sides) <= SMALL_NODE else STAGE_MATRIX_HEIGHT
    stage_figure(fig, height)
    fig.update_traces(textfont={"size": STAGE_FONT_PX}, colorbar={"tickfont": {"size": STAGE_FONT_PX},
                                                                 "title": {"font": {"size": STAGE_FONT_PX}}},
                      selector={"type": "heatmap"})
    return fig


# --- matrices ----------------------------------------------------------------------------------------------------
def _hover(row, value_text: str) -> str:
    """A cell's exact figures: the pair, its value, the time and its spread."""
    return (f"GPU {row.source} → GPU {row.destination}<br>{value_text}<br>"
            f"{chart_text(format_bytes(row.elements))} · median {row.median_ms * 1e3:,.2f} µs "
            f"(min {row.min_ms * 1e3:,.2f}, max {row.max_ms * 1e3:,.2f})<br>"
            f"cv {row.cv * 100:.2f} % · {int(row.samples)} samples")


def _top(z: np.ndarray, better_low: bool) -> float | None:
    """The top of a matrix's colour scale: its largest value, and at least twice its smallest where lower is better."""
    if not np.isfinite(z).any():
        return None
    return float(max(np.nanmax(z), 2 * np.nanmin(z))) if better_low else float(np.nanmax(z))


def _heatmap(frame: pd.DataFrame, rows: pd.DataFrame, values: pd.Series, cell, hover, unit: str, title: str,
             better_low: bool = False) -> go.Figure:
    """A source × destination heatmap over every GPU of the run: ``rows`` (the view's, ``pm.matrix_rows``, worked
    out once by the caller) are its cells, ``values`` (aligned with them) colour them, ``cell(row, value)`` writes
    one, ``hover(row, value)`` its hover; the diagonal reads "same GPU", an unmeasured pair "—"."""
    every = pm.gpus(frame)
    where = {g: i for i, g in enumerate(every)}
    z = np.full((len(every), len(every)), np.nan)
    # —: a pair the run did not measure; the diagonal says why it is empty (a GPU does not copy to itself here)
    cells = [["same GPU" if s == d else "—" for d in every] for s in every]
    hovers = [["" for _ in every] for _ in every]
    links = pm.pair_links(frame)
    for row, value in zip(rows.itertuples(), values.loc[rows.index], strict=True):
        i, j = where[row.source], where[row.destination]
        z[i, j] = value
        link = links.get((row.source, row.destination), pm.link_of(None))
        seen = getattr(row, "conditions", None)  # "!": the witness named a cause for this pair (the hover: which)
        cells[i][j] = f"{cell(row, value)}{'!' if causes.has_causes(seen) else ''}<br>{chart_text(link.short)}"
        hovers[i][j] = (f"{hover(row, value)}<br>link: {chart_text(link.text or 'not named')}<br>"
                        f"{conditions_hover(seen)}")
    labels = [f"GPU {g}" for g in every]
    # A few GPUs take part of the width (cells of a two-GPU matrix as wide as half the page read as banners), many
    # the whole of it; the colour bar stands beside the cells.
    width = min(0.92, 0.2 + 0.12 * len(every))
    fig = go.Figure(go.Heatmap(
        z=z, x=labels, y=labels, text=cells, texttemplate="%{text}",
        textfont={"size": DESK_CELL_FONT_PX + (5 if len(every) <= 4 else 0)},
        customdata=hovers, hovertemplate="%{customdata}<extra></extra>", hoverongaps=False, xgap=2, ygap=2,
        colorscale="Viridis", reversescale=better_low,
        colorbar={"title": {"text": unit}, "x": width + 0.02, "xanchor": "left"},
        # From zero: a pair at half the others' rate reads as half the colour, not as the bottom of the scale. Where
        # lower is better, the scale reaches twice the best pair at least: a node whose pairs all answer alike sits
        # mid-scale, not at the worst colour.
        zmin=0, zmax=_top(z, better_low)))
    fig.update_xaxes(title_text="destination GPU", type="category", side="bottom", showgrid=False, domain=[0, width])
    fig.update_yaxes(title_text="source GPU", type="category", autorange="reversed", showgrid=False)
    fig.update_layout(title=_title(title, frame), height=MATRIX_HEIGHT,
                      plot_bgcolor="white")
    return fig


def matrix_figure(frame: pd.DataFrame, view: pm.View) -> go.Figure:
    """GB/s from each source (row) to each destination (column) in the view, each cell with its link."""
    rows = pm.matrix_rows(frame, view)
    return _heatmap(frame, rows, rows["gbps"], lambda row, v: rate(v),
                    lambda row, v: _hover(row, f"{v:,.1f} GB/s one way"), "GB/s",
                    f"Peer bandwidth, source → destination ({chart_text(view.words())})")


# What a matrix figure reads of a run's rows (``matrix_figure``, ``source_line``): a preview drawn while a run
# measures keeps only these, leaving the samples and every other column out of each redraw's filtering.
MATRIX_COLUMNS = ("variant", "timer", "elements", "gpu_index", "peer_index", "link", "gbps", "median_ms", "min_ms",
                  "max_ms", "cv", "samples", "conditions", "device_name", "host", "timestamp", "profile", "backend")


def matrix_preview(partial: pd.DataFrame) -> go.Figure | None:
    """The matrix of a run's points so far (its default view: ``pm.default_view``), drawn while it measures; None
    before its first copy between GPUs. The figure the full frame's ``matrix_figure`` would draw, from only the
    columns it reads."""
    slim = partial[[c for c in MATRIX_COLUMNS if c in partial]]
    view = pm.default_view(slim)
    return None if view is None else matrix_figure(slim, view)


def bidirectional_view(frame: pd.DataFrame, view: pm.View) -> pm.View | None:
    """Both directions at once, timed and sized as ``view`` where measured so, else its own largest size."""
    timers = pm.methods(pm.pair_rows(frame), pm.BIDIRECTIONAL)
    if not timers:
        return None
    timer = view.timer if view.timer in timers else timers[0]
    measured = pm.sizes(pm.pair_rows(frame), pm.BIDIRECTIONAL, timer)
    return pm.View(pm.BIDIRECTIONAL, timer, view.size if view.size in measured else measured[-1])


def bidirectional_figure(frame: pd.DataFrame, view: pm.View) -> go.Figure:
    """Each direction's GB/s while the other direction of the pair copies too; the hover adds the pair's total."""
    rows = pm.matrix_rows(frame, view)
    rates = {(r.source, r.destination): r.gbps for r in rows.itertuples()}

    def hover(row, value):
        back = rates.get((row.destination, row.source))
        total = f"<br>the pair both ways: {value + back:,.1f} GB/s" if back is not None else ""
        return _hover(row, f"{value:,.1f} GB/s this way{total}")

    return _heatmap(frame, rows, rows["gbps"], lambda row, v: rate(v), hover, "GB/s",
                    f"Both directions at once, each direction ({pm.METHODS.get(view.timer, view.timer)} · "
                    f"{format_bytes(view.size)})")


def latency_figure(frame: pd.DataFrame, view: pm.View) -> go.Figure:
    """ns per dependent load from each GPU into each peer's memory (lower is better: the colours are reversed)."""
    rows = pm.matrix_rows(frame, view)
    ns = pm.ns_per_access(rows)
    return _heatmap(frame, rows, ns, lambda row, v: f"{v:,.0f}",
                    lambda row, v: _hover(row, f"{v:,.1f} ns per access<br>{int(row.loads_per_sample):,} loads per "
                                               f"sample"), "ns",
                    f"Latency into the peer's memory (working set {format_bytes(view.size)})", better_low=True)


# --- one pair ----------------------------------------------------------------------------------------------------
def pair_sweep_figure(frame: pd.DataFrame, source: int, destination: int) -> go.Figure:
    """GB/s against copy size for one ordered pair: a line per variant (colour) and method (solid: batched, dotted:
    one copy at a time)."""
    rows = pm.pair_sweep(frame, source, destination)
    fig = go.Figure()
    order = {key: i for i, key in enumerate((v, t) for v in pm.SWEPT for t in pm.METHODS)}
    for (variant, timer), series in sorted(rows.groupby(["variant", "timer"]), key=lambda g: order.get(g[0], 99)):
        series = series.sort_values("elements")
        name = f"{pm.LABELS.get(variant, variant)} · {pm.METHODS.get(timer, timer)}"
        fig.add_trace(go.Scatter(
            x=series["elements"], y=series["gbps"], mode="lines+markers", name=chart_text(name),
            line={"color": VARIANT_COLORS.get(variant, "gray"), "dash": METHOD_DASHES.get(timer, "dash")},
            marker={"symbol": VARIANT_MARKERS.get(variant, "circle"), "size": 8},
            customdata=np.column_stack([series["elements"].map(format_bytes), series["median_ms"] * 1e3,
                                        series["cv"] * 100]),
            hovertemplate="%{customdata[0]}: %{y:,.1f} GB/s<br>median %{customdata[1]:,.2f} µs · cv "
                          "%{customdata[2]:.2f} %<extra>%{fullData.name}</extra>"))
    if not rows.empty:
        fig.update_xaxes(type="log", title_text="copy size", **size_ticks(rows["elements"]))
    fig.update_yaxes(title_text="bandwidth (GB/s, 10⁹ B/s, bytes counted once)", rangemode="tozero")
    fig.update_layout(title=_title(f"GPU {source} → GPU {destination}: bandwidth vs copy size", frame),
                      legend=LEGEND_BELOW, height=560, hovermode="closest")
    return fig


# --- the node's host links -----------------------------------------------------------------------------------------
def host_figure(frame: pd.DataFrame) -> go.Figure:
    """Each GPU's bandwidth with the host, alone and with every GPU copying at once, one panel per direction."""
    table = pm.host_links(frame)
    directions = [d for d in pm.HOST if d in set(table["direction"])]
    fig = make_subplots(rows=1, cols=max(len(directions), 1), shared_yaxes=True,
                        subplot_titles=[pm.LABELS[pm.HOST[d][0]].split(",")[0] for d in directions])
    for col, direction in enumerate(directions, start=1):
        part = table[table["direction"] == direction].sort_values("gpu")
        for column, name, color in (("alone", "alone", series_color(0)), ("together", "every GPU at once",
                                                                           series_color(1))):
            fig.add_trace(go.Bar(
                x=[f"GPU {g}" for g in part["gpu"]], y=part[column], name=name, legendgroup=column,
                showlegend=col == 1, marker_color=color, text=part[column].map(lambda v: f"{v:,.1f}"),
                textposition="outside", customdata=part["loss"] * 100,
                hovertemplate="%{x}: %{y:,.1f} GB/s " + name + "<br>loss together: %{customdata:.1f} %"
                              "<extra></extra>"), row=1, col=col)
    fig.update_yaxes(title_text="GB/s (10⁹ B/s)", rangemode="tozero", row=1, col=1)
    size = f" at {format_bytes(table['size'].max())}" if not table.empty else ""
    fig.update_layout(title=_title(f"Host links: each GPU alone vs every GPU at once{size}", frame),
                      barmode="group", legend=LEGEND_BELOW, height=440)
    return fig


# --- the numbers ---------------------------------------------------------------------------------------------------
def numbers_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Every point of the run: pair (or GPU and host), variant, method, size, GB/s (ns for latency) and spread."""
    latency = frame["variant"] == pm.LATENCY
    ns = pd.Series(math.nan, index=frame.index)
    ns[latency] = pm.ns_per_access(frame[latency])
    gpu = frame["gpu_index"].map(lambda v: f"GPU {int(v)}" if pd.notna(v) else "—")
    peer = frame["peer_index"].map(lambda v: f"GPU {int(v)}" if pd.notna(v) else "host")
    out = pd.DataFrame({
        "from": np.where(frame["direction"] == "h2d", "host", gpu),
        "to": np.where(frame["direction"] == "h2d", gpu, peer),
        "copy": frame["variant"].map(lambda v: pm.LABELS.get(v, v)),
        "method": frame["timer"].map(lambda t: pm.METHODS.get(t, t)),
        "size": frame["elements"].map(format_bytes), "elements": frame["elements"],
        "GB/s": frame["gbps"].where(~latency), "ns per access": ns,
        "median µs": frame["median_ms"] * 1e3, "cv %": frame["cv"] * 100, "samples": frame["samples"],
        "link": frame["link"].fillna(""),
    })
    return out.sort_values(["copy", "method", "from", "to", "elements"]).drop(columns="elements").reset_index(drop=True)


def rate(value: float) -> str:
    """A figure as a cell or a sentence shows it: whole from 10 up (391), two significant digits below (2.3, 0.23): a
    4 KiB peer copy's 0.23 GB/s read "0" when every figure was rounded to a whole number."""
    return f"{value:,.0f}" if not abs(value) < 10 else text.significant(value, 2)


def _rate_range(values: pd.Series, unit: str) -> str:
    """"391 GB/s", or "388–396 GB/s" where the figures differ once rounded."""
    low, high = rate(values.min()), rate(values.max())
    return f"{low} {unit}" if low == high else f"{low}–{high} {unit}"


def takeaway(frame: pd.DataFrame, view: pm.View | None = None) -> str | None:
    """The matrix in the view (by default the batched copy engine at its largest size): the rates of every pair and
    their link, the slowest pair where it is slow for its link type, both directions at once, and the latency."""
    view = view or pm.default_view(frame)
    rows = pm.matrix_rows(frame, view) if view else frame.iloc[:0]
    if rows.empty:
        return None
    links = rows["link"].map(lambda v: pm.link_of(v).text)
    common = links.mode().iloc[0]
    over = f" over {common}" if common else ""
    usual = rows[links == common]
    every = pm.gpus(frame)
    pairs = f"GPU {every[0]} and GPU {every[1]}" if len(every) == 2 else text.count(len(usual), "ordered pair")
    method = pm.METHODS.get(view.timer, view.timer)
    parts = [f"at {format_bytes(view.size)} ({pm.LABELS.get(view.variant, view.variant)}, {method}) "
             f"{pairs} copy {_rate_range(usual['gbps'], 'GB/s')} one way{over}"]
    for link, other in rows[links != common].groupby(links[links != common]):
        parts.append(f"{text.count(len(other), 'ordered pair')} {'go' if len(other) > 1 else 'goes'} "
                     f"{link or 'by a link not named'} at {_rate_range(other['gbps'], 'GB/s')}")
    slow = pm.slow_pairs(frame, view)
    if not slow.empty:
        worst = slow.iloc[0]
        source, destination = (worst["a"], worst["b"]) if not worst["forward"] > worst["backward"] else \
            (worst["b"], worst["a"])
        parts.append(f"GPU {source} → GPU {destination} is slow at {rate(worst['one_way'])} GB/s, "
                     f"{text.percent(worst['of_median'])} of the median {worst['kind']} pair")
    both = pm.matrix_rows(frame, pm.View(pm.BIDIRECTIONAL, view.timer, view.size))
    if not both.empty:
        ends = both[["source", "destination"]]
        totals = both.groupby([ends.min(axis=1), ends.max(axis=1)])["gbps"].sum()
        parts.append(f"both ways at once {_rate_range(totals, 'GB/s')} a pair")
    latency = pm.latency_view(frame)
    if latency is not None:
        chased = pm.matrix_rows(frame, latency)
        parts.append(f"latency into the peer's memory {_rate_range(pm.ns_per_access(chased), 'ns')}")
    return sentence(parts)
