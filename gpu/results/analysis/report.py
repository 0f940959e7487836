"""Comparison charts and the self-contained HTML review report. No Streamlit here.

The report is one HTML file with Plotly's JavaScript inlined, so it opens offline in any browser: the
headline, the ratio chart, the normalized chart, the provenance diff, the full table and a method note.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly import colors as px_colors

from gpu.core import text
from gpu.core.units import format_bytes
from gpu.experiments import registry
from gpu.results.analysis import compare

VERDICT_COLORS = {"faster": "#00CC96", "slower": "#EF553B", "run-to-run": "#FECB52", "same": "#AAAAAA",
                  "first": "#636EFA"}
# The table's columns, in the page's and the report's order.
POINT_COLUMNS = ["point", "kind", "baseline_ms", "candidate_ms", "change", "verdict", "p_value", "noise", "run_to_run",
                 "run_to_run_low", "run_to_run_high", "run_to_run_source", "baseline_samples", "candidate_samples",
                 "baseline_pct_of_limit", "candidate_pct_of_limit"]


def run_label(frame: pd.DataFrame) -> str:
    first = frame.iloc[0]
    return f"{first['device_name']} · {str(first['timestamp'])[:16].replace('T', ' ')} · run {first['run_id']}"


VERDICT_SYMBOLS = {"slower": "triangle-down", "run-to-run": "diamond-open", "same": "circle-open",
                   "faster": "triangle-up"}
VERDICT_GLYPHS = {"slower": "▼", "run-to-run": "◇", "same": "○", "faster": "▲"}  # the shapes, written
LEGEND_SYMBOL = "square"
SERIES_COLORS = px_colors.qualitative.Dark24


def point_series(table: pd.DataFrame, labels: dict | None = None) -> tuple[pd.Series, pd.Series]:
    """Each point's series and its x label on the ratio chart. Transfers: the series is mode × direction (x is the
    size). Kernels: the series is the variant, x the rest of the point's label less what every point shares (the
    vector size of a one-size run says nothing), or the variant itself when nothing else differs. ``labels``: the
    experiment's words for its variants (``registry.labels_of``)."""
    labels = labels or {}
    if "include_alloc" in table.columns and "bytes" in table.columns:
        # the modes as every other page names them ("pinned write-combined", "mapped zero-copy")
        series = table["variant"].astype(str).map(lambda v: labels.get(v, v)) + " " \
            + table["direction"].astype(str).str.upper() \
            + table["include_alloc"].map(lambda a: " incl. allocation" if bool(a) else "")
        return series, table["bytes"]
    parts = table["point"].str.split(" · ")
    series = parts.str[0]
    rest = parts.str[1:]
    shared = set.intersection(*(set(p) for p in rest)) if len(rest) else set()
    x = rest.map(lambda p: " · ".join(part for part in p if part not in shared))
    return series, x.where(x != "", series)


