"""Compare: a baseline against candidates of the same experiment, verdicts that respect noise, the provenance
diff, a normalized view for unlike devices, a history, and a self-contained HTML report."""

from __future__ import annotations

import math

import streamlit as st

from gpu.core import method_versions, text
from gpu.core.text import plain
from gpu.experiments import registry
from gpu.present import takeaways
from gpu.present.charts._common import LEGEND_BELOW
from gpu.results.analysis import compare, pairing, report
from gpu.results.persistence.store import StoreError
from pages import _ui as ui

page = ui.Page("Compare runs")
catalog = page.catalog()
# The Fleet page's bundled boards are listed when a link names them (its "Open in Compare")
linked = {run_id for key in ("compare_baseline", "compare_candidates") for value in st.query_params.get_all(key)
          for run_id in str(value).split(",")}
try:
    runs = catalog.runs(with_reference=linked)
except StoreError as exc:  # a server that went away or stopped answering: one line, not a traceback
    ui.show_reasons([exc], "The runs store cannot be read: the runs bundled with PinPoint are still here")
    runs = catalog.runs(with_store=False, with_reference=linked)
counts = runs.groupby("experiment").size()
experiments = sorted(counts[counts >= 2].index)
if not experiments:
    st.info("Comparing needs two runs of one experiment: measure, run the runner, or import runs on the Runs page.")
    st.stop()
if ui.desk():
    st.markdown(
        "Pick a **baseline** and one or more **candidates** of the same experiment. A point differs when a "
        f"Mann-Whitney U test on the kept samples gives p < {compare.ALPHA} (otherwise it is the **same within "
        "noise**); it is **faster** or **slower** only when the candidate's median also leaves the band that unchanged "
        f"software reaches from run to run (from {compare.MIN_HISTORY} or more earlier runs of the candidate's "
        "board when both runs name the same one, else its one-board floor; of its device model for runs on two "
        "boards, else a measured floor per kind of point; "
        "*run-to-run from* says which), and **within run-to-run noise** when it does not. The provenance diff "
        "beside it shows what else changed.")

page.link_notes()
# on stage the choice of runs folds away: the headline and chart stay
controls = ui.Section(page, ui.more_settings())


def forget_runs() -> None:
    """Another experiment's runs: its own defaults, not the old one's ids (which it cannot take)."""
    for key in ("compare_baseline", "compare_candidates", "compare_history_point"):
        st.session_state.pop(key, None)


experiment = controls.selectbox("Experiment", experiments, "compare_experiment", on_change=forget_runs,
                                index=experiments.index("transfers") if "transfers" in experiments else 0)
mine = runs[runs["experiment"] == experiment].reset_index(drop=True)
labels = {r.run_id: f"{r.device_name} · {str(r.timestamp)[:16].replace('T', ' ')} · {r.points} points · "
          f"{r.label if isinstance(r.label, str) and r.label else r.origin} · {r.run_id}" for r in mine.itertuples()}
ids = list(labels)
# Default: like for like, the newest run against the nearest earlier run of the same GPU model that shares points
# with it; among the runs a page opens by default (the Fleet page's bundled boards are listed, and opened from its
# links, but never picked here). A pair across GPU models is the user's pick only.
picks = [i for i in ids if not catalog.is_reference(i)] or ids


def readable_points(run_id: str) -> set:
    """A run's points for the default pair; an unreadable stored run has none to pair (it is named where it is used)."""
    try:
        return compare.point_keys(ui.loaded_run(run_id))
    except StoreError:
        return set()


like = pairing.like_pair(mine[mine["run_id"].isin(picks)], readable_points)
baseline_id = controls.selectbox("Baseline", ids, "compare_baseline", index=ids.index(like[0] if like else picks[0]),
                                 format_func=labels.get)
others = [i for i in ids if i != baseline_id]
candidate_ids = controls.multiselect("Candidates", others, "compare_candidates",
                                     default=[like[1]] if like and like[1] in others else [], format_func=labels.get)
normalized = controls.toggle("Normalize to each device's theoretical limit (for unlike devices)",
                             "compare_normalized",
                             help="Each point as % of its own device's limit: PCIe per direction for host↔device "
                                  "copies, HBM for kernels.")
HISTORY_KEYS = ("compare_history_device", "compare_history_point")  # set at the desk, below the comparisons
page.sync(own=HISTORY_KEYS)
if not candidate_ids:
    st.info("Choose at least one candidate." if like else
            f"No two runs of {plain(experiment)} on one GPU model measured the same points: choose a candidate to "
            "compare across models (Normalize then judges each against its own device's limit).")
    st.stop()

try:
    baseline = ui.loaded_run(baseline_id)
    candidates = [ui.loaded_run(c) for c in candidate_ids]
except StoreError as exc:  # an unknown id, a run that cannot be read, a store that went away
    ui.show_reasons([exc], "A run could not be loaded")
    st.stop()



@st.cache_data(show_spinner="Comparing…", max_entries=64, ttl=600)  # a newly stored run joins the history
def compared(baseline_id: str, candidate_id: str, normalized: bool):
    """The comparison of two runs, with the candidate's history (earlier runs of its device: Conbench's
    distribution of earlier results); the samples are tested once per pair, not on every rerun."""
    pair = ui.loaded_run(baseline_id), ui.loaded_run(candidate_id)
    if normalized:
        return compare.compare_normalized(*pair)
    return compare.compare(*pair, compare.earlier_runs(catalog, *pair))


