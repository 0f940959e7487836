"""A talk: scenes of claims, each measured (live when a GPU answers in time, else the bundled recording) and
judged by the measurement shown. Keys: → next scene, ← previous, m measure live."""

from __future__ import annotations

import streamlit as st

from gpu.core.errors import ValidationError, WorkerError
from gpu.experiments import registry
from gpu.present import talks
from gpu.present.claims import ClaimError, judge_source
from pages import _ui as ui
from pages._ui.access import current_actor

page = ui.Page()
LIVE_TIMEOUT_S = 30.0

try:
    talk = talks.load()
except talks.TalkError as exc:
    ui.show_reasons([str(exc)], "The talk cannot be shown")
    st.stop()

count = len(talk.scenes)
state = st.session_state
page.link_notes()
if "talk_scene" not in state:
    state["talk_scene"] = page.url.scene(count)
page.sync(link=False, own=("scene",))


def move(step: int) -> None:
    state["talk_scene"] = min(max(state["talk_scene"] + step, 0), count - 1)



index = state["talk_scene"]
st.query_params["scene"] = str(index + 1)
scene = talk.scenes[index]

st.caption(f"{talk.title} · scene {index + 1} of {count}")
st.markdown(f"# {scene.claim}")

# --- the measurement: live if asked and answered in time, else the bundled recording -----------------------
live, _ = ui.live_backend()
measurable = live is not None and not ui.use_replay()  # while replaying there is nothing to measure: no button
frame, source, fallback = None, "", ""
if state.pop("talk_measure_requested", False) and measurable:
    if ui.permitted("measure"):
        handle = ui.submit_values(live, scene.experiment, {**scene.params, "profile": "interactive"},
                                  session=ui.session_id(), owner=current_actor().who)
        with st.spinner(f"Measuring on {live.facts.get('device_name')}…"):
            finished = handle.wait(LIVE_TIMEOUT_S)
        if not finished:
            live.client.cancel(handle)
            fallback = f"the live measurement took longer than {LIVE_TIMEOUT_S:.0f} s"
        else:
            try:
                state[f"talk_live_{index}"] = handle.outcome()
            except (ValidationError, WorkerError) as exc:
                fallback = f"the live measurement failed ({exc})"
if f"talk_live_{index}" in state:
    frame = state[f"talk_live_{index}"]
    source = f"**Measured live** on {frame['device_name'].iloc[0]} just now"
else:
    try:
        frame = ui.submit_values(ui.replay_backend(), scene.experiment, scene.params).outcome()
        first = frame.iloc[0]
        # One caption line, under the verdict: a fallback never pushes the verdict off the screen.
        source = (f"**Bundled recording** from {first['device_name']}, {str(first['timestamp'])[:10]} "
                  "(measured by PinPoint's runner, not now)"
                  + (f" · {fallback[0].upper() + fallback[1:]}: showing the bundled recording" if fallback else "")
                  + (" · press **m** to measure live" if measurable else ""))
    except ValidationError as exc:
        ui.show_reasons(exc.reasons, "This scene has no recording to show")

if frame is not None:
    try:
        line = talks.headline(scene, frame)
    except (ClaimError, talks.TalkError) as exc:
        line = f"No verdict: {exc}"
    figure = registry.view_of(scene.experiment).TALK_FIGURES[scene.chart](frame)  # the scene's experiment draws it
    ui.chart(figure, key=f"talk_chart_{index}")
    ui.takeaway(line, "##", always=True)
    ui.context(frame, key=f"stage_context_{index}")  # the figure against its limit; points not clean
    st.caption(source)

# One row under the verdict: ← previous, the speaker notes, Measure live (only where a GPU answers: while replaying
# there is nothing to measure), next →. Rows of their own pushed the buttons off a 1920×960 screen.
cells = st.columns([1, 4, 1.2, 1] if measurable else [1, 5, 1], vertical_alignment="top")
cells[0].button("← previous", key="talk_prev", on_click=move, args=(-1,), disabled=index == 0)
if frame is not None:
    with cells[1].expander("Speaker notes and method"):
        st.markdown(scene.notes)
        st.caption(f"Experiment `{scene.experiment}`, judged by `{judge_source(scene.judge)}:{scene.judge}` from the "
                   "numbers above. "
                   f"Parameters: {talks.describe_params(scene.params, scene.experiment)}.")
if measurable:
    cells[2].button("Measure live (m)", key="talk_measure", on_click=ui.request, args=("talk_measure_requested",))
cells[-1].button("next →", key="talk_next", on_click=move, args=(1,), disabled=index == count - 1)
ui.shortcuts(talk_prev="arrowleft", talk_next="arrowright", talk_measure="m")