def ratio_figure(table: pd.DataFrame, title: str, normalized: bool = False, labels: dict | None = None) -> go.Figure:
    """Change per point (candidate vs baseline): one colour per series (mode × direction, or kernel variant), the
    verdict as the marker's shape (▼ slower, ○ same, ▲ faster beyond noise); transfers on a size axis."""
    column = "normalized_change" if normalized else "change"
    fig = go.Figure()
    by_size = "include_alloc" in table.columns and "bytes" in table.columns
    series, x = point_series(table, labels) if not table.empty else (pd.Series(dtype=str), pd.Series(dtype=str))
    # Series names, category ticks and the hovered point label hold run content (variants): escaped for Plotly.
    series = series.map(text.chart_text)
    if not by_size:
        x = x.map(text.chart_text)
    names = list(dict.fromkeys(series))
    for i, name in enumerate(names):
        mine = (series == name).to_numpy()
        part = table[mine]
        colour = SERIES_COLORS[i % len(SERIES_COLORS)]
        # On the size axis each series is nudged sideways (within ±0.3 of an octave), so the series measured at
        # one size stand side by side instead of on top of each other; the hover names the exact size.
        shown_x = x[mine] * 2 ** (0.6 * (i - (len(names) - 1) / 2) / len(names)) if by_size else x[mine]
        # The legend draws a series with the symbol of its first point: a gap point (no x) in a plain square comes
        # first, so the colour's entry carries no verdict shape.
        fig.add_trace(go.Scatter(
            x=[None, *shown_x], y=[None, *(part[column] * 100)], mode="markers", name=name, legendgroup="series",
            legendrank=10 + i,
            # a point whose baseline or candidate was not clean: a thick dark outline (its causes in the hover)
            marker={"color": colour, "size": 11,
                    "line": {"width": [2, *(4 if n else 2 for n in _not_clean(part))],
                             "color": [colour, *(NOT_CLEAN_OUTLINE if n else colour for n in _not_clean(part))]},
                    "symbol": [LEGEND_SYMBOL, *(VERDICT_SYMBOLS.get(v, "circle") for v in part["verdict"])]},
            customdata=np.column_stack([part["point"].map(text.chart_text),
                                        [text.duration_ms(v) for v in part["baseline_ms"]],
                                        [text.duration_ms(v) for v in part["candidate_ms"]],
                                        [text.p_value(v) for v in part["p_value"]],
                                        [text.percent(v, 1) for v in part["noise"]],
                                        [text.chart_text(compare.verdict_text(r))
                                         for r in part.to_dict("records")],
                                        [compare.band_text(lo, hi) for lo, hi in
                                         zip(part["run_to_run_low"], part["run_to_run_high"], strict=True)],
                                        part["run_to_run_source"].fillna("—")]),
            hovertemplate="%{customdata[0]}<br>%{y:+.1f} % · %{customdata[5]}<br>baseline %{customdata[1]} · "
                          "candidate %{customdata[2]}<br>Mann-Whitney p %{customdata[3]} · noise "
                          "%{customdata[4]} · run-to-run band %{customdata[6]} (%{customdata[7]})<extra></extra>"))
        fig.data[-1].customdata = np.vstack([np.full((1, fig.data[-1].customdata.shape[1]), ""),
                                            fig.data[-1].customdata])  # the gap point's row
    fig.add_hline(y=0, line={"color": "black", "width": 1})
    if by_size:
        sizes = sorted(set(table["bytes"].astype(int)))
        axis = {"type": "log", "tickvals": sizes, "ticktext": [format_bytes(v) for v in sizes], "title": "size"}
    else:
        axis = {"type": "category", "categoryorder": "array", "categoryarray": list(dict.fromkeys(x)),
                "tickangle": -35, "automargin": True, "title": "point"}
    # The shapes' key under the title, not in the legend: the legend is the series' colours alone, short enough for
    # the stage (a key of four shapes there pushed three series out of its box).
    key = " · ".join(f"{VERDICT_GLYPHS[v]} {compare.VERDICT_NAMES[v]}" for v in VERDICT_SYMBOLS)
    if any(_not_clean(table)):
        key += " · dark outline: not clean (hover for the cause)"
    fig.update_layout(title={"text": f"{text.chart_text(title)}<br><sup>shape: {key}</sup>"}, xaxis=axis,
                      yaxis_title=("change in % of own device's limit" if normalized else
                                   "candidate speed vs baseline (%)"),
                      height=560, legend={"groupclick": "toggleitem", "tracegroupgap": 12})
    return fig


NOT_CLEAN_OUTLINE = "#222222"


def _not_clean(part: pd.DataFrame) -> list[bool]:
    return list(part["not_clean"].astype(bool)) if "not_clean" in part else [False] * len(part)


def points_table(table: pd.DataFrame) -> pd.DataFrame:
    """Every compared point as people read it: times in µs below 0.1 ms, p as “< 0.001” (never 0), change, noise
    and % of limit in percent (numbers, so the table still sorts by them)."""
    return pd.DataFrame({
        "point": table["point"], "baseline": table["baseline_ms"].map(text.duration_ms),
        "candidate": table["candidate_ms"].map(text.duration_ms), "change": table["change"] * 100,
        "verdict": [compare.verdict_text(r) for r in table.to_dict("records")], "kind": table["kind"],
        "conditions": table["conditions"] if "conditions" in table else "not observed",
        "p (Mann-Whitney)": table["p_value"].map(text.p_value), "noise (cv)": table["noise"] * 100,
        "run-to-run band": [compare.band_text(lo, hi) for lo, hi in
                            zip(table["run_to_run_low"], table["run_to_run_high"], strict=True)],
        "run-to-run from": table["run_to_run_source"],
        "baseline samples": table["baseline_samples"],
        "candidate samples": table["candidate_samples"], "baseline % of limit": table["baseline_pct_of_limit"],
        "candidate % of limit": table["candidate_pct_of_limit"]})


def history_figure(history: pd.DataFrame, title: str) -> go.Figure:
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=history["timestamp"], y=history["median_ms"] * 1e3, mode="lines+markers", name="median",
        error_y={"type": "data", "symmetric": False, "array": (history["max_ms"] - history["median_ms"]) * 1e3,
                 "arrayminus": (history["median_ms"] - history["min_ms"]) * 1e3},
        marker={"color": [VERDICT_COLORS["slower"] if r else VERDICT_COLORS["first"] for r in history["regressed"]],
                "size": 10},
        customdata=np.column_stack([history["run_id"].map(text.chart_text), history["device_name"].map(text.chart_text),
                                    history["verdict"].map(text.chart_text)]),
        hovertemplate="run %{customdata[0]} on %{customdata[1]}<br>%{y:.2f} µs (min–max bars)<br>vs previous run: "
                      "%{customdata[2]}<extra></extra>"))
    fig.update_layout(title={"text": text.chart_text(title)}, yaxis_title="µs (median, min–max)",
                      xaxis_title="measured", height=400)
    return fig


def _floors() -> str:
    return ", ".join(f"{kind} ±{text.percent(math.expm1(floor), 1)}"
                     for kind, floor in compare.RUN_TO_RUN_FLOORS.items())


def _table_html(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, classes="numbers", escape=True, na_rep="—")


