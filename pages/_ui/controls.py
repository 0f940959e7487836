"""Widget helpers shared by the experiment pages: the recording and profile choices, the values a recording can
show, the block-size setting, the download button and the message for settings that cannot run."""

from __future__ import annotations

import streamlit as st

from gpu.results import runfiles
from pages._ui.stage import more_settings
from pages._ui.url_state import UrlState


def show_reasons(reasons: list[str], title: str = "These settings cannot run") -> None:
    st.error(f"**{title}:**\n" + "\n".join(f"- {r}" for r in reasons))


def recording_choice(backend, experiment: str, key: str, holds=None) -> str | None:
    """In replay, let the user pick among several recordings (device · date · profile). ``holds`` (rows → bool
    Series) keeps only the recordings with such rows, e.g. the ones measured with the chosen timing method; then
    the one left is named explicitly, and None means none holds any."""
    if backend.kind == "live":
        return None
    recordings = backend.recordings(experiment)
    if holds is not None:
        rows = backend.data[backend.data["experiment"] == experiment]
        keep = {run_id for run_id, part in rows.groupby("run_id") if holds(part).any()}
        recordings = recordings[recordings["run_id"].isin(keep)]
        if len(recordings) <= 1:
            return next(iter(recordings["run_id"]), None)
    if len(recordings) <= 1:
        return None
    labels = {r.run_id: f"{r.device_name} · {str(r.timestamp)[:16]} · {r.profile} ({r.points} points)"
              for r in recordings.itertuples()}
    UrlState.session().restore(f"{key}_recording", "str", list(labels))
    return st.selectbox("Recorded run", list(labels), format_func=labels.get, key=f"{key}_recording")


def profile_choice(backend, key: str, params: dict) -> None:
    if backend.kind == "live":
        UrlState.session().restore(f"{key}_profile", "str", ["interactive", "precise"])
        params["profile"] = st.radio(
            "Measurement profile", ["interactive", "precise"], horizontal=True, key=f"{key}_profile",
            help="interactive: a small time budget per point. precise: nvbench's rule (≥ 10 samples, stop at "
                 "≤ 0.5 % noise after ≥ 0.5 s, give up at 15 s).")


def recorded_values(backend, experiment: str, column: str, run_id: str | None = None) -> list:
    """The values a replayed recording has for a parameter column (the only ones a replay can show)."""
    data = backend.data[backend.data["experiment"] == experiment]
    if run_id:
        data = data[data["run_id"] == run_id]
    elif not data.empty:
        data = data[data["run_id"] == backend.recordings(experiment).iloc[0]["run_id"]]
    return sorted(int(v) for v in data[column].dropna().unique())


def download(frame, name: str) -> None:
    # Built when clicked, not on every rerun: writing every sample as CSV costs more than the rest of a page.
    st.download_button("Download this run (CSV in the schema of gpu/core/schema.py, every sample included)",
                       data=lambda: runfiles.to_csv_bytes(frame), mime="text/csv", key=f"{name}_download",
                       on_click="ignore",
                       file_name=f"pinpoint-{name}-{frame['run_id'].iloc[0]}.csv")


def axis_options(backend, experiment: str, column: str, run_id: str | None, live_options: list[int],
                 fallback: int) -> list[int]:
    """Live: every value the device allows. Replay: only the values the recording holds."""
    if backend.kind == "live":
        return live_options
    return recorded_values(backend, experiment, column, run_id) or [fallback]


def block_size_setting(key: str, options: list[int], label: str, placeholder: str) -> list[int]:
    """A kernel page's block size, among its More settings: a slider (256 when offered) or a typed size, which
    overrides it. Widget keys: ``{key}`` and ``{key}_typed``."""
    with more_settings():
        block_column, typed_column = st.columns(2)
        block = block_column.select_slider(label, options=options, value=256 if 256 in options else options[0],
                                           key=key)
        typed = typed_column.text_input("…or type a block size", key=f"{key}_typed", placeholder=placeholder)
    return typed_block_size(typed) or [block]


def typed_block_size(typed: str) -> list[int] | None:
    """A block size typed by hand (overrides the slider); stops the page with a message if it is no number."""
    if not typed.strip():
        return None
    try:
        return [int(typed)]
    except ValueError:
        show_reasons([f"'{typed}' is not a whole number of threads"])
        st.stop()
