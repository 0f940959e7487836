"""How the batching experiment is shown on the Memory modes page: many small copies against one packed copy, and
its desk headline (what each separate copy costs). No Streamlit here."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gpu.core.units import format_bytes
from gpu.experiments import batching
from gpu.present.charts._common import (
    LEGEND_BELOW,
    LOG_VALUE_AXIS,
    log_size_axis,
    mark_not_clean,
    per_variant,
    source_title,
    theoretical_lines,
    variant_parts,
)

COLORS = {"separate": "#EF553B", "packed": "#FFA15A", "one_copy": "#636EFA"}


def batching_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per piece size: effective GB/s of each way and the per-copy overhead (separate − one copy) / K in µs."""
    rows = []
    for (piece, count), part in frame.groupby(["piece_bytes", "chunks"]):
        ms, gbps = per_variant(part, "median_ms"), per_variant(part, "gbps")
        rows.append({"piece bytes": int(piece), "pieces": int(count),
                     **{f"{v} GB/s": gbps.get(v, math.nan) for v in batching.VARIANTS},
                     "per-copy overhead µs": (ms.get("separate", math.nan) - ms.get("one_copy", math.nan))
                     / count * 1e3})
    return pd.DataFrame(rows)


def batching_figure(frame: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for variant, part in variant_parts(frame, batching.VARIANTS, "piece_bytes"):
        fig.add_trace(go.Scatter(
            x=part["piece_bytes"], y=part["gbps"], mode="lines+markers", name=batching.LABELS[variant],
            line={"color": COLORS[variant]},
            customdata=np.column_stack([part["piece_bytes"].map(format_bytes), part["chunks"],
                                        part["median_ms"] * 1e3, part["cv"] * 100]),
            hovertemplate="%{customdata[1]} × %{customdata[0]}: %{y:.2f} GB/s · %{customdata[2]:,.1f} µs in all · "
                          "cv %{customdata[3]:.1f} %<extra>%{fullData.name}</extra>"))
        mark_not_clean(fig, part, "piece_bytes", "gbps")
    theoretical_lines(fig, frame, {"pcie_gbps_theoretical": "PCIe theoretical"}, log=True)
    fig.update_layout(title=source_title("K small copies vs one copy (effective GB/s of all K pieces)", frame),
                      xaxis={**log_size_axis(frame["piece_bytes"]), "title": "piece size s"},
                      yaxis={**LOG_VALUE_AXIS, "title": "effective GB/s (K·s / time)"}, height=440,
                      legend=LEGEND_BELOW)
    return fig


def headline(table: pd.DataFrame) -> str | None:
    """What each separate copy costs beyond its share of one big copy, from ``batching_table``."""
    overhead = table["per-copy overhead µs"].dropna()
    if overhead.empty:
        return None
    return (f"**Each separate copy costs about {overhead.median():.1f} µs more than its share of one "
            f"big copy** (median over piece sizes; {overhead.min():.1f} … {overhead.max():.1f} µs).")
