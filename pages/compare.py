"""Compare: a baseline against candidates of the same experiment, verdicts that respect noise, the provenance
diff, a normalized view for unlike devices, a history, and a self-contained HTML report."""

from __future__ import annotations

import math

import streamlit as st

from gpu import compare, report, text
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
st.markdown(
    "Pick a **baseline** and one or more **candidates** of the same experiment. A point is **faster** or **slower** "
    f"only when a Mann-Whitney U test on the kept samples gives p < {compare.ALPHA} *and* the medians differ by more "
    "than either run's own spread (coefficient of variation); otherwise it is the **same**. The provenance diff "
    "beside it shows what else changed.")

shared.url_page()
shared.from_url("compare_experiment", "str", experiments)


def forget_runs() -> None:
    """Another experiment's runs: its own defaults, not the old one's ids (which it cannot take)."""
    for key in ("compare_baseline", "compare_candidates", "compare_history_point"):
        st.session_state.pop(key, None)


experiment = st.selectbox("Experiment", experiments, key="compare_experiment", on_change=forget_runs,
                          index=experiments.index("transfers") if "transfers" in experiments else 0)
mine = runs[runs["experiment"] == experiment].reset_index(drop=True)
labels = {r.run_id: f"{r.device_name} · {str(r.timestamp)[:16].replace('T', ' ')} · {r.points} points · "
          f"{r.label if isinstance(r.label, str) and r.label else r.origin} · {r.run_id}" for r in mine.itertuples()}
ids = list(labels)
# Default: the oldest run as baseline, every other device's newest run as candidate.
default_base = ids[-1]
shared.from_url("compare_baseline", "str", ids)
baseline_id = st.selectbox("Baseline", ids, index=ids.index(default_base), format_func=labels.get,
                           key="compare_baseline")
others = [i for i in ids if i != baseline_id]
default_candidates = [others[0]] if others else []
shared.from_url("compare_candidates", "strs", others)
candidate_ids = st.multiselect("Candidates", others, default=default_candidates, format_func=labels.get,
                               key="compare_candidates")
shared.from_url("compare_normalized", "bool")
normalized = st.toggle("Normalize to each device's theoretical limit (for unlike devices)", key="compare_normalized",
                       help="Each point as % of its own device's limit: PCIe per direction for host↔device copies, "
                            "HBM for kernels.")
shared.sync_url()
if not candidate_ids:
    st.info("Choose at least one candidate.")
    st.stop()

try:
    baseline = shared.loaded_run(baseline_id)
    candidates = [shared.loaded_run(c) for c in candidate_ids]
except Exception as exc:
    shared.show_reasons([str(exc)], "A run could not be loaded")
    st.stop()


@st.cache_data(show_spinner="Comparing…", max_entries=64)
def compared(baseline_id: str, candidate_id: str, normalized: bool):
    """The comparison of two runs (their samples are tested once per pair, not on every rerun)."""
    pair = shared.loaded_run(baseline_id), shared.loaded_run(candidate_id)
    return compare.compare_normalized(*pair) if normalized else compare.compare(*pair)


for candidate_id, candidate in zip(candidate_ids, candidates, strict=True):
    table = compared(baseline_id, candidate_id, normalized)
    st.subheader(f"{report.run_label(candidate)}  vs  baseline {report.run_label(baseline)}")
    line = compare.headline(table, len(baseline) - len(table), len(candidate) - len(table))
    st.markdown(f"**{'Normalized to each device’s limit: ' if normalized else ''}{line}**")
    if table.empty:
        continue
    verdicts = table["verdict"].value_counts()
    m = st.columns(4)
    m[0].metric("Points compared", len(table))
    m[1].metric("Slower beyond noise", int(verdicts.get("slower", 0)))
    m[2].metric("Faster beyond noise", int(verdicts.get("faster", 0)))
    m[3].metric("Same within noise", int(verdicts.get("same", 0)))
    shared.chart(report.ratio_figure(table, "Normalized: each point as % of its own device's limit" if normalized
                                        else "Candidate speed vs baseline, per point", normalized=normalized),
                    key=f"chart_ratio_{candidate_id}")
    diff = compare.provenance_diff(baseline, candidate)
    left, right = st.columns([2, 3])
    with left:
        st.markdown("**Provenance: what differs**")
        st.dataframe(diff, hide_index=True, key=f"diff_{candidate_id}")
    with right:
        st.markdown("**Every point**")
        st.dataframe(report.points_table(table), hide_index=True, key=f"points_{candidate_id}",
                     column_config={"change": st.column_config.NumberColumn("change", format="%+.1f %%"),
                                    "noise (cv)": st.column_config.NumberColumn(format="%.1f %%"),
                                    "baseline % of limit": st.column_config.NumberColumn(format="%.1f %%"),
                                    "candidate % of limit": st.column_config.NumberColumn(format="%.1f %%")})

# Built when clicked: the report inlines Plotly's JavaScript and every table, too much for every rerun.
st.download_button("Download the review report (one HTML file, opens offline)",
                   data=lambda: report.render(baseline, candidates).encode(), mime="text/html", key="compare_report",
                   file_name=f"pinpoint-review-{experiment}-{baseline_id}.html", on_click="ignore")

st.subheader("History: one device and point over time")
devices = sorted(mine["device_name"].dropna().unique())
device = st.selectbox("Device", devices, key="compare_history_device")
history_ids = list(mine[mine["device_name"] == device]["run_id"])
frames = [shared.loaded_run(r) for r in history_ids]
point_rows = {compare.point_label(experiment, row): row for row in frames[0].to_dict("records")}
point = st.selectbox("Point", list(point_rows), key="compare_history_point")
history = compare.history(frames, point_rows[point])
if len(history) < 2:
    st.caption(f"{text.count(len(history), 'run')} of {device} measured this point: a history needs two.")
else:
    shared.chart(report.history_figure(history, f"{point} on {device}"), key="chart_history")
    regressed = history[history["regressed"]]
    st.markdown(f"{len(history)} runs; " + (f"**{len(regressed)} regressed beyond noise** against the run before: "
                + ", ".join(f"{r.run_id} ({compare.percent(r.change)})" for r in regressed.itertuples())
                if not regressed.empty else "none regressed beyond noise against the run before."))
    st.dataframe(history.assign(change=history["change"].map(
        lambda c: "—" if not isinstance(c, float) or math.isnan(c) else compare.percent(c))), hide_index=True)
