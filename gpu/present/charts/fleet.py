"""Plotly figures for the Fleet page: the heatmap of boards × headline figures (each cell's deviation from its
model's median, in run-to-run floors) and a board's drift over time. No Streamlit here.

Board rows, hosts, labels and run ids are data: every one is HTML-escaped before Plotly sees it (Plotly renders
tags in labels and hover text), through the one Plotly helper, ``gpu.core.text.chart_text``.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from gpu.core.text import chart_text
from gpu.results import fleet as fleet_results

MAX_TEXT_ROWS = 32  # more boards than this: the numbers leave the cells (too small to read), the hover keeps them
CLIP_FLOORS = 5.0  # the colour scale ends at ±5 floors; a cell beyond it keeps its number in the cell and hover
STAGE_LABELS_PX = 330  # on stage: the title, the column labels (at 45°) and the margins; the rest is the rows


def tick_labels(figures) -> list[str]:
    """A column's label: the figure's short label; '(experiment)' added where the experiment has one figure in the
    suite (a lone 'mapped' or 'stream' says little) or where two experiments' labels coincide."""
    per_experiment = figures["experiment"].value_counts()
    repeated = figures["label"].duplicated(keep=False)
    return [f"{label} ({experiment})" if per_experiment[experiment] == 1 or again else label
            for label, experiment, again in zip(figures["label"], figures["experiment"], repeated, strict=True)]


def fit_rows(fig: go.Figure, rows: int, height: int, largest_px: int, named: list[str] = ()) -> go.Figure:
    """On a fixed height (the stage): board names and cell numbers no taller than a row (at least 9 px), the
    numbers left out when a row is too thin to hold them; rows thinner than a 9 px name are named only where
    ``named`` (the outliers' rows) says."""
    row_px = (height - STAGE_LABELS_PX) / max(rows, 1)
    size = max(9, min(largest_px, int(row_px * 0.75)))
    fig.update_yaxes(tickfont={"size": size})
    if row_px < 10:
        shown = [chart_text(r) for r in named]
        fig.update_yaxes(tickmode="array", tickvals=shown, ticktext=shown, tickfont={"size": min(largest_px, 16)})
    fig.update_traces(textfont={"size": size}, texttemplate="%{text}" if row_px >= 16 else "")
    return fig


def heatmap_figure(fleet, title: str, height: int | None = None) -> go.Figure:
    """One row per board (host · model · UUID tail), one column per figure; colour: the deviation from the
    median of the boards of its model in floors (red slower, blue faster, white within noise); empty where the
    board did not measure the figure or is the only board of its model."""
    deviation = fleet_results.matrix(fleet, "deviation")
    value = fleet_results.matrix(fleet, "value")
    median = fleet_results.matrix(fleet, "median")
    ratio = fleet_results.matrix(fleet, "ratio")
    labels = fleet.figures.set_index("figure")
    columns = [chart_text(t) for t in tick_labels(fleet.figures.set_index("figure").loc[list(deviation.columns)])]
    rows = [chart_text(r) for r in deviation.index]
    full = [chart_text(labels.loc[f, "full_label"]) for f in deviation.columns]
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
    floors = deviation.to_numpy(dtype=float)
    measured = ~np.isnan(value.to_numpy(dtype=float))
    # In the cell: the deviation; "·" where the board measured the figure but no other board of its model did.
    text = np.where(np.isnan(floors), np.where(measured, "·", ""),
                    np.vectorize(lambda d: f"{d:+.1f}")(np.nan_to_num(floors)))
    fig = go.Figure(go.Heatmap(
        z=np.clip(deviation.to_numpy(dtype=float), -CLIP_FLOORS, CLIP_FLOORS), x=columns, y=rows,
        text=text, texttemplate="%{text}" if len(rows) <= MAX_TEXT_ROWS else "", customdata=hover,
        hovertemplate="%{customdata}<extra></extra>",
        colorscale="RdBu", zmid=0, zmin=-CLIP_FLOORS, zmax=CLIP_FLOORS, xgap=1, ygap=1,
        colorbar={"title": {"text": "floors from<br>model median"}}))
    fig.update_layout(title={"text": chart_text(title)}, height=height or max(380, 230 + 22 * len(rows)),
                      margin={"l": 10, "r": 10, "t": 50, "b": 10}, plot_bgcolor="#eeeeee")
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(tickangle=-45, automargin=True)
    return fig


def drift_figure(table, board_row: str) -> go.Figure:
    """A board's figures over time: each run's change from the board's own median of that figure, in percent."""
    fig = go.Figure()
    names = dict(zip(table.drop_duplicates("figure")["figure"],
                     tick_labels(table.drop_duplicates("figure")), strict=True))
    for figure, part in table.groupby("figure", sort=False):
        label = chart_text(names[figure])
        runs = [chart_text(r) for r in part["run_id"]]
        fig.add_trace(go.Scatter(
            x=part["when"], y=part["change"] * 100, mode="lines+markers", name=label,
            customdata=np.column_stack([part["value"], runs, part["floors"]]),
            hovertemplate=(f"{label}<br>%{{x}}<br>%{{customdata[0]:.1f}} GB/s, %{{y:+.2f}} % from the board's median"
                           "<br>%{customdata[2]:+.1f} one-board floors<br>run %{customdata[1]}<extra></extra>")))
    fig.add_hline(y=0, line={"color": "gray", "dash": "dash"})
    fig.update_layout(title={"text": f"Drift of {chart_text(board_row)}: each figure against its own median"},
                      yaxis_title="change from the board's median (%)", xaxis_title="measured (UTC)", height=420,
                      legend={"font": {"size": 11}})
    return fig
