"""How the coalescing experiment is shown: its Plotly figures (the strided and misaligned sweeps against the device
copy, the copy, layout and transpose bars), its figures said on the page, on stage and in the talk (what strided and
misaligned reads cost against the contiguous read), its stage takeaway, its desk headline and the talk's judges of
those costs. No Streamlit here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gpu.core import text
from gpu.core.errors import ClaimError
from gpu.experiments.coalescing import CONTIGUOUS_REFERENCE
from gpu.experiments.coalescing import LABELS as COALESCING_LABELS
from gpu.present.charts._common import LEGEND_BELOW, mark_not_clean, series_color, source_title
from gpu.present.claims import beyond
from gpu.present.facts import one_configuration, ratio_text
from gpu.present.takeaways import fact_or_none, sentence


def with_peak_share(frame: pd.DataFrame) -> pd.DataFrame:
    """Adds pct_of_dtod: each point's GB/s over memcpy_dtod's at the same block size in the same run."""
    peak = frame[frame["variant"] == "memcpy_dtod"].set_index(["run_id", "block_size"])["gbps"]
    keys = list(zip(frame["run_id"], frame["block_size"], strict=True))
    share = [frame["gbps"].iloc[i] / peak.get(key, np.nan) * 100 for i, key in enumerate(keys)]
    return frame.assign(pct_of_dtod=share)


# --- the strided and misaligned reads against the one contiguous read (the page, the stage and the talk) -------------
def contiguous_reference(frame: pd.DataFrame) -> dict:
    """The contiguous read the access patterns are judged against (``CONTIGUOUS_REFERENCE``, the same bytes with one
    load and one store per thread), in the configuration shown."""
    rows = frame[frame["variant"] == CONTIGUOUS_REFERENCE]
    if rows.empty:
        raise ClaimError(f"the measurement has no contiguous read ({COALESCING_LABELS[CONTIGUOUS_REFERENCE]})")
    gbps = float(rows["gbps"].iloc[0])
    return {"gbps": gbps, "label": COALESCING_LABELS[CONTIGUOUS_REFERENCE],
            "baseline": f"the contiguous read ({COALESCING_LABELS[CONTIGUOUS_REFERENCE]}, {gbps:,.0f} GB/s)"}


def stride_costs(frame: pd.DataFrame) -> dict:
    """What each stride costs: the contiguous read's GB/s ÷ the strided read's, for the second-smallest stride
    measured (``two``) and the largest (``worst``)."""
    frame = one_configuration(frame)
    strides = frame[frame["variant"] == "strided"].set_index("stride")["gbps"]
    strides = strides[strides.index > 1]
    if strides.empty:
        raise ClaimError("the measurement needs at least one stride above 1")
    reference = contiguous_reference(frame)
    two, worst = int(min(strides.index)), int(max(strides.index))
    at_two, at_worst = reference["gbps"] / float(strides[two]), reference["gbps"] / float(strides[worst])
    return {"two": two, "at_two": at_two, "at_two_text": ratio_text(at_two), "worst": worst, "at_worst": at_worst,
            "at_worst_text": ratio_text(at_worst), "worst_gbps": float(strides[worst]),
            "reference_gbps": reference["gbps"], "baseline": reference["baseline"]}


def misaligned_cost(frame: pd.DataFrame) -> dict:
    """The slowest misaligned read (offsets not a multiple of 32 floats, i.e. of 128 bytes) against the contiguous
    read: 1 − its GB/s ÷ the reference's."""
    frame = one_configuration(frame)
    offsets = frame[frame["variant"] == "offset"].set_index("offset")["gbps"]
    misaligned = offsets[[int(o) % 32 != 0 for o in offsets.index]]
    if misaligned.empty:
        raise ClaimError("the measurement needs at least one misaligned read (an offset that is not a multiple of 32)")
    reference = contiguous_reference(frame)
    worst = int(misaligned.idxmin())
    cost = 1 - float(misaligned.min()) / reference["gbps"]
    return {"worst_offset": worst, "cost": cost, "cost_text": text.percent(cost, 1), "aligned": reference["gbps"],
            "baseline": reference["baseline"]}


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
SWEPT_COLUMNS = {"strided": "stride", "offset": "offset"}  # the coordinate each sweep's figure draws along


def sweep_figure(frame: pd.DataFrame, variant: str) -> go.Figure:
    """GB/s against a swept parameter (stride or offset), with the device copy and HBM lines."""
    axis_title, title = SWEEP_LABELS[variant]
    column = SWEPT_COLUMNS[variant]
    data = with_peak_share(frame)
    part = data[data["variant"] == variant].sort_values(column)
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=part[column], y=part["gbps"], mode="lines+markers", name=COALESCING_LABELS[variant],
        customdata=np.column_stack([part["pct_of_dtod"], part["median_ms"] * 1e3, part["cv"] * 100]),
        hovertemplate=axis_title + " %{x}: %{y:.0f} GB/s (%{customdata[0]:.0f} % of memcpy_dtod)<br>"
                      "median %{customdata[1]:.1f} µs, cv %{customdata[2]:.2f} %<extra></extra>"))
    mark_not_clean(fig, part, column, "gbps")
    if not part.empty:
        x_range = [part[column].min(), part[column].max()]
        _reference_lines(fig, data, x_range)
        # the read the verdicts judge this sweep against (contiguous_reference), drawn where they name it
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
        fig.update_xaxes(type="log", tickvals=sorted(part[column].unique()))
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
    strides = fact_or_none(stride_costs, frame)
    if strides:
        parts.append(f"against {strides['baseline']}, stride {strides['two']} "
                     f"costs {strides['at_two_text']} and reads {text.count(strides['worst'], 'float')} apart cost "
                     f"{strides['at_worst_text']} ({strides['worst_gbps']:,.0f} GB/s)")
    offsets = fact_or_none(misaligned_cost, frame)
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
        reference = contiguous_reference(one_configuration(frame))
    except ClaimError:
        return line
    return line + f" · strided and misaligned reads are judged against {reference['baseline']}"


def strided_figure(frame: pd.DataFrame) -> go.Figure:
    return sweep_figure(frame, "strided")


def offset_figure(frame: pd.DataFrame) -> go.Figure:
    return sweep_figure(frame, "offset")


# The talk's charts of a coalescing scene, by the name its talk file gives them (``chart = "strided"``).
TALK_FIGURES = {"strided": strided_figure, "offset": offset_figure}


# The talk's judges of a coalescing scene (``gpu.present.claims``), each on a figure the page says too.
misaligned_is_expensive = beyond(
    "misaligned_is_expensive", misaligned_cost, "cost", 0.2, "True", "Mostly false on this GPU",
    """'Misaligned access is expensive': the worst misaligned read against the contiguous read of the same bytes
    (``misaligned_cost``, as the Coalescing page says it).""")

non_coalesced_costs_1_2x = beyond(
    "non_coalesced_costs_1_2x", stride_costs, "at_worst", 1.5, "Depends on the stride", "True",
    """'Non-coalesced access costs about 1.2×': the contiguous read over stride 2 and over the largest stride
    measured (``stride_costs``, as the Coalescing page says it).""")

CLAIMS = {f.__name__: f for f in (misaligned_is_expensive, non_coalesced_costs_1_2x)}
# The figures of each verdict that the page's stage takeaway shows too, as text (tests/test_one_fact.py).
SHARED_FIGURES = {"misaligned_is_expensive": ("cost_text",),
                  "non_coalesced_costs_1_2x": ("at_two_text", "at_worst_text")}