def render(baseline: pd.DataFrame, candidates: list[pd.DataFrame], earlier=None) -> str:
    """The review report: one self-contained HTML page. ``earlier(candidate)`` gives the runs that make a
    candidate's history (``compare.earlier_runs``); without it every point is judged by its kind's floor."""
    experiment = baseline["experiment"].iloc[0]
    labels = registry.labels_of(experiment)  # the experiment's words for its variants
    sections = []
    include = "inline"
    for candidate in candidates:
        table = compare.compare(baseline, candidate, earlier(candidate) if earlier else ())
        line = compare.headline(table, len(baseline) - len(table), len(candidate) - len(table))
        if table.empty:  # nothing to chart: say why, with the provenance that may explain it
            sections.append(f"""
<section>
<h2>{text.html_text(run_label(candidate))}</h2>
<p class="headline">{text.html_text(compare.disjoint_reason(baseline, candidate) or line)}</p>
<p class="versions">{text.html_text(compare.method_words(baseline, candidate))}</p>
<h3>Provenance: what differs</h3>
{_table_html(compare.provenance_diff(baseline, candidate))}
</section>""")
            continue
        counts = " · ".join(f"{name}: {count}" for name, count in compare.verdict_counts(table).items())
        figures = [ratio_figure(table, f"{run_label(candidate)} vs {run_label(baseline)}", labels=labels)]
        normalized_line = ""
        if not table.empty and table["normalized_change"].notna().any():
            normalized = compare.compare_normalized(baseline, candidate)  # its verdicts, not the raw ones
            normalized_line = "Normalized to each device's limit: " + compare.headline(
                normalized, len(baseline) - len(normalized), len(candidate) - len(normalized))
            figures.append(ratio_figure(normalized, "Normalized: each point as % of its own device's theoretical "
                                        "limit", normalized=True, labels=labels))
        charts = []
        for fig in figures:
            charts.append(pio.to_html(fig, include_plotlyjs=include, full_html=False))
            include = False  # Plotly's JavaScript once per file
        shown = points_table(table).assign(**{
            column: lambda t, c=column, d=digits: t[c].map(lambda v: text.percent(v / 100, d, signed=c == "change"))
            for column, digits in (("change", 1), ("noise (cv)", 1), ("baseline % of limit", 1),
                                   ("candidate % of limit", 1))}) if not table.empty else table
        sections.append(f"""
<section>
<h2>{text.html_text(run_label(candidate))}</h2>
<p class="headline">{text.html_text(line)}</p>
<p class="counts">{text.html_text(counts)}</p>
<p class="method">{text.html_text(compare.band_summary(table))}</p>
<p class="versions">{text.html_text(compare.method_words(baseline, candidate))}</p>
<p>{text.html_text(normalized_line)}</p>
{''.join(charts)}
<h3>Provenance: what differs</h3>
{_table_html(compare.provenance_diff(baseline, candidate))}
<h3>Every point</h3>
{_table_html(shown)}
</section>""")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>PinPoint review: {text.html_text(experiment)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }}
.headline {{ font-size: 1.25em; font-weight: 600; }}
table.numbers {{ border-collapse: collapse; font-size: 0.85em; }}
table.numbers td, table.numbers th {{ padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: right; }}
.method {{ color: #555; font-size: 0.9em; }}
</style></head><body>
<h1>PinPoint review: {text.html_text(experiment)}</h1>
<p>Baseline: <b>{text.html_text(run_label(baseline))}</b> ({len(baseline)} points, profile
{text.html_text(str(baseline['profile'].iloc[0]))}, commit {text.html_text(str(baseline['git_commit'].iloc[0]))})</p>
{''.join(sections)}
<h2>Method</h2>
<p class="method">Every figure was measured by PinPoint (CUDA events, warm-up, samples until the noise is small; every
sample kept, every output verified). A point is the <b>same within noise</b> unless a two-sided Mann-Whitney U test on
the two runs' kept samples gives p &lt; {compare.ALPHA} and the medians differ by at least
{text.percent(compare.MIN_EFFECT)}.
A point that differs is <b>within run-to-run noise</b> when the candidate's median stays inside the band that
unchanged software reaches between runs: with {compare.MIN_HISTORY} or more earlier runs of the point on the
candidate's board (when both runs name the same <code>gpu_uuid</code>; for runs across several GPUs, the same
boards), else on its device model, the
{text.percent(compare.HISTORY_LEVEL)} prediction interval of their medians (Conbench's approach; the table's
"run-to-run from" says which history); otherwise the
baseline's median ± a floor per kind of point, the 95th percentile of the change measured between repeated runs and
runs days apart ({text.html_text(_floors())}). Beyond that band it is <b>faster</b> or <b>slower</b>. Points with
fewer than {compare.MIN_SAMPLES} samples on a side are flagged: the test has little power there (with a band, every
sample of one run beyond every sample of the other counts). Noise = 1.4826 × MAD ÷ median of the samples. Change =
baseline median ÷ candidate median − 1. Normalized: each point as a share of its own device's theoretical limit
(PCIe per direction for host↔device copies, HBM for kernels), so unlike devices compare fairly.</p>
</body></html>"""
