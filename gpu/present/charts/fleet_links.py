"""The Fleet page's link matrix: one node's ordered pairs of GPUs (source rows × destination columns), each cell
its GB/s and coloured by its ratio to the median of its link type across the fleet (red slower, blue faster).
No Streamlit here; hosts and link names are data, escaped through ``chart_text``."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from gpu.core.text import chart_text
from gpu.present.charts._common import conditions_hover
from gpu.present.fleet import links as fleet_links
from gpu.results.analysis import causes

CLIP = 0.5  # the colour scale spans 0.5× … 1.5× the median; a cell beyond keeps its number


def link_matrix_figure(judged, host: str, title: str, height: int | None = None) -> go.Figure:
    """``host``'s pairs of one figure (``fleet_links.judge``): the cell's text is its GB/s, its colour the ratio to
    the median of its link type, its hover the link, the median and the deviation in run-to-run floors."""
    value = fleet_links.node_matrix(judged, host, "value")
    ratio = fleet_links.node_matrix(judged, host, "ratio")
    median = fleet_links.node_matrix(judged, host, "median")
    link = fleet_links.node_matrix(judged, host, "link")
    deviation = fleet_links.node_matrix(judged, host, "deviation")
    seen = fleet_links.node_matrix(judged, host, "conditions") if "conditions" in judged else None
    labels = [f"GPU {i}" for i in value.index]
    host_text = chart_text(host)
    hover = np.full(value.shape, "", dtype=object)
    text = np.full(value.shape, "", dtype=object)
    for i in range(value.shape[0]):
        for j in range(value.shape[1]):
            v = value.iat[i, j]
            if np.isnan(v):
                continue
            d = deviation.iat[i, j]
            judged_text = (f"{d:+.1f} run-to-run floors" if not np.isnan(d)
                           else f"fewer than {fleet_links.MIN_LINKS} links of its type: not judged")
            condition = seen.iat[i, j] if seen is not None else None
            # "!" after the number: the witness named a cause for this pair (the hover says which)
            text[i, j] = (f"{v:.0f}" if v >= 10 else f"{v:.3g}") + ("!" if causes.has_causes(condition) else "")
            pair = f"{host_text}: {labels[i]} → {labels[j]} ({chart_text(link.iat[i, j])})"
            hover[i, j] = (f"{pair}<br>{v:.1f} GB/s, {ratio.iat[i, j]:.2f}× the median of its link type "
                           f"({median.iat[i, j]:.1f} GB/s)<br>{judged_text}<br>{conditions_hover(condition)}")
    fig = go.Figure(go.Heatmap(
        z=np.clip(ratio.to_numpy(dtype=float), 1 - CLIP, 1 + CLIP), x=labels, y=labels, text=text,
        texttemplate="%{text}", customdata=hover, hovertemplate="%{customdata}<extra></extra>",
        colorscale="RdBu", zmid=1, zmin=1 - CLIP, zmax=1 + CLIP, xgap=1, ygap=1,
        colorbar={"title": {"text": "× median of<br>its link type"}}))
    fig.update_layout(title={"text": chart_text(title)}, height=height or max(320, 180 + 40 * len(labels)),
                      margin={"l": 10, "r": 10, "t": 50, "b": 10}, plot_bgcolor="#eeeeee")
    fig.update_yaxes(autorange="reversed", title="source", automargin=True)
    fig.update_xaxes(title="destination", side="top", automargin=True)
    return fig
