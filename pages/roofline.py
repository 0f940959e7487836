"""Roofline: is each kernel bound by memory or by compute, and how far is it from the roof? Every kernel PinPoint
measures, placed under the ceilings measured on the same GPU (gpu.results.roofline)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from gpu.core import text
from gpu.experiments import suites
from gpu.experiments.device_copy import view as device_copy_chart
from gpu.experiments.fma import view as compute_chart
from gpu.present.charts import roofline as roofline_chart
from gpu.results import roofline as rl
from pages import _ui as ui
from pages._ui.access import current_actor
from pages._ui.measure import follow, save_run

SUITE = "roofline"  # assets/suites/roofline.toml: the experiments and quick parameters measured live
page = ui.Page(
    "Roofline: memory or compute?",
    "Each kernel that PinPoint measures, placed under the ceilings measured on the same GPU: the **memory roofs** "
    "(bytes/s: a slope on the left) and the **compute roofs** (FLOP/s: flat). Below the ridge a kernel is bound "
    "by memory, above it by compute; each point says which roof binds it and what fraction of that roof it "
    "reaches. Kernels without arithmetic (copies, strided reads, transposes) have no place on a FLOP axis: they "
    "stand on the right, by bytes/s against the memory roofs. Hover a point for its sentence. Bytes count what a "
    "kernel reads plus what it writes, as the HBM roof (a device-to-device copy) does; a kernel that only reads "
    "(a reduction) can therefore stand a little above that roof.")
backend = page.backend
controls = ui.Section(page)
more = ui.more_settings()  # the GPU and the highlighted kernel: folded on stage, where links can still set them


def live_runs() -> pd.DataFrame | None:
    """Live: the suite's experiments one after another on Measure, the chart redrawn as each answers."""
    suite = suites.load(SUITE)
    refused = ui.why_not("measure")
    st.button("Measure", type="primary", key="roofline_measure", disabled=bool(refused), help=refused,
              on_click=ui.request, args=("roofline_measure_requested",))
    state = st.session_state
    if state.pop("roofline_measure_requested", False) and ui.permitted("measure"):
        frames: list[pd.DataFrame] = []
        shown = st.empty()
        handle = ui.submit_values(backend, suite.runs[0].experiment, suite.runs[0].params, session=ui.session_id(),
                                  owner=current_actor().who)
        for number, run in enumerate(suite.runs, start=1):
            st.caption(f"{number}/{len(suite.runs)}: measuring {text.plain(run.experiment)}…")

            def preview(partial, suffix, done=tuple(frames), number=number):
                # one preview per experiment of the suite: its keys must not repeat those of the one before
                draw(pd.concat([*done, partial], ignore_index=True), f"roofline_chart{number}{suffix}")

            follow(handle, preview)
            frame = ui.outcome(handle)
            # The next experiment is submitted before this one is saved and drawn: the GPU measures while the page
            # works (the finished job is done, so the session's new job cancels nothing).
            if number < len(suite.runs):
                following = suite.runs[number]
                handle = ui.submit_values(backend, following.experiment, following.params, session=ui.session_id(),
                                          owner=current_actor().who)
            if frame is not None and not frame.empty:  # an experiment that answered no point adds nothing
                frames.append(frame)
                if state.get("save_to_store", True):
                    save_run(frame, handle.payload["request"])
                with shown.container():
                    draw(pd.concat(frames, ignore_index=True), f"roofline_chart_after{number}")
        shown.empty()
        state["roofline_live"] = pd.concat(frames, ignore_index=True) if frames else None
    if state.get("roofline_live") is None:
        st.info(f"Press **Measure**: {text.plain(', '.join(suite.experiments), None)} run one after another (quick "
                "settings, assets/suites/roofline.toml), each drawn as it answers.")
    return state.get("roofline_live")


def replay_runs() -> pd.DataFrame:
    """Replay: the newest recording of each experiment on the chosen device model."""
    devices = rl.device_models(backend.data)  # only the models with kernels or ceilings to place are offered
    if not devices:
        st.info("No recordings to place: none of a kernel or ceiling experiment.")
        page.sync()
        st.stop()

    def placeable(name: str) -> None:
        """A link naming a model recorded only by other experiments is told why it is not offered."""
        recorded = sorted(set(backend.data.loc[backend.data["device_name"].astype(str) == name, "experiment"]))
        if recorded and name not in devices:
            raise ValueError("nothing to place on a roofline was recorded on this GPU model "
                             f"(only {', '.join(recorded)})")

    # one GPU model or several: the choice is there, so a link's roofline_device is always a setting of this page
    device = controls.selectbox("GPU (recordings)", devices, "roofline_device", where=more, check=placeable,
                                help="The newest recording of each experiment made on this GPU model")
    return rl.newest_runs(backend.data, device).assign(backend="replay")  # the rows say this view is a replay


def show(figure, key: str) -> None:
    """The roofline figure, already at stage size when presenting (``stage=True``): taller than the stage's other
    charts (two panels over six decades; the page has no controls on stage), which ``ui.chart`` would set to its
    one height."""
    if ui.presenting():
        ui.plot(figure, key=key)
    else:
        ui.chart(figure, key=key)


@ui.cached  # once per set of runs for all sessions
def placed(runs: pd.DataFrame):
    roofs = rl.measured_roofs(runs)
    return roofs, rl.kernel_points(runs, roofs)