for candidate_id, candidate in zip(candidate_ids, candidates, strict=True):
    table = compared(baseline_id, candidate_id, normalized)
    st.subheader(f"{plain(report.run_label(candidate), None)}  vs  baseline {plain(report.run_label(baseline), None)}")
    line = compare.headline(table, len(baseline) - len(table), len(candidate) - len(table))
    models = pairing.across_models(baseline, candidate)
    # across GPU models, a raw change is the hardware's as much as the software's: said in the headline itself
    line = ("Normalized to each device's limit: " if normalized else
            f"Across GPU models ({models}), not normalized: " if models else "") + line
    if table.empty:  # disjoint runs: say why rather than draw an empty comparison
        st.info(plain(compare.disjoint_reason(baseline, candidate) or line, None))
        continue
    if ui.desk():
        st.markdown(f"**{plain(line, None)}**")
        st.markdown(plain(pairing.detectable_line(table), None))  # up front: the size of change each kind can show
        counts = compare.verdict_counts(table)
        m = st.columns(1 + len(counts))
        m[0].metric("Points compared", len(table))
        for column, (name, count) in zip(m[1:], counts.items(), strict=True):
            column.metric(name.capitalize(), count)
        st.caption(compare.band_summary(table))
        st.caption(plain(takeaways.comparison_context(baseline, candidate), None))  # stored text: plain
        # a change of method can explain a difference: said where it is read, an unknown version as unknown
        said = plain(compare.method_words(baseline, candidate), None)
        if method_versions.differ(baseline, candidate):
            st.warning(said)
        else:
            st.caption(said)
    ratio = report.ratio_figure(table, "Normalized: each point as % of its own device's limit" if normalized
                                else "Candidate speed vs baseline, per point", normalized=normalized,
                                labels=registry.labels_of(experiment))
    if ui.presenting():  # at stage fonts the desk's axis title was taller than the plot, over the title and ticks
        ratio.update_yaxes(title_text="change (%)")
        # a pair with and without allocation has 16 series: in rows under the chart, all on screen (a horizontal
        # legend stacks a legend group's entries: on stage each series is its own entry)
        ratio.update_traces(legendgroup=None, selector={"legendgroup": "series"})
        ratio.update_layout(legend={**LEGEND_BELOW, "maxheight": 240})
    ui.chart(ratio, key=f"chart_ratio_{candidate_id}")
    # on stage the headline sits under the chart
    ui.takeaway(plain(line, None), key=f"stage_takeaway_{candidate_id}")
    if not ui.desk():
        continue
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

if not ui.desk():
    st.stop()  # on stage: each comparison's chart and headline
# Built when clicked: the report inlines Plotly's JavaScript and every table, too much for every rerun.
st.download_button("Download the review report (one HTML file, opens offline)",
                   data=lambda: report.render(baseline, candidates,
                                              lambda c: compare.earlier_runs(catalog, baseline, c)).encode(),
                   mime="text/html", key="compare_report",
                   file_name=f"pinpoint-review-{experiment}-{baseline_id}.html", on_click="ignore")

st.subheader("History: one device and point over time")
devices = sorted(mine["device_name"].dropna().unique())
history_controls = ui.Section(page)
device = history_controls.selectbox("Device", devices, "compare_history_device")
# Oldest first: a history reads forward in time, and the default point is then the oldest run's when runs tie.
history_ids = list(mine[mine["device_name"] == device].sort_values("timestamp", kind="stable")["run_id"])
frames, unreadable = [], []
for history_id in history_ids:
    try:
        frames.append(ui.loaded_run(history_id))
    except StoreError as exc:  # one unreadable run leaves the others' history standing
        unreadable.append(f"{plain(history_id)}: {plain(exc, 160)}")
if unreadable:
    st.warning("Left out of the history (cannot be read):\n" + "\n".join(f"- {u}" for u in unreadable))
if not frames:
    st.stop()
# Every point any of the device's runs measured; the default is one that most of them measured.
point_rows, measured_by = {}, {}
for frame in frames:
    for row in frame.to_dict("records"):
        label = compare.point_label(experiment, row)
        point_rows.setdefault(label, row)
        measured_by[label] = measured_by.get(label, 0) + 1
labels_by_runs = list(point_rows)
point = history_controls.selectbox("Point", labels_by_runs, "compare_history_point",
                                  index=labels_by_runs.index(max(labels_by_runs, key=measured_by.get)))
page.sync()
history = compare.history(frames, point_rows[point])
if len(history) < 2:
    st.caption(f"{text.count(len(history), 'run')} of {plain(device)} measured this point: a history needs two.")
else:
    ui.chart(report.history_figure(history, f"{point} on {device}"), key="chart_history")
    regressed = history[history["regressed"]]
    st.markdown(f"{len(history)} runs; " + (f"**{len(regressed)} regressed beyond noise** against the run before: "
                + ", ".join(f"{plain(r.run_id)} ({compare.percent(r.change)})" for r in regressed.itertuples())
                if not regressed.empty else "none regressed beyond noise against the run before."))
    st.dataframe(history.assign(change=history["change"].map(
        lambda c: "—" if not isinstance(c, float) or math.isnan(c) else compare.percent(c)))
                 .rename(columns={"run_to_run_source": "run-to-run from", "gpu_uuid": "board"}), hide_index=True)
