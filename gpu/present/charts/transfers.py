"""Plotly figures drawn from results DataFrames (the schema of ``gpu.core.schema``).

Shared by the pages and the runner; no Streamlit here. Every figure carries a source line (live device,
or the device and date of a recording) so a chart never loses where its numbers came from.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gpu.core.devices import uuid_tail
from gpu.core.stats import fit_latency_bandwidth
from gpu.core.text import chart_text
from gpu.core.units import format_bytes
from gpu.experiments.transfers import MODE_LABELS
from gpu.present import headlines

MODE_COLORS = {"pageable": "#636EFA", "pinned": "#EF553B", "pinned_wc": "#00CC96", "mapped": "#AB63FA"}
# Pinned and write-combined often measure the same: distinct markers keep both visible.
MODE_MARKERS = {"pageable": "circle", "pinned": "diamond", "pinned_wc": "x", "mapped": "square"}
# Write-combined pinned memory often measures exactly as pinned does: drawn dotted and thinner on top of pinned's
# wide solid line, both stay visible.
MODE_DASHES = {"pinned_wc": "dot"}
MODE_WIDTHS = {"pinned": 4.5}
SPEEDUP_TICKS = [0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32]
DIRECTION_TITLES = {"h2d": "Host → device (H2D)", "d2h": "Device → host (D2H)"}


def source_label(frame: pd.DataFrame) -> str:
    """'Live · NVIDIA H200 · 2026-11-21 22:10 UTC' or 'Replay of a run recorded on … · date', for a chart title:
    the run's own text (device, profile) escaped for Plotly."""
    if frame.empty:
        return ""
    first = frame.iloc[0]
    when = str(first["timestamp"]).replace("T", " ")[:16] + " UTC"
    prefix = "Live" if first["backend"] == "live" else "Replay of a run recorded on"
    board = first.get("gpu_uuid")  # the board that measured, where the run names it (boards of a model differ)
    device = f"{first['device_name']} {uuid_tail(board)}" if isinstance(board, str) and board else first["device_name"]
    return f"{prefix} {chart_text(device)} · {chart_text(when)} · profile {chart_text(first['profile'])}"


# Log axes of values: one plain tick per decade (1, 10, 100, 1,000), never "5, 2, 1000" or "10B".
LOG_VALUE_AXIS = {"type": "log", "dtick": 1, "tickformat": ",~g", "exponentformat": "none"}
STAGE_FONT_PX = 20  # ticks, legends, annotations and bar labels on stage: readable from the back of a room
STAGE_AXIS_TITLE_PX = 22
STAGE_TITLE_PX = 26


# A horizontal legend under the chart, anchored to the figure's bottom edge (not to the plot area): Plotly then makes
# room for it below the x axis' ticks and title, where a legend at y=-0.25 of the plot sat on top of long tick labels.
LEGEND_BELOW = {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0, "xanchor": "left"}


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
    fig.update_traces(textfont={"size": STAGE_FONT_PX}, cliponaxis=False, selector={"type": "bar"})
    fig.update_traces(textfont={"size": STAGE_FONT_PX}, cliponaxis=False, selector={"type": "scatter"})
    return fig


def reference_line(fig: go.Figure, value: float, name: str, level: str, log: bool) -> None:
    """A dotted horizontal line at ``value``, labelled "name<br>level" in the right margin, clear of bars and their
    labels. Plotly places an annotation on a log axis in log10 units (a value of 4,800 would stretch the axis to
    10^4800), so the label goes at log10(value) there."""
    fig.add_hline(y=value, line={"dash": "dot", "color": "gray"}, layer="below")
    fig.add_annotation(text=f"{name}<br>{level}", xref="paper", x=1.01, xanchor="left", align="left",
                       y=math.log10(value) if log else value, yref="y", showarrow=False, font={"color": "gray"})
    fig.update_layout(margin={"r": 190})


def _size_ticks(sizes) -> dict:
    values = sorted(set(int(s) for s in sizes))
    step = max(1, math.ceil(len(values) / 10))
    shown = values[::step]
    return {"tickvals": shown, "ticktext": [format_bytes(v) for v in shown]}


def _hover(frame: pd.DataFrame) -> np.ndarray:
    return np.column_stack([
        frame["bytes"].map(format_bytes), frame["median_ms"] * 1e3, frame["cv"] * 100, frame["samples"],
        frame["min_ms"] * 1e3, frame["max_ms"] * 1e3,
    ])


HOVER = ("%{customdata[0]}<br>%{y:.2f} GB/s<br>median %{customdata[1]:.2f} µs "
         "(min %{customdata[4]:.2f}, max %{customdata[5]:.2f})<br>cv %{customdata[2]:.2f} % · %{customdata[3]} samples"
         "<br>error bar: the middle 90 % of samples")


def _series_name(mode: str, include_alloc: bool) -> str:
    return MODE_LABELS[mode] + (" + allocation" if include_alloc else "")


def _dash(mode: str, include_alloc: bool) -> str:
    """Dashed: including allocation; dotted: write-combined (often on top of pinned)."""
    if include_alloc:
        return "dashdot" if mode in MODE_DASHES else "dash"
    return MODE_DASHES.get(mode, "solid")


