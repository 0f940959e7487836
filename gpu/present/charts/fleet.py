"""Plotly figures for the Fleet page: the heatmap of boards × headline figures (each cell's deviation from its
model's median, in run-to-run floors) and a board's drift over time. No Streamlit here.

Board rows, hosts, labels and run ids are data: every one is HTML-escaped before Plotly sees it (Plotly renders
tags in labels and hover text). ``_escaped`` does that locally until a shared escaping helper lands.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from gpu.results import fleet as fleet_results

CLIP_FLOORS = 5.0  # the colour scale ends at ±5 floors; a cell beyond it keeps its number in the cell and hover


def _escaped(value) -> str:
    return html.escape(str(value), quote=True)


def heatmap_figure(fleet, title: str, height: int | None = None) -> go.Figure:
    """One row per board (host · model · UUID tail), one column per figure; colour: the deviation from the
    median of the boards of its model in floors (red slower, blue faster, white within noise); empty where the
    board did not measure the figure or is the only board of its model."""
    deviation = fleet_results.matrix(fleet, "deviation")
    value = fleet_results.matrix(fleet, "value")
    median = fleet_results.matrix(fleet, "median")
    ratio = fleet_results.matrix(fleet, "ratio")
    labels = fleet.figures.set_index("figure")
    columns = [f"{_escaped(labels.loc[f, 'label'])}<br>({_escaped(labels.loc[f, 'experiment'])})"
               for f in deviation.columns]
    rows = [_escaped(r) for r in deviation.index]
    full = [_escaped(labels.loc[f, "full_label"]) for f in deviation.columns]
    hover = np.empty(deviation.shape, dtype=object)
    for i, row in enumerate(rows):
        for j, _ in enumerate(deviation.columns):
            v, m, d, r = value.iat[i, j], median.iat[i, j], deviation.iat[i, j], ratio.iat[i, j]
            if np.isnan(v):
                hover[i, j] = f"{row}<br>{full[j]}<br>not measured"
            elif np.isnan(d):
                hover[i, j] = f"{row}<br>{full[j]}<br>{v:.1f} GB/s<br>the only board of its model: not judged"
            else:
                hover[i, j] = (f"{row}<br>{full[j]}<br>{v:.1f} GB/s, {r:.3f}× the median of its model "
                               f"({m:.1f} GB/s)<br>{d:+.1f} run-to-run floors")
    text = np.where(np.isnan(deviation.to_numpy(dtype=float)), "",
                    np.vectorize(lambda d: f"{d:+.1f}")(np.nan_to_num(deviation.to_numpy(dtype=float))))
    fig = go.Figure(go.Heatmap(
        z=np.clip(deviation.to_numpy(dtype=float), -CLIP_FLOORS, CLIP_FLOORS), x=columns, y=rows,
        text=text, texttemplate="%{text}", customdata=hover, hovertemplate="%{customdata}<extra></extra>",
        colorscale="RdBu", zmid=0, zmin=-CLIP_FLOORS, zmax=CLIP_FLOORS, xgap=1, ygap=1,
        colorbar={"title": {"text": "floors from<br>model median"}}))
    fig.update_layout(title={"text": _escaped(title)}, height=height or max(360, 140 + 26 * len(rows)),
                      margin={"l": 10, "r": 10, "t": 60, "b": 10}, plot_bgcolor="#eeeeee")
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(side="top", tickangle=-45, automargin=True)
    return fig


def drift_figure(table, board_row: str) -> go.Figure:
    """A board's figures over time: each run's change from the board's own median of that figure, in percent."""
    fig = go.Figure()
    for _, part in table.groupby("figure", sort=False):
        label = _escaped(part["label"].iloc[0])
        runs = [_escaped(r) for r in part["run_id"]]
        fig.add_trace(go.Scatter(
            x=part["when"], y=part["change"] * 100, mode="lines+markers", name=label,
            customdata=np.column_stack([part["value"], runs, part["floors"]]),
            hovertemplate=(f"{label}<br>%{{x}}<br>%{{customdata[0]:.1f}} GB/s, %{{y:+.2f}} % from the board's median"
                           "<br>%{customdata[2]:+.1f} one-board floors<br>run %{customdata[1]}<extra></extra>")))
    fig.add_hline(y=0, line={"color": "gray", "dash": "dash"})
    fig.update_layout(title={"text": f"Drift of {_escaped(board_row)}: each figure against its own median"},
                      yaxis_title="change from the board's median (%)", xaxis_title="measured (UTC)", height=420,
                      legend={"font": {"size": 11}})
    return fig
