"""Compare: a baseline against candidates of the same experiment, verdicts that respect noise, the provenance
diff, a normalized view for unlike devices, a history, and a self-contained HTML report."""

from __future__ import annotations

import math

import streamlit as st

from gpu import compare, report
from pages import _shared as shared

shared.require_router()

st.title("Compare runs")
catalog, reason = shared.run_catalog()
if catalog is None:
    shared.show_reasons([reason], "The runs store cannot be opened")
    st.stop()
runs = catalog.runs()
counts = runs.groupby("experiment").size()
experiments = sorted(counts[counts >= 2].index)
if not experiments:
    st.info("Comparing needs two runs of one experiment: measure, run the runner, or import runs on the Runs page.")
    st.stop()
if shared.desk():
    st.markdown(
        "Pick a **baseline** and one or more **candidates** of the same experiment. A point is **faster** or "
        f"**slower** only when a Mann-Whitney U test on the kept samples gives p < {compare.ALPHA} *and* the medians "
        "differ by more than either run's own spread (coefficient of variation); otherwise it is the **same**. The "
        "provenance diff beside it shows what else changed.")

shared.url_page()
settings = shared.more_settings()  # on stage the choice of runs folds away: the headline and chart stay
shared.from_url("compare_experiment", "str", experiments)
experiment = settings.selectbox("Experiment", experiments, key="compare_experiment",
                          index=experiments.index("transfers") if "transfers" in experiments else 0)
mine = runs[runs["experiment"] == experiment].reset_index(drop=True)
labels = {r.run_id: f"{r.device_name} · {str(r.timestamp)[:16].replace('T', ' ')} · {r.points} points · "
          f"{r.label if isinstance(r.label, str) and r.label else r.origin} · {r.run_id}" for r in mine.itertuples()}
ids = list(labels)
# Default: the oldest run as baseline, every other device's newest run as candidate.
default_base = ids[-1]
shared.from_url("compare_baseline", "str", ids)
baseline_id = settings.selectbox("Baseline", ids, index=ids.index(default_base), format_func=labels.get,
                           key="compare_baseline")
others = [i for i in ids if i != baseline_id]
default_candidates = [others[0]] if others else []
shared.from_url("compare_candidates", "strs", others)
candidate_ids = settings.multiselect("Candidates", others, default=default_candidates, format_func=labels.get,
                               key="compare_candidates")
shared.from_url("compare_normalized", "bool")
normalized = settings.toggle("Normalize to each device's theoretical limit (for unlike devices)",
                             key="compare_normalized",
                             help="Each point as % of its own device's limit: PCIe per direction for host↔device "
                                  "copies, HBM for kernels.")
shared.sync_url()
if not candidate_ids:
    st.info("Choose at least one candidate.")
    st.stop()

try:
    baseline = catalog.load(baseline_id)
    candidates = [catalog.load(c) for c in candidate_ids]
except Exception as exc:
    shared.show_reasons([str(exc)], "A run could not be loaded")
    st.stop()

for candidate_id, candidate in zip(candidate_ids, candidates, strict=True):
    table = compare.compare(baseline, candidate)
    st.subheader(f"{report.run_label(candidate)}  vs  baseline {report.run_label(baseline)}")
    line = compare.headline(table, len(baseline) - len(table), len(candidate) - len(table))
    if shared.desk() or table.empty:
        st.markdown(f"**{line}**")
    if table.empty:
        continue
    verdicts = table["verdict"].value_counts()
    if shared.desk():
        m = st.columns(4)
        m[0].metric("Points compared", len(table))
        m[1].metric("Slower beyond noise", int(verdicts.get("slower", 0)))
        m[2].metric("Faster beyond noise", int(verdicts.get("faster", 0)))
        m[3].metric("Same within noise", int(verdicts.get("same", 0)))
    shared.chart(report.ratio_figure(table, "Normalized: each point as % of its own device's limit" if normalized
                                        else "Candidate speed vs baseline, per point", normalized=normalized),
                    key=f"chart_ratio_{candidate_id}")
    shared.takeaway(line, key=f"stage_takeaway_{candidate_id}")  # on stage the headline sits under the chart
    if not shared.desk():
        continue
    diff = compare.provenance_diff(baseline, candidate)
    left, right = st.columns([2, 3])
    with left:
        st.markdown("**Provenance: what differs**")
        st.dataframe(diff, hide_index=True, key=f"diff_{candidate_id}")
    with right:
        st.markdown("**Every point**")
        shown = table[["point", "baseline_ms", "candidate_ms", "change", "verdict", "p_value", "noise",
                       "baseline_samples", "candidate_samples", "baseline_pct_of_limit", "candidate_pct_of_limit"]]
        st.dataframe(shown, hide_index=True, key=f"points_{candidate_id}",
                     column_config={"change": st.column_config.NumberColumn("change", format="percent"),
                                    "noise": st.column_config.NumberColumn("noise (cv)", format="percent"),
                                    "p_value": st.column_config.NumberColumn("p (Mann-Whitney)", format="%.3g"),
                                    "baseline_pct_of_limit": st.column_config.NumberColumn("baseline % of limit",
                                                                                           format="%.1f"),
                                    "candidate_pct_of_limit": st.column_config.NumberColumn("candidate % of limit",
                                                                                            format="%.1f")})

if not shared.desk():
    st.stop()  # on stage: each comparison's chart and headline
st.download_button("Download the review report (one HTML file, opens offline)",
                   data=report.render(baseline, candidates).encode(), mime="text/html", key="compare_report",
                   file_name=f"pinpoint-review-{experiment}-{baseline_id}.html")

st.subheader("History: one device and point over time")
devices = sorted(mine["device_name"].dropna().unique())
device = st.selectbox("Device", devices, key="compare_history_device")
history_ids = list(mine[mine["device_name"] == device]["run_id"])
frames = [catalog.load(r) for r in history_ids]
point_rows = {compare.point_label(experiment, row): row for row in frames[0].to_dict("records")}
point = st.selectbox("Point", list(point_rows), key="compare_history_point")
history = compare.history(frames, point_rows[point])
if len(history) < 2:
    st.caption(f"{len(history)} run(s) of {device} measured this point: a history needs two.")
else:
    shared.chart(report.history_figure(history, f"{point} on {device}"), key="chart_history")
    regressed = history[history["regressed"]]
    st.markdown(f"{len(history)} runs; " + (f"**{len(regressed)} regressed beyond noise** against the run before: "
                + ", ".join(f"{r.run_id} ({compare.percent(r.change)})" for r in regressed.itertuples())
                if not regressed.empty else "none regressed beyond noise against the run before."))
    st.dataframe(history.assign(change=history["change"].map(
        lambda c: "—" if not isinstance(c, float) or math.isnan(c) else compare.percent(c))), hide_index=True)
