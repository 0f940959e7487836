"""Comparison charts and the self-contained HTML review report. No Streamlit here.

The report is one HTML file with Plotly's JavaScript inlined, so it opens offline in any browser: the
headline, the ratio chart, the normalized chart, the provenance diff, the full table and a method note.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from gpu import compare
from gpu.units import format_bytes

VERDICT_COLORS = {"faster": "#00CC96", "slower": "#EF553B", "run-to-run": "#FECB52", "same": "#AAAAAA",
                  "first": "#636EFA"}
# The table's columns, in the page's and the report's order.
POINT_COLUMNS = ["point", "kind", "baseline_ms", "candidate_ms", "change", "verdict", "p_value", "noise", "run_to_run",
                 "run_to_run_source", "baseline_samples", "candidate_samples", "baseline_pct_of_limit",
                 "candidate_pct_of_limit"]


def run_label(frame: pd.DataFrame) -> str:
    first = frame.iloc[0]
    return f"{first['device_name']} · {str(first['timestamp'])[:16].replace('T', ' ')} · run {first['run_id']}"


def ratio_figure(table: pd.DataFrame, title: str, normalized: bool = False) -> go.Figure:
    """Change per point (candidate vs baseline), coloured by verdict; transfers on a size axis."""
    column = "normalized_change" if normalized else "change"
    fig = go.Figure()
    by_size = "include_alloc" in table.columns and "bytes" in table.columns
    for verdict in (compare.SLOWER, compare.RUN_TO_RUN, compare.SAME, compare.FASTER):
        part = table[table["verdict"] == verdict]
        if part.empty:
            continue
        x = part["bytes"] if by_size else part["point"]
        fig.add_trace(go.Scatter(
            x=x, y=part[column] * 100, mode="markers", name=compare.VERDICT_NAMES[verdict],
            marker={"color": VERDICT_COLORS[verdict], "size": 8},
            customdata=np.column_stack([part["point"], part["baseline_ms"] * 1e3, part["candidate_ms"] * 1e3,
                                        part["p_value"], part["noise"] * 100, part["run_to_run"] * 100,
                                        part["run_to_run_source"]]),
            hovertemplate="%{customdata[0]}<br>%{y:+.1f} %<br>baseline %{customdata[1]:.2f} µs · candidate "
                          "%{customdata[2]:.2f} µs<br>Mann-Whitney p = %{customdata[3]:.3g} · noise "
                          "%{customdata[4]:.1f} % · run-to-run ±%{customdata[5]:.1f} % (%{customdata[6]})"
                          "<extra>%{fullData.name}</extra>"))
    fig.add_hline(y=0, line={"color": "black", "width": 1})
    axis = {"type": "log", "tickvals": sorted(set(table["bytes"].astype(int))),
            "ticktext": [format_bytes(v) for v in sorted(set(table["bytes"].astype(int)))]} if by_size else \
        {"showticklabels": len(table) <= 40}
    fig.update_layout(title={"text": title}, xaxis={**axis, "title": "size" if by_size else "point"},
                      yaxis_title=("change in % of own device's limit" if normalized else
                                   "candidate speed vs baseline (%)"),
                      height=460, legend={"orientation": "h", "y": -0.2})
    return fig


def history_figure(history: pd.DataFrame, title: str) -> go.Figure:
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=history["timestamp"], y=history["median_ms"] * 1e3, mode="lines+markers", name="median",
        error_y={"type": "data", "symmetric": False, "array": (history["max_ms"] - history["median_ms"]) * 1e3,
                 "arrayminus": (history["median_ms"] - history["min_ms"]) * 1e3},
        marker={"color": [VERDICT_COLORS["slower"] if r else VERDICT_COLORS["first"] for r in history["regressed"]],
                "size": 10},
        customdata=np.column_stack([history["run_id"], history["device_name"], history["verdict"]]),
        hovertemplate="run %{customdata[0]} on %{customdata[1]}<br>%{y:.2f} µs (min–max bars)<br>vs previous run: "
                      "%{customdata[2]}<extra></extra>"))
    fig.update_layout(title={"text": title}, yaxis_title="µs (median, min–max)", xaxis_title="measured", height=400)
    return fig


def _floors() -> str:
    return ", ".join(f"{kind} ±{math.expm1(floor):.1%}" for kind, floor in compare.RUN_TO_RUN_FLOORS.items())


def _table_html(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, classes="numbers", escape=True, na_rep="—")


def render(baseline: pd.DataFrame, candidates: list[pd.DataFrame], earlier=None) -> str:
    """The review report: one self-contained HTML page. ``earlier(candidate)`` gives the runs that make a
    candidate's history (``compare.earlier_runs``); without it every point is judged by its kind's floor."""
    experiment = baseline["experiment"].iloc[0]
    sections = []
    include = "inline"
    for candidate in candidates:
        table = compare.compare(baseline, candidate, earlier(candidate) if earlier else ())
        line = compare.headline(table, len(baseline) - len(table), len(candidate) - len(table))
        if table.empty:  # nothing to chart: say why, with the provenance that may explain it
            sections.append(f"""