SPREAD_QUANTILES = (0.05, 0.95)  # the error bars: the middle 90 % of a point's samples


def _middle_of_samples(series: pd.DataFrame) -> dict:
    """Error bars over the middle 90 % of each point's samples, in GB/s. Not min to max: among thousands of copies
    of 1 MiB a few are delayed by the host, and their slowest sample drew a bar down to ~0 GB/s under a point that
    holds steady at 50. A row without its samples falls back to min and max."""
    fast, slow = [], []
    for row in series.itertuples():
        samples = getattr(row, "samples_ms", None)
        if samples is not None and len(samples):
            low, high = np.quantile(np.asarray(samples, dtype=float), SPREAD_QUANTILES)
        else:
            low, high = row.min_ms, row.max_ms
        fast.append(row.bytes / (low * 1e6))
        slow.append(row.bytes / (high * 1e6))
    return {"type": "data", "symmetric": False, "array": np.asarray(fast) - series["gbps"].to_numpy(),
            "arrayminus": series["gbps"].to_numpy() - np.asarray(slow), "thickness": 1, "width": 2}


def bandwidth_figure(frame: pd.DataFrame) -> go.Figure:
    """GB/s vs size, one panel per direction, one line per memory mode, with the PCIe line."""
    directions = [d for d in ("h2d", "d2h") if d in set(frame["direction"])]
    fig = make_subplots(rows=1, cols=len(directions), shared_yaxes=True,
                        subplot_titles=[DIRECTION_TITLES[d] for d in directions])
    known = frame["pcie_gbps_theoretical"].dropna()
    pcie = float(known.iloc[0]) if not known.empty else math.nan
    for col, direction in enumerate(directions, start=1):
        part = frame[frame["direction"] == direction]
        for (mode, alloc), series in part.groupby(["variant", "include_alloc"], sort=False):
            series = series.sort_values("bytes")
            fig.add_trace(go.Scatter(
                x=series["bytes"], y=series["gbps"], mode="lines+markers",
                name=_series_name(mode, alloc), legendgroup=f"{mode}-{alloc}", showlegend=col == 1,
                line={"color": MODE_COLORS[mode], "dash": _dash(mode, alloc), "width": MODE_WIDTHS.get(mode, 2)},
                marker={"symbol": MODE_MARKERS[mode], "size": 8},
                error_y=_middle_of_samples(series),
                customdata=_hover(series), hovertemplate=HOVER + "<extra>%{fullData.name}</extra>",
            ), row=1, col=col)
        if not math.isnan(pcie):
            fig.add_trace(go.Scatter(
                x=[part["bytes"].min(), part["bytes"].max()], y=[pcie, pcie], mode="lines",
                name=f"PCIe theoretical ({pcie:.1f} GB/s)", legendgroup="pcie", showlegend=col == 1,
                line={"color": "gray", "dash": "dot"},
                hovertemplate="theoretical PCIe per direction: %{y:.1f} GB/s<extra></extra>"), row=1, col=col)
        fig.update_xaxes(type="log", title_text="transfer size", row=1, col=col, **_size_ticks(part["bytes"]))
    fig.update_yaxes(title_text="bandwidth (GB/s, 10⁹ B/s)", row=1, col=1)
    fig.update_layout(title={"text": "Bandwidth vs size<br><sup>" + source_label(frame) + "</sup>"},
                      hovermode="closest", legend=LEGEND_BELOW, height=480)
    return fig


def speedup_table(frame: pd.DataFrame, baseline: str = "pageable") -> pd.DataFrame:
    """Each mode ÷ the baseline, per size, direction and allocation setting (``headlines.speedups``)."""
    return headlines.speedups(frame, baseline)


def speedup_figure(frame: pd.DataFrame) -> go.Figure:
    """Each mode's bandwidth ÷ pageable's: above 1 the mode wins, below 1 it loses."""
    table = speedup_table(frame)
    directions = [d for d in ("h2d", "d2h") if d in set(table["direction"])] or ["h2d"]
    fig = make_subplots(rows=1, cols=len(directions), shared_yaxes=True,
                        subplot_titles=[DIRECTION_TITLES[d] for d in directions])
    for col, direction in enumerate(directions, start=1):
        part = table[table["direction"] == direction]
        for (mode, alloc), series in part.groupby(["variant", "include_alloc"], sort=False):
            series = series.sort_values("bytes")
            fig.add_trace(go.Scatter(
                x=series["bytes"], y=series["speedup"], mode="lines+markers",
                name=_series_name(mode, alloc) + " ÷ pageable", legendgroup=f"{mode}-{alloc}",
                showlegend=col == 1, line={"color": MODE_COLORS[mode], "dash": _dash(mode, alloc),
                                           "width": MODE_WIDTHS.get(mode, 2)},
                marker={"symbol": MODE_MARKERS[mode], "size": 8}, customdata=series["bytes"].map(format_bytes),
                hovertemplate="%{customdata}: %{y:.2f}× pageable<extra>%{fullData.name}</extra>"), row=1, col=col)
        if not part.empty:
            fig.add_hline(y=1.0, line={"color": "gray", "dash": "dot"}, row=1, col=col)
            fig.update_xaxes(type="log", title_text="transfer size", row=1, col=col, **_size_ticks(part["bytes"]))
    fig.update_yaxes(type="log", tickvals=SPEEDUP_TICKS, ticktext=[f"{t:g}×" for t in SPEEDUP_TICKS])
    fig.update_yaxes(title_text="speedup over pageable", row=1, col=1)
    fig.update_layout(title={"text": "Speedup over pageable memory<br><sup>" + source_label(frame) + "</sup>"},
                      legend=LEGEND_BELOW, height=440)
    return fig


