"""How the coalescing experiment is shown: its Plotly figures (the strided and misaligned sweeps against the device
copy, the copy, layout and transpose bars), its stage takeaway and its desk headline. No Streamlit here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gpu.core import text
from gpu.core.errors import ClaimError
from gpu.experiments.coalescing import CONTIGUOUS_REFERENCE
from gpu.experiments.coalescing import LABELS as COALESCING_LABELS
from gpu.present import facts
from gpu.present.charts._common import LEGEND_BELOW, mark_not_clean, series_color, source_title
from gpu.present.takeaways import fact_or_none, sentence


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


def takeaway(frame: pd.DataFrame) -> str | None:
    """What strided and misaligned reads cost against the contiguous read of the same bytes (one baseline, named)."""
    parts = []
    strides = fact_or_none(facts.stride_costs, frame)
    if strides:
        parts.append(f"against {strides['baseline']}, stride {strides['two']} "
                     f"costs {strides['at_two_text']} and reads {text.count(strides['worst'], 'float')} apart cost "
                     f"{strides['at_worst_text']} ({strides['worst_gbps']:,.0f} GB/s)")
    offsets = fact_or_none(facts.misaligned_cost, frame)
    if offsets:
        parts.append(f"misaligned reads cost at most {offsets['cost_text']}"
                     + ("" if strides else f" against {offsets['baseline']}"))
    return sentence(parts)


def copy_reference(frame: pd.DataFrame, best: pd.DataFrame) -> str | None:
    """memcpy_dtod measured in the same run, our float4 copy as a share of it, and the HBM's theoretical rate.
    ``best``: the frame with each variant's share of memcpy_dtod (``with_peak_share``)."""
    peak = best[best["variant"] == "memcpy_dtod"]["gbps"]
    if peak.empty:
        return None
    copy_f4 = best[best["variant"] == "copy_f4"]
    line = (f"**memcpy_dtod: {peak.iloc[0]:,.0f} GB/s** (read + write) · our float4 copy: "
            f"{copy_f4['gbps'].iloc[0]:,.0f} GB/s = {copy_f4['pct_of_dtod'].iloc[0]:.0f} % of it · "
            f"HBM theoretical {frame['hbm_gbps_theoretical'].iloc[0]:,.0f} GB/s")
    try:
        reference = facts.contiguous_reference(facts.one_configuration(frame))
    except ClaimError:
        return line
    return line + f" · strided and misaligned reads are judged against {reference['baseline']}"


def strided_figure(frame: pd.DataFrame) -> go.Figure:
    return sweep_figure(frame, "strided")


def offset_figure(frame: pd.DataFrame) -> go.Figure:
    return sweep_figure(frame, "offset")


# The talk's charts of a coalescing scene, by the name its talk file gives them (``chart = "strided"``).
TALK_FIGURES = {"strided": strided_figure, "offset": offset_figure}
