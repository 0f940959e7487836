"""Plotly figures for the Fleet page: the heatmap of boards × headline figures (each cell's deviation from its
model's median, in run-to-run floors) and a board's drift over time. No Streamlit here.

Board rows, hosts, labels and run ids are data: every one is HTML-escaped before Plotly sees it (Plotly renders
tags in labels and hover text), through the one Plotly helper, ``gpu.core.text.chart_text``.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from gpu.core.text import chart_text
from gpu.present.charts._common import STAGE_FONT_PX, STAGE_TITLE_PX, conditions_hover
from gpu.present.fleet import boards as fleet_results
from gpu.results.analysis import causes

NOT_CLEAN_MARK = "!"  # after a cell's number: the witness named a cause for that board's point (hover: which)

MAX_TEXT_ROWS = 32  # more boards than this: the numbers leave the cells (too small to read), the hover keeps them
SCALE_CAP_FLOORS = 10.0  # the colour scale ends at the largest deviation, at least the outlier line, at most this
STAGE_NAME_PX = STAGE_FONT_PX  # on stage: board names and column labels readable from the back of a room
STAGE_ROW_PX = 30  # a 20 px name and the gap to the next
STAGE_COLUMN_PX = 16  # on stage: up to 23 columns share the width; their labels, wrapped and staggered, at this size
STAGE_COLUMN_CHARS = 11  # a column label's line on stage: staggered, a label has two columns' width
STAGE_COLUMN_LINES = 4  # the most lines a wrapped column label takes: the lower row of labels starts under them
STAGE_LABEL_COLOR = "#31333F"  # the page's text colour: light grey tick labels were hard to read on a projector
STAGE_TOP_PX = 280  # on stage: the title and the column labels under the rows (two staggered rows of up to four lines)


def tick_labels(figures) -> list[str]:
    """A column's label: the figure's short label; '(experiment)' added where the experiment has one figure in the
    suite (a lone 'mapped' or 'stream' says little) or where two experiments' labels coincide."""
    per_experiment = figures["experiment"].value_counts()
    repeated = figures["label"].duplicated(keep=False)
    return [f"{label} ({experiment})" if per_experiment[experiment] == 1 or again else label
            for label, experiment, again in zip(figures["label"], figures["experiment"], repeated, strict=True)]


def wrapped(label: str, width: int = 8) -> str:
    """A label broken into lines of about ``width`` characters at spaces and after underscores (Plotly's <br>), for
    horizontal column labels on stage: rotated ones took 300 px of a 1080 px screen."""
    lines: list[str] = []
    for word in label.replace("_", "_ ").split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += ("" if lines[-1].endswith("_") else " ") + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def staggered(labels: list[str], width: int = STAGE_COLUMN_CHARS, lines: int = STAGE_COLUMN_LINES) -> list[str]:
    """Column labels wrapped (``wrapped``) and staggered: every other one starts ``lines`` lines lower, so each has
    the width of two columns and neighbours never run into each other ("pageablepageable")."""
    blank = "\u00a0<br>" * lines
    return [("" if i % 2 == 0 else blank) + wrapped(label, width) for i, label in enumerate(labels)]


def scale_end(fleet) -> float:
    """Where the colour scale ends, in floors: the largest deviation of the fleet, at least the outlier line (so a
    cell within noise never looks saturated) and at most SCALE_CAP_FLOORS (one far board must not pale the rest)."""
    largest = float(np.nanmax(np.abs(fleet.cells["deviation"].to_numpy(dtype=float)))) \
        if fleet.cells["deviation"].notna().any() else 0.0
    return min(SCALE_CAP_FLOORS, max(fleet_results.OUTLIER_FLOORS, round(largest + 0.05, 1)))


