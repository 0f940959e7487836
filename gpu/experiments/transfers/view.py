"""How the transfers experiment is shown: the Transfers page's Plotly figures, drawn from results DataFrames (the
schema of ``gpu.core.schema``), its stage takeaway, its desk verdict, and the talk's charts and judges of a transfers
scene (pinned against pageable, as the page says it).

Shared by the pages and the runner; no Streamlit here. Every figure carries a source line (live device,
or the device and date of a recording: ``_common.source_title``) so a chart never loses where its numbers came from.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from gpu.core.errors import ClaimError
from gpu.core.stats import fit_latency_bandwidth
from gpu.core.units import format_bytes
from gpu.experiments.transfers import MODE_LABELS
from gpu.present import facts, headlines
from gpu.present.charts._common import LEGEND_BELOW, LOG_VALUE_AXIS, mark_not_clean, size_ticks, source_title

MODE_COLORS = {"pageable": "#636EFA", "pinned": "#EF553B", "pinned_wc": "#00CC96", "mapped": "#AB63FA"}
# Pinned and write-combined often measure the same: distinct markers keep both visible.
MODE_MARKERS = {"pageable": "circle", "pinned": "diamond", "pinned_wc": "x", "mapped": "square"}
# Write-combined pinned memory often measures exactly as pinned does: drawn dotted and thinner on top of pinned's
# wide solid line, both stay visible.
MODE_DASHES = {"pinned_wc": "dot"}
MODE_WIDTHS = {"pinned": 4.5}
SPEEDUP_TICKS = [0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32]
DIRECTION_TITLES = {"h2d": "Host → device (H2D)", "d2h": "Device → host (D2H)"}


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


def _direction_panels(frame: pd.DataFrame, otherwise=()) -> tuple[go.Figure, list[tuple[int, pd.DataFrame]]]:
    """A figure with one panel per direction the frame holds (else ``otherwise``'s), sharing the y axis; and each
    panel's column with its rows."""
    directions = [d for d in ("h2d", "d2h") if d in set(frame["direction"])] or list(otherwise)
    fig = make_subplots(rows=1, cols=len(directions), shared_yaxes=True,
                        subplot_titles=[DIRECTION_TITLES[d] for d in directions])
    return fig, [(col, frame[frame["direction"] == d]) for col, d in enumerate(directions, start=1)]


def _mode_series(part: pd.DataFrame):
    """(mode, include_alloc, its rows by size): the lines of one direction's panel."""
    for (mode, alloc), series in part.groupby(["variant", "include_alloc"], sort=False):
        yield mode, alloc, series.sort_values("bytes")


def _mode_style(mode: str, alloc: bool, col: int) -> dict:
    """A mode's line and markers, named in the legend once (from the first panel)."""
    return {"legendgroup": f"{mode}-{alloc}", "showlegend": col == 1,
            "marker": {"symbol": MODE_MARKERS[mode], "size": 8},
            "line": {"color": MODE_COLORS[mode], "dash": _dash(mode, alloc), "width": MODE_WIDTHS.get(mode, 2)}}


def _size_axis(fig: go.Figure, part: pd.DataFrame, col: int) -> None:
    fig.update_xaxes(type="log", title_text="transfer size", row=1, col=col, **size_ticks(part["bytes"]))


def bandwidth_figure(frame: pd.DataFrame) -> go.Figure:
    """GB/s vs size, one panel per direction, one line per memory mode, with the PCIe line."""
    fig, panels = _direction_panels(frame)
    known = frame["pcie_gbps_theoretical"].dropna()
    pcie = float(known.iloc[0]) if not known.empty else math.nan
    for col, part in panels:
        for mode, alloc, series in _mode_series(part):
            fig.add_trace(go.Scatter(
                x=series["bytes"], y=series["gbps"], mode="lines+markers", name=_series_name(mode, alloc),
                error_y=_middle_of_samples(series), **_mode_style(mode, alloc, col),
                customdata=_hover(series), hovertemplate=HOVER + "<extra>%{fullData.name}</extra>",
            ), row=1, col=col)
            mark_not_clean(fig, series, "bytes", "gbps", row=1, col=col)
        if not math.isnan(pcie):
            fig.add_trace(go.Scatter(
                x=[part["bytes"].min(), part["bytes"].max()], y=[pcie, pcie], mode="lines",
                name=f"PCIe theoretical ({pcie:.1f} GB/s)", legendgroup="pcie", showlegend=col == 1,
                line={"color": "gray", "dash": "dot"},
                hovertemplate="theoretical PCIe per direction: %{y:.1f} GB/s<extra></extra>"), row=1, col=col)
        _size_axis(fig, part, col)
    fig.update_yaxes(title_text="bandwidth (GB/s, 10⁹ B/s)", row=1, col=1)
    fig.update_layout(title=source_title("Bandwidth vs size", frame), hovermode="closest", legend=LEGEND_BELOW,
                      height=480)
    return fig


def speedup_table(frame: pd.DataFrame, baseline: str = "pageable") -> pd.DataFrame:
    """Each mode ÷ the baseline, per size, direction and allocation setting (``headlines.speedups``)."""
    return headlines.speedups(frame, baseline)


def speedup_figure(frame: pd.DataFrame) -> go.Figure:
    """Each mode's bandwidth ÷ pageable's: above 1 the mode wins, below 1 it loses."""
    fig, panels = _direction_panels(speedup_table(frame), otherwise=["h2d"])
    for col, part in panels:
        for mode, alloc, series in _mode_series(part):
            fig.add_trace(go.Scatter(
                x=series["bytes"], y=series["speedup"], mode="lines+markers",
                name=_series_name(mode, alloc) + " ÷ pageable", **_mode_style(mode, alloc, col),
                customdata=series["bytes"].map(format_bytes),
                hovertemplate="%{customdata}: %{y:.2f}× pageable<extra>%{fullData.name}</extra>"), row=1, col=col)
        if not part.empty:
            fig.add_hline(y=1.0, line={"color": "gray", "dash": "dot"}, row=1, col=col)
            _size_axis(fig, part, col)
    fig.update_yaxes(type="log", tickvals=SPEEDUP_TICKS, ticktext=[f"{t:g}×" for t in SPEEDUP_TICKS])
    fig.update_yaxes(title_text="speedup over pageable", row=1, col=1)
    fig.update_layout(title=source_title("Speedup over pageable memory", frame), legend=LEGEND_BELOW, height=440)
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
    fig, panels = _direction_panels(frame)
    for col, part in panels:
        direction = part["direction"].iloc[0]
        for mode, alloc, series in _mode_series(part):
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
        _size_axis(fig, part, col)
    fig.update_yaxes(**LOG_VALUE_AXIS)
    fig.update_yaxes(title_text="time per transfer (µs)", row=1, col=1)
    fig.update_layout(title=source_title("Latency/bandwidth model t = α + bytes/β", frame), legend=LEGEND_BELOW,
                      height=480)
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
    if "copies_per_sample" in frame and frame["copies_per_sample"].notna().any():  # batched: µs and GB/s per copy
        out["copies per sample"] = frame["copies_per_sample"].to_numpy()
    return out.sort_values(["direction", "mode", "bytes"]).reset_index(drop=True)


# --- pinned against pageable (the page, the stage and the talk) -------------------------------------------------------
def _need(frame: pd.DataFrame, mask, what: str) -> pd.DataFrame:
    part = frame[mask]
    if part.empty:
        raise ClaimError(f"the measurement has no {what}")
    return part


def pinned_speedups(frame: pd.DataFrame, include_alloc: bool, direction: str = "h2d") -> pd.Series:
    """Pageable time ÷ pinned time per size (ascending), for copy-only or allocation-including points; ClaimError
    when the frame lacks either mode. The talk's verdicts and the page's stage takeaway read it."""
    rows = _need(frame, (frame["include_alloc"].fillna(False) == include_alloc) & (frame["direction"] == direction),
                 f"{'allocation-including' if include_alloc else 'copy-only'} {direction.upper()} points")
    if not {"pinned", "pageable"} <= set(rows["variant"]):
        raise ClaimError("the measurement needs both pinned and pageable copies")
    return headlines.pinned_over_pageable(rows)


def pinned_up_to_2x(frame: pd.DataFrame) -> dict:
    """The talk's judge of 'Pinned memory is up to 2× faster': pinned ÷ pageable speed at the largest and the smallest
    size."""
    speed = pinned_speedups(frame, False)
    large, small = float(speed.iloc[-1]), float(speed.iloc[0])
    if large > 2.2:
        verdict = "Understated for large copies" + (", and no gain for small ones" if small < 1.1 else "")
    elif large < 1.8:
        verdict = "Overstated"
    else:
        verdict = "About right"
    return {"verdict": verdict, "large": large, "small": small, "large_size": format_bytes(speed.index[-1]),
            "small_size": format_bytes(speed.index[0]), "large_text": facts.ratio_text(large),
            "small_text": facts.ratio_text(small)}


def pinned_allocated_per_call(frame: pd.DataFrame) -> dict:
    """The talk's judge of 'Pinned beats pageable' in code that allocates its pinned buffer on every call."""
    with_alloc = pinned_speedups(frame, True)
    copy_only = pinned_speedups(frame, False)
    size = with_alloc.index[-1]
    ratio = float(with_alloc.iloc[-1])
    pinned = _need(frame, (frame["variant"] == "pinned") & (frame["include_alloc"].fillna(False))
                   & (frame["direction"] == "h2d") & (frame["bytes"] == size), "pinned point with allocation")
    alloc_ms = float(pinned["median_ms"].iloc[0]) - float(
        frame[(frame["variant"] == "pinned") & ~frame["include_alloc"].fillna(False) & (frame["direction"] == "h2d")
              & (frame["bytes"] == size)]["median_ms"].iloc[0])
    verdict = f"False at {format_bytes(size)}" if ratio < 1 else f"True at {format_bytes(size)}"
    copy_ratio = float(copy_only.get(size, math.nan))
    return {"verdict": verdict, "ratio": ratio, "ratio_text": facts.ratio_text(ratio), "copy_only": copy_ratio,
            "copy_only_text": facts.ratio_text(copy_ratio), "size": format_bytes(size), "alloc_s": alloc_ms / 1e3,
            "alloc_text": f"{alloc_ms / 1e3:.2f} s"}


CLAIMS = {f.__name__: f for f in (pinned_up_to_2x, pinned_allocated_per_call)}
# The figures of each verdict that the page's stage takeaway shows too, as text (tests/test_one_fact.py).
SHARED_FIGURES = {"pinned_up_to_2x": ("large_text", "small_text"),
                  "pinned_allocated_per_call": ("ratio_text", "alloc_text")}


def takeaway(frame: pd.DataFrame) -> str | None:
    """Pinned against pageable host-to-device speed at the largest and smallest size, and allocated per copy."""
    def speedups(include_alloc: bool) -> pd.Series:
        try:
            return pinned_speedups(frame, include_alloc)
        except ClaimError:
            return pd.Series(dtype=float)

    copy_only = speedups(False)
    if copy_only.empty:
        return None
    line = f"Host → device: pinned copies {facts.ratio_text(copy_only.iloc[-1])} as fast as pageable at " \
           f"{format_bytes(copy_only.index[-1])}"
    if len(copy_only) > 1:
        line += f", {facts.ratio_text(copy_only.iloc[0])} at {format_bytes(copy_only.index[0])}"
    per_call = speedups(True)
    if not per_call.empty:
        try:  # what the allocation itself costs, as the talk's verdict says it
            cost = f" ({pinned_allocated_per_call(frame)['alloc_text']} each)"
        except (ClaimError, IndexError, KeyError):
            cost = ""
        line += (f"; allocated per copy{cost}, {facts.ratio_text(per_call.iloc[-1])} "
                 f"at {format_bytes(per_call.index[-1])}")
    return line + "."


def transfers_verdict(view: pd.DataFrame, label: str) -> str | None:
    """Pinned ÷ pageable at the largest size measured, per direction."""
    table = headlines.speedups(view)
    table = table[(table["variant"] == "pinned")]
    if table.empty:
        return None
    top = table[table["bytes"] == table["bytes"].max()]
    parts = [f"{r.direction.upper()} {r.speedup:.2f}×" for r in top.itertuples()]
    return f"{label}, {format_bytes(top['bytes'].iloc[0])}: pinned ÷ pageable = " + ", ".join(parts)


# The talk's charts of a transfers scene, by the name its talk file gives them (``chart = "speedup"``).
TALK_FIGURES = {"speedup": speedup_figure, "bandwidth": bandwidth_figure}