def draw(runs: pd.DataFrame, key: str, highlight: str | None = None) -> None:
    roofs, points = placed(runs)
    subtitle = source(runs)
    show(ui.cached_figure(roofline_chart.figure)(points, roofs, subtitle, stage=ui.presenting(), highlight=highlight),
         key)


def source(runs: pd.DataFrame) -> str:
    """"Replay of a run recorded on NVIDIA H200 for each of 4 experiments, 2026-11-23 to 2026-11-25"."""
    if runs.empty:
        return ""
    dates = sorted(str(t)[:10] for t in runs["timestamp"])
    when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    devices = ", ".join(sorted(set(str(d) for d in runs["device_name"])))
    experiments = runs["experiment"].nunique()
    each = f" for each of {experiments} experiments" if experiments > 1 else ""
    prefix = "Live on" if backend.kind == "live" else "Replay of a run recorded on"
    return f"{prefix} {devices}{each}, {when}"


runs = live_runs() if backend.kind == "live" else replay_runs()
if runs is None or runs.empty:
    page.sync()
    st.stop()
roofs, points = placed(runs)
device = str(runs["device_name"].iloc[0])
ridge = rl.ridge_sentence(device, rl.ridges(roofs))
for line in rl.missing_ceilings(runs, roofs):
    st.warning(text.plain(line, None) + " Kernels are placed by their own figures; no fraction of a missing roof is "
               "shown.")
for cache, dram in rl.unused_roofs(roofs) if ui.desk() else ():  # on stage the chart alone: it draws no such roof
    st.warning(text.plain(rl.unused_roof_sentence(cache, dram), None))

highlight = None
if not points.empty:  # on stage too (folded in More settings): a presenter's link can show a highlighted kernel
    kernels = ["(none)", *points["kernel"]]
    highlight = controls.selectbox("Highlight a kernel", kernels, "roofline_kernel", where=more)
    highlight = None if highlight == "(none)" else highlight
page.sync()

show(ui.cached_figure(roofline_chart.figure)(points, roofs, source(runs), stage=ui.presenting(), highlight=highlight),
     "chart_roofline")
counts = rl.placed_counts(points)
takeaway = ridge or "No ceilings are recorded for this GPU yet: kernels stand by their own figures."
if highlight:  # on stage the highlighted kernel's sentence is the takeaway
    takeaway = points.loc[points["kernel"] == highlight, "sentence"].iloc[0]
ui.takeaway(text.plain(takeaway, None))
if not ui.desk():
    st.stop()  # on stage: the chart and the ridge

if ridge:
    st.markdown(f"**{text.plain(ridge, None)}**")
if highlight:
    chosen = points[points["kernel"] == highlight].iloc[0]
    st.markdown(text.plain(chosen["sentence"], None))
st.caption(f"{text.count(len(points), 'kernel')} placed: {counts['roofline']} on the roofline (with arithmetic), "
           f"{counts['memory']} by bytes/s (without). A kernel measured at several configurations is placed at its "
           "fastest, which its sentence names.")

st.subheader("Every placed kernel")
# The sentence's verdict beside the kernel's name (the sentence opens with "experiment · kernel: "), so the roof
# and the fraction are read in the table's width, not cut off.
verdicts = [s[len(f"{e} · {k}: "):] for e, k, s in zip(points["experiment"], points["kernel"], points["sentence"],
                                                      strict=True)]
st.dataframe(points.assign(fraction=points["fraction"] * 100, verdict=verdicts)[
    ["experiment", "kernel", "verdict", "bound", "roof", "fraction"]], hide_index=True,
    column_config={"fraction": st.column_config.NumberColumn("% of roof", format="%.1f"),
                   "verdict": st.column_config.TextColumn("which roof binds it, and how close", width="large")})

st.subheader("Ceilings")
if roofs:
    unused = {cache.name for cache, _ in rl.unused_roofs(roofs)}
    st.dataframe(pd.DataFrame([{"roof": r.name, "kind": r.kind, "rate": rl.roof_rate(r),
                                "used": "no: below the DRAM roof" if r.name in unused else "yes",
                                "precision": r.precision or "", "measured where": r.source, "run": r.run_id}
                               for r in roofs]), hide_index=True)
else:
    st.caption("None measured for this GPU: the roofs appear when a ceiling experiment has a run here.")


@ui.cached  # once per set of runs for all sessions
def roofs_by_experiment(runs: pd.DataFrame) -> dict[str, list[str]]:
    """The names of the roofs each experiment's run of ``runs`` measures."""
    return {experiment: [r.name for r in rl.measured_roofs(frame)] for experiment, frame in runs.groupby("experiment")}


def ceiling_section(title: str, chart, declares: str) -> None:
    """A ceiling experiment's own chart: the run of ``runs`` whose experiment declares ``declares`` (a roof name)."""
    for experiment, names in roofs_by_experiment(runs).items():
        if declares in names:
            st.subheader(title)
            frame = runs[runs["experiment"] == experiment]
            ui.chart(ui.cached_figure(chart.figure)(frame, stage=ui.presenting()), key=f"chart_ceiling_{experiment}")
            return


ceiling_section("Device copies: the memory ceilings", device_copy_chart, "HBM")
ceiling_section("Compute: the FMA ceilings", compute_chart, "FP32 FMA")
