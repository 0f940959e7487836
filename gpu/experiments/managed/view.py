"""How the managed-memory experiment is shown on the Memory modes page: first touch against resident and
prefetched, per size, with its stage takeaway and desk headline. No Streamlit here; tables derive only from measured
rows of one run (``gpu.core.schema``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gpu.core.units import format_bytes
from gpu.experiments import managed
from gpu.present.charts._common import (
    LEGEND_BELOW,
    LOG_VALUE_AXIS,
    per_variant,
    source_title,
    theoretical_lines,
    variant_parts,
)

COLORS = {"device": "#888888", "first_touch": "#EF553B", "prefetch": "#FFA15A", "after_prefetch": "#00CC96",
          "resident": "#636EFA"}


def managed_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per size: GB/s of each case, and the migration cost (first touch and prefetch+kernel over resident)."""
    rows = []
    for size, part in frame.groupby("bytes"):
        ms, gbps = per_variant(part, "median_ms"), per_variant(part, "gbps")
        resident = ms.get("resident", math.nan)
        rows.append({
            "bytes": int(size), **{f"{v} GB/s": gbps.get(v, math.nan) for v in managed.VARIANTS},
            "first touch extra ms": ms.get("first_touch", math.nan) - resident,
            "prefetch + kernel ms": ms.get("prefetch", math.nan) + ms.get("after_prefetch", math.nan),
            "first touch ÷ resident": ms.get("first_touch", math.nan) / resident if resident else math.nan,
        })
    return pd.DataFrame(rows)


def managed_figure(frame: pd.DataFrame) -> go.Figure:
    """GB/s of the checksum kernel in each managed-memory case (log scale), per size."""
    fig = go.Figure()
    for variant, part in variant_parts(frame, managed.VARIANTS, "bytes"):
        fig.add_trace(go.Bar(
            x=part["bytes"].map(format_bytes), y=part["gbps"], name=managed.LABELS[variant],
            marker={"color": COLORS[variant]}, text=[f"{g:,.1f}" for g in part["gbps"]], cliponaxis=False,
            textposition="auto",  # inside a tall bar (clear of the reference lines), above a short one
            customdata=np.column_stack([part["median_ms"], part["cv"] * 100, part["samples"]]),
            hovertemplate="%{y:,.1f} GB/s · median %{customdata[0]:.3f} ms · cv %{customdata[1]:.2f} % · "
                          "%{customdata[2]} samples<extra>%{fullData.name}</extra>"))
    theoretical_lines(fig, frame, {"hbm_gbps_theoretical": "HBM theoretical",
                                   "pcie_gbps_theoretical": "PCIe theoretical"}, log=True)
    fig.update_layout(title=source_title("Managed memory: a kernel reading the buffer (GB/s, log scale)", frame),
                      barmode="group", yaxis={**LOG_VALUE_AXIS, "title": "GB/s (10⁹ B/s)"}, xaxis_title="buffer size",
                      height=460, legend=LEGEND_BELOW)
    return fig


def takeaway(frame: pd.DataFrame) -> str | None:
    """First touch against resident, at the largest size measured."""
    if frame.empty:
        return None
    ms = frame[frame["bytes"] == frame["bytes"].max()].set_index("variant")["gbps"]
    if not {"first_touch", "resident"} <= set(ms.index):
        return None
    return (f"Managed memory on first touch moves {ms['first_touch']:,.1f} GB/s at "
            f"{format_bytes(frame['bytes'].max())}; once resident the same kernel "
            f"reads {ms['resident']:,.0f} GB/s ({ms['resident'] / ms['first_touch']:,.0f}× faster).")


def headline(row) -> str:
    """First touch against resident and prefetched, from a row of ``managed_table``."""
    return (f"**{format_bytes(row['bytes'])}: first touch {row['first_touch GB/s']:,.1f} GB/s, resident "
            f"{row['resident GB/s']:,.0f} GB/s** — migrating on fault costs {row['first touch extra ms']:,.1f} ms "
            f"more ({row['first touch ÷ resident']:,.0f}× the resident time); prefetching first moves the pages "
            f"at {row['prefetch GB/s']:,.1f} GB/s, then the kernel runs at {row['after_prefetch GB/s']:,.0f} GB/s "
            f"({row['prefetch + kernel ms']:,.1f} ms in all).")