def model_table(frame: pd.DataFrame) -> pd.DataFrame:
    """t = α + bytes/β fitted per mode, direction and allocation setting."""
    rows = []
    for (mode, direction, alloc), series in frame.groupby(["variant", "direction", "include_alloc"], sort=False):
        try:
            fit = fit_latency_bandwidth(series["bytes"], series["median_ms"])
        except ValueError:
            continue
        rows.append({"mode": _series_name(mode, alloc), "variant": mode, "direction": direction,
                     "include_alloc": alloc, "alpha_us": fit.alpha_us, "beta_gbps": fit.beta_gbps,
                     "n_half_bytes": fit.n_half_bytes, "max_rel_residual": fit.max_rel_residual,
                     "points": fit.points})
    return pd.DataFrame(rows)


def model_figure(frame: pd.DataFrame) -> go.Figure:
    """Measured time vs size (markers) and the fitted t = α + bytes/β (lines), log-log."""
    fits = model_table(frame)
    directions = [d for d in ("h2d", "d2h") if d in set(frame["direction"])]
    fig = make_subplots(rows=1, cols=len(directions), shared_yaxes=True,
                        subplot_titles=[DIRECTION_TITLES[d] for d in directions])
    for col, direction in enumerate(directions, start=1):
        part = frame[frame["direction"] == direction]
        for (mode, alloc), series in part.groupby(["variant", "include_alloc"], sort=False):
            series = series.sort_values("bytes")
            name = _series_name(mode, alloc)
            style = {"color": MODE_COLORS[mode], "dash": _dash(mode, alloc)}
            fig.add_trace(go.Scatter(x=series["bytes"], y=series["median_ms"] * 1e3, mode="markers",
                                     name=name + " (measured)", legendgroup=name, showlegend=col == 1,
                                     marker={"color": MODE_COLORS[mode], "symbol": MODE_MARKERS[mode]},
                                     customdata=series["bytes"].map(format_bytes),
                                     hovertemplate="%{customdata}: %{y:.2f} µs measured<extra></extra>"),
                          row=1, col=col)
            fit = fits[(fits["variant"] == mode) & (fits["direction"] == direction) & (fits["include_alloc"] == alloc)]
            if not fit.empty:
                f = fit.iloc[0]
                sizes = np.geomspace(series["bytes"].min(), series["bytes"].max(), 60)
                fig.add_trace(go.Scatter(
                    x=sizes, y=f["alpha_us"] + sizes / (f["beta_gbps"] * 1e3), mode="lines",
                    name=f"{name} fit: α={f['alpha_us']:.1f} µs, β={f['beta_gbps']:.1f} GB/s",
                    legendgroup=name, showlegend=col == 1, line=style,
                    hovertemplate="model: %{y:.2f} µs<extra>%{fullData.name}</extra>"), row=1, col=col)
        fig.update_xaxes(type="log", title_text="transfer size", row=1, col=col, **_size_ticks(part["bytes"]))
    fig.update_yaxes(**LOG_VALUE_AXIS)
    fig.update_yaxes(title_text="time per transfer (µs)", row=1, col=1)
    fig.update_layout(title={"text": "Latency/bandwidth model t = α + bytes/β<br><sup>"
                             + source_label(frame) + "</sup>"},
                      legend=LEGEND_BELOW, height=480)
    return fig


def numbers_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The measured numbers with their spread, for the page's table and CSV export."""
    out = pd.DataFrame({
        "mode": [_series_name(m, a) for m, a in zip(frame["variant"], frame["include_alloc"], strict=False)],
        "direction": frame["direction"].str.upper(),
        "size": frame["bytes"].map(format_bytes),
        "bytes": frame["bytes"],
        "median µs": frame["median_ms"] * 1e3,
        "min µs": frame["min_ms"] * 1e3,
        "max µs": frame["max_ms"] * 1e3,
        "cv %": frame["cv"] * 100,
        "samples": frame["samples"],
        "GB/s": frame["gbps"],
        "stop": frame["stop_reason"],
        "throttled": frame["throttled"],
    })
    if "param" in frame and (frame["param"] == "copies per sample").any():  # batched: µs and GB/s are per copy
        out["copies per sample"] = frame["param_value"].to_numpy()
    return out.sort_values(["direction", "mode", "bytes"]).reset_index(drop=True)
