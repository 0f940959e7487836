"""How the host-latency experiment is shown on the Memory modes page: a pointer chase's time per access, by where
its memory lives and how large the chain's working set is. No Streamlit here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gpu.core.units import format_bytes
from gpu.experiments import host_latency
from gpu.present.charts._common import (
    LEGEND_BELOW,
    LOG_VALUE_AXIS,
    log_size_axis,
    mark_not_clean,
    source_title,
    variant_parts,
)


def host_latency_figure(frame: pd.DataFrame) -> go.Figure:
    """Nanoseconds per dependent load (log scale) against the chain's working set: mapped host memory (zero-copy)
    and device memory, one line each, from the pointer-chase rows of one run."""
    fig = go.Figure()
    # Labels above the host line and below the device line: at small working sets the two nearly meet.
    styles = {"mapped": ("#AB63FA", "square", "solid", "top center"),
              "device": ("#636EFA", "circle", "dot", "bottom center")}
    for variant, part in variant_parts(frame, styles, "working_set_bytes"):
        color, marker, dash, place = styles[variant]
        ns = part["median_ms"] * 1e6 / part["elements"]  # elements: the dependent loads of one sample
        fig.add_trace(go.Scatter(
            x=part["working_set_bytes"], y=ns, mode="lines+markers+text", name=host_latency.LABELS[variant],
            line={"color": color, "dash": dash, "width": 3}, marker={"symbol": marker, "size": 10},
            text=[f"{v:,.0f} ns" for v in ns], textposition=place, cliponaxis=False,
            customdata=np.column_stack([part["working_set_bytes"].map(format_bytes), part["elements"],
                                        part["cv"] * 100]),
            hovertemplate="%{customdata[0]} chain · %{y:,.1f} ns per load · %{customdata[1]:,} loads a sample · "
                          "cv %{customdata[2]:.2f} %<extra>%{fullData.name}</extra>"))
        mark_not_clean(fig, part, "working_set_bytes", ns)
    fig.update_layout(title=source_title(
                          "Host-memory latency: one GPU thread chasing pointers (ns per load, log scale)", frame),
                      xaxis={**log_size_axis(frame["working_set_bytes"]), "title": "chain's working set"},
                      yaxis={**LOG_VALUE_AXIS, "title": "ns per dependent load"}, height=460,
                      legend=LEGEND_BELOW)
    return fig