<section>
<h2>{html.escape(run_label(candidate))}</h2>
<p class="headline">{html.escape(compare.disjoint_reason(baseline, candidate) or line)}</p>
<h3>Provenance: what differs</h3>
{_table_html(compare.provenance_diff(baseline, candidate))}
</section>""")
            continue
        counts = " · ".join(f"{name}: {count}" for name, count in compare.verdict_counts(table).items())
        figures = [ratio_figure(table, f"{run_label(candidate)} vs {run_label(baseline)}")]
        if not table.empty and table["normalized_change"].notna().any():
            figures.append(ratio_figure(table, "Normalized: each point as % of its own device's theoretical limit",
                                        normalized=True))
        charts = []
        for fig in figures:
            charts.append(pio.to_html(fig, include_plotlyjs=include, full_html=False))
            include = False  # Plotly's JavaScript once per file
        shown = table[POINT_COLUMNS] \
            .assign(change=lambda t: t["change"].map(compare.percent),
                    verdict=lambda t: t["verdict"].map(compare.VERDICT_NAMES),
                    run_to_run=lambda t: t["run_to_run"].map(lambda v: f"±{v:.1%}"),
                    baseline_ms=lambda t: t["baseline_ms"].map(lambda v: f"{v:.4f}"),
                    candidate_ms=lambda t: t["candidate_ms"].map(lambda v: f"{v:.4f}"),
                    p_value=lambda t: t["p_value"].map(lambda v: "—" if not math.isfinite(v) else f"{v:.3g}"),
                    noise=lambda t: t["noise"].map(lambda v: f"{v:.1%}"),
                    baseline_pct_of_limit=lambda t: t["baseline_pct_of_limit"].map(lambda v: f"{v:.1f} %"),
                    candidate_pct_of_limit=lambda t: t["candidate_pct_of_limit"].map(lambda v: f"{v:.1f} %")) \
            if not table.empty else table
        sections.append(f"""
<section>
<h2>{html.escape(run_label(candidate))}</h2>
<p class="headline">{html.escape(line)}</p>
<p class="counts">{html.escape(counts)}</p>
<p class="method">{html.escape(compare.band_summary(table))}</p>
{''.join(charts)}
<h3>Provenance: what differs</h3>
{_table_html(compare.provenance_diff(baseline, candidate))}
<h3>Every point</h3>
{_table_html(shown)}
</section>""")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>PinPoint review: {html.escape(experiment)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }}
.headline {{ font-size: 1.25em; font-weight: 600; }}
table.numbers {{ border-collapse: collapse; font-size: 0.85em; }}
table.numbers td, table.numbers th {{ padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: right; }}
.method {{ color: #555; font-size: 0.9em; }}
</style></head><body>
<h1>PinPoint review: {html.escape(experiment)}</h1>
<p>Baseline: <b>{html.escape(run_label(baseline))}</b> ({len(baseline)} points, profile
{html.escape(str(baseline['profile'].iloc[0]))}, commit {html.escape(str(baseline['git_commit'].iloc[0]))})</p>
{''.join(sections)}
<h2>Method</h2>
<p class="method">Every figure was measured by PinPoint (CUDA events, warm-up, samples until the noise is small; every
sample kept, every output verified). A point is the <b>same within noise</b> unless a two-sided Mann-Whitney U test on
the two runs' kept samples gives p &lt; {compare.ALPHA} and the medians differ by at least {compare.MIN_EFFECT:.0%}.
A point that differs is <b>within run-to-run noise</b> when the candidate's median stays inside the band that
unchanged software reaches between runs: with {compare.MIN_HISTORY} or more earlier runs of the point on the same
device model, the {compare.HISTORY_LEVEL:.0%} prediction interval of their medians (Conbench's approach); otherwise the
baseline's median ± a floor per kind of point, the 95th percentile of the change measured between repeated runs and
runs days apart ({html.escape(_floors())}). Beyond that band it is <b>faster</b> or <b>slower</b>. Points with
fewer than {compare.MIN_SAMPLES} samples on a side are flagged: the test has little power there (with a band, every
sample of one run beyond every sample of the other counts). Noise = 1.4826 × MAD ÷ median of the samples. Change =
baseline median ÷ candidate median − 1. Normalized: each point as a share of its own device's theoretical limit
(PCIe per direction for host↔device copies, HBM for kernels), so unlike devices compare fairly.</p>
</body></html>"""