def stage_rows(fleet, height: int) -> list[str]:
    """The board rows a stage heatmap of ``height`` px holds with names of STAGE_NAME_PX: all of them when they fit,
    else the boards furthest from their medians (in board order)."""
    fits = max(1, int((height - STAGE_TOP_PX) // STAGE_ROW_PX))
    rows = list(fleet.boards["row"])
    if len(rows) <= fits:
        return rows
    furthest = fleet.cells.groupby("row")["deviation"].apply(lambda d: d.abs().max()).reindex(rows).fillna(-1.0)
    chosen = set(furthest.sort_values(ascending=False, kind="stable").index[:fits])
    return [r for r in rows if r in chosen]


def heatmap_figure(fleet, title: str, height: int | None = None, rows: list[str] | None = None,
                   stage: bool = False) -> go.Figure:
    """One row per board (host · model · UUID tail), one column per figure; colour: the deviation from the
    median of the boards of its model (or of its group, where the model's boards split) in floors (red slower, blue
    faster, white within noise); empty where the board did not measure the figure or is the only board of its model.
    ``rows``: only these boards. ``stage``: at stage size (``height``), names of STAGE_NAME_PX, column labels
    horizontal, wrapped and staggered, a host that every board shares left out of the names."""
    chosen = rows

    def shown(table):
        return table.loc[chosen] if chosen is not None else table

    deviation = shown(fleet_results.matrix(fleet, "deviation"))
    value = shown(fleet_results.matrix(fleet, "value"))
    median = shown(fleet_results.matrix(fleet, "median"))
    ratio = shown(fleet_results.matrix(fleet, "ratio"))
    labels = fleet.figures.set_index("figure")
    columns = [chart_text(t) for t in tick_labels(fleet.figures.set_index("figure").loc[list(deviation.columns)])]
    rows = [chart_text(r) for r in deviation.index]
    full = [chart_text(labels.loc[f, "full_label"]) for f in deviation.columns]
    floors_pct = [fleet_results.percent(labels.loc[f, "floor"]) for f in deviation.columns]
    group = shown(fleet_results.matrix(fleet, "group"))
    seen = shown(fleet_results.matrix(fleet, "conditions")) if "conditions" in fleet.cells else None
    hover = np.empty(deviation.shape, dtype=object)
    for i, row in enumerate(rows):
        for j, _ in enumerate(deviation.columns):
            v, m, d, r = value.iat[i, j], median.iat[i, j], deviation.iat[i, j], ratio.iat[i, j]
            if np.isnan(v):
                hover[i, j] = f"{row}<br>{full[j]}<br>not measured"
            elif np.isnan(d):
                hover[i, j] = f"{row}<br>{full[j]}<br>{v:.1f} GB/s<br>the only board of its model: not judged"
            else:
                hover[i, j] = (f"{row}<br>{full[j]}<br>{v:.1f} GB/s, {r:.3f}× the median of its "
                               f"{'model' if not group.iat[i, j] else group.iat[i, j] + ' group'} "
                               f"({m:.1f} GB/s)<br>{d:+.1f} run-to-run floors of {floors_pct[j]}")
            if not np.isnan(v):
                hover[i, j] += "<br>" + conditions_hover(seen.iat[i, j] if seen is not None else None)
    floors = deviation.to_numpy(dtype=float)
    measured = ~np.isnan(value.to_numpy(dtype=float))
    # In the cell: the deviation; "·" where the board measured the figure but no other board of its model did.
    text = np.where(np.isnan(floors), np.where(measured, "·", ""),
                    np.vectorize(lambda d: f"{d:+.1f}")(np.nan_to_num(floors)))
    if seen is not None:  # a cell whose point the witness found not clean: marked, its causes in the hover
        flagged = np.vectorize(causes.has_causes, otypes=[bool])(seen.to_numpy(dtype=object))
        text = np.where(flagged & measured, np.char.add(text.astype(str), NOT_CLEAN_MARK), text)
    end = scale_end(fleet)
    fig = go.Figure(go.Heatmap(
        z=np.clip(deviation.to_numpy(dtype=float), -end, end), x=columns, y=rows,
        text=text, texttemplate="%{text}" if len(rows) <= MAX_TEXT_ROWS else "", customdata=hover,
        hovertemplate="%{customdata}<extra></extra>",
        colorscale="RdBu", zmid=0, zmin=-end, zmax=end, xgap=1, ygap=1,
        colorbar={"title": {"text": f"floors from<br>the median<br>(scale ±{end:g})"}}))
    fig.update_layout(title={"text": chart_text(title)}, height=height or max(380, 230 + 22 * len(rows)),
                      margin={"l": 10, "r": 10, "t": 50, "b": 10}, plot_bgcolor="#eeeeee")
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(tickangle=-45, automargin=True)
    if stage:
        hosts = set(fleet.boards.set_index("row").loc[list(deviation.index), "host"])
        prefix = chart_text(f"{next(iter(hosts))} · ") if len(hosts) == 1 else ""
        names = [r[len(prefix):] if prefix and r.startswith(prefix) else r for r in rows]
        fig.update_yaxes(tickmode="array", tickvals=rows, ticktext=names,
                         tickfont={"size": STAGE_NAME_PX, "color": STAGE_LABEL_COLOR})
        fig.update_xaxes(tickangle=0, tickmode="array", tickvals=columns, ticktext=staggered(columns),
                         tickfont={"size": STAGE_COLUMN_PX, "color": STAGE_LABEL_COLOR})
        # the colour bar's labels under their ticks: its top label sat on the bar's title
        fig.update_traces(textfont={"size": STAGE_NAME_PX - 4}, colorbar={"title": {"font": {"size": 16}},
                                                                         "tickfont": {"size": 16},
                                                                         "ticklabelposition": "outside bottom"})
        fig.update_layout(margin={"l": 10, "r": 10, "t": 56, "b": 10}, font={"size": STAGE_FONT_PX},
                          title_font={"size": STAGE_TITLE_PX}, hoverlabel={"font_size": STAGE_FONT_PX})
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
