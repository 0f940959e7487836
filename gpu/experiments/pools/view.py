"""How the pools experiment is shown on the Memory modes page: allocate → copy → free per iteration, per call
against pooled, where pooling starts to pay, and its desk headline. No Streamlit here; tables derive only from
measured rows of one run (``gpu.core.schema``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gpu.core.units import format_bytes
from gpu.experiments import pools
from gpu.present.charts._common import (
    LEGEND_BELOW,
    LOG_VALUE_AXIS,
    log_size_axis,
    mark_not_clean,
    source_title,
    variant_parts,
)

COLORS = {"device_per_call": "#FFA15A", "device_pooled": "#19D3F3", "pinned_per_call": "#EF553B",
          "pinned_pooled": "#636EFA"}


def pool_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per size: ms per iteration of each variant and the pool's saving (per call ÷ pooled)."""
    ms = frame.pivot_table(index="bytes", columns="variant", values="median_ms")
    out = pd.DataFrame({"bytes": ms.index.astype(int)})
    for variant in pools.VARIANTS:
        out[f"{variant} ms"] = ms[variant].to_numpy() if variant in ms else math.nan
    for kind in ("device", "pinned"):
        per_call, pooled = out[f"{kind}_per_call ms"], out[f"{kind}_pooled ms"]
        out[f"{kind}: per call ÷ pooled"] = per_call / pooled
    return out


def pool_crossover(table: pd.DataFrame, kind: str, factor: float = 2.0) -> int | None:
    """The smallest measured size from which allocating per call costs more than the copy itself, i.e. per call
    ÷ pooled ≥ ``factor`` (2) at that size and every larger one; None when no such size was measured."""
    column = f"{kind}: per call ÷ pooled"
    if column not in table or table[column].isna().all():
        return None
    ordered = table.sort_values("bytes")
    crossover = None
    for size, ratio in zip(ordered["bytes"], ordered[column], strict=True):
        if ratio >= factor:
            crossover = crossover or int(size)
        else:
            crossover = None
    return crossover


def pools_figure(frame: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for variant, part in variant_parts(frame, pools.VARIANTS, "bytes"):
        fig.add_trace(go.Scatter(
            x=part["bytes"], y=part["median_ms"] * 1e3, mode="lines+markers", name=pools.LABELS[variant],
            line={"color": COLORS[variant], "dash": "solid" if variant.endswith("pooled") else "dash"},
            customdata=np.column_stack([part["bytes"].map(format_bytes), part["cv"] * 100, part["samples"]]),
            hovertemplate="%{customdata[0]}: %{y:,.1f} µs per iteration · cv %{customdata[1]:.1f} % · "
                          "%{customdata[2]} iterations<extra>%{fullData.name}</extra>"))
        mark_not_clean(fig, part, "bytes", part["median_ms"] * 1e3)
    fig.update_layout(title=source_title("Allocate → copy → free: time per iteration", frame), xaxis=log_size_axis(
        frame["bytes"]), yaxis={**LOG_VALUE_AXIS, "title": "µs per iteration (median)"}, xaxis_title="buffer size",
        height=440, legend=LEGEND_BELOW)
    return fig


def headline(table: pd.DataFrame, crossover) -> list[str]:
    """Per call ÷ pooled for device and pinned memory, from ``pool_table``; ``crossover(table, kind)``
    is the size from which on allocating per call costs more than the copy (``pool_crossover``)."""
    parts = []
    for kind in ("device", "pinned"):
        ratio = table[f"{kind}: per call ÷ pooled"]
        if ratio.notna().any():
            size = crossover(table, kind)
            where = (f"from {format_bytes(size)} up, allocating per call costs more than the copy itself "
                     "(pooled is ≥ 2× faster at every larger size)" if size else
                     "allocating per call costs more than the copy itself at no size measured")
            parts.append(f"**{kind}**: per call ÷ pooled = {ratio.min():.2f}× … {ratio.max():.2f}×; {where}")
    return parts
