"""Widget helpers shared by the experiment pages: the recording and profile choices, the values a recording can
show, the controls built from an experiment's declared axes (``axis``, ``axis_powers``, ``axis_choices``,
``axis_slider``: their options, labels and defaults come from ``AXES``), the block-size setting, the download
button and the message for settings that cannot run."""

from __future__ import annotations

import streamlit as st

from gpu.core.text import plain
from gpu.experiments import registry
from gpu.experiments.axes import Axis
from gpu.results.exchange import runfiles
from gpu.results.persistence.store import StoreError
from pages._ui.backends import run_catalog
from pages._ui.stage import more_settings
from pages._ui.url_state import UrlState


def show_reasons(reasons: list, title: str = "These settings cannot run") -> None:
    """An error message listing ``reasons``. Reasons may quote run content (variant names, run ids, files), so
    each is shown as plain text: no link, image or directive can come from it. Pass raw text, not ``plain``."""
    st.error(f"**{plain(title, None)}:**\n" + "\n".join(f"- {plain(r, 600)}" for r in reasons))


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
                       data=lambda: runfiles.to_csv_bytes(frame, stored_params(frame)), mime="text/csv",
                       key=f"{name}_download",
                       on_click="ignore",
                       file_name=f"pinpoint-{name}-{frame['run_id'].iloc[0]}.csv")


def stored_params(frame) -> dict[str, str] | None:
    """The parameters the runs store keeps for the frame's runs (a live run is saved as it is measured, an opened
    one was), so a downloaded run imports with them, as ``gpu.bench export`` writes it; None for runs it does not
    hold (bundled recordings) or when the store cannot be read: the points download all the same."""
    catalog, _ = run_catalog()
    if catalog is None:
        return None
    try:
        return catalog.store.kept_params(sorted(set(frame["run_id"].astype(str)))) or None
    except StoreError:
        return None


def axis_options(backend, experiment: str, column: str, run_id: str | None, live_options: list[int],
                 fallback: int | None = None, axis_name: str | None = None) -> list[int]:
    """Live: every value the device allows. Replay: only the values the recording holds, else ``fallback`` (by
    default the declared default of the axis ``axis_name``, which is ``column`` unless named)."""
    if backend.kind == "live":
        return live_options
    if fallback is None:
        fallback = first_default(axis(experiment, axis_name or column))
    return recorded_values(backend, experiment, column, run_id) or [fallback]


# --- controls from the declared axes ----------------------------------------------------------------------------
def axis(experiment: str, name: str) -> Axis:
    """The axis ``name`` that the registered experiment declares (its ``AXES``)."""
    for declared in registry.BY_NAME[experiment].arguments:
        if declared.name == name:
            return declared
    raise KeyError(f"{experiment} declares no axis '{name}'")


def axis_label(declared: Axis) -> str:
    """What a control over the axis is called: the axis's label, capitalised."""
    return declared.label[:1].upper() + declared.label[1:]


def first_default(declared: Axis):
    """The axis's default as one value (the first of a list)."""
    default = declared.default
    return default[0] if isinstance(default, list | tuple) else default


def axis_default(experiment: str, name: str):
    """The declared default of the axis, as one value."""
    return first_default(axis(experiment, name))


def powers_of_two(low: int, high: int) -> list[int]:
    """Every power of two from ``low`` to ``high``, both included."""
    return [1 << p for p in range(max(int(high), 1).bit_length()) if low <= 1 << p <= high]


def axis_powers(experiment: str, name: str, low: int | None = None, high: int | None = None) -> list[int]:
    """The powers of two between the axis's declared ``low`` and ``high`` (or closer bounds: a device's limit)."""
    declared = axis(experiment, name)
    return powers_of_two(_bound(max, declared.low, low), _bound(min, declared.high, high))


def _bound(closer, declared, given):
    """A range's end: the declared one, or ``given`` where it is closer (or nothing is declared)."""
    if given is None:
        return declared
    return given if declared is None else closer(given, declared)


def axis_steps(experiment: str, name: str, step: int = 1, high: int | None = None) -> list[int]:
    """Every ``step``-th value from the axis's declared ``low`` to its ``high`` (or a closer ``high``)."""
    declared = axis(experiment, name)
    return list(range(declared.low, _bound(min, declared.high, high) + 1, step))


def axis_choices(experiment: str, name: str, key: str, options=None, default=None, label: str | None = None,
                 **kwargs) -> list:
    """Multi-select pills over the axis's values (or ``options``, e.g. a recording's): labelled as the axis, the
    declared defaults that are offered chosen (else the first option)."""
    declared = axis(experiment, name)
    options = list(declared.values if options is None else options)
    if default is None:
        default = [v for v in declared.default if v in options] or options[:1]
    return st.pills(label or axis_label(declared), options, selection_mode="multi", key=key,
                    **defaulted(key, default=default), **kwargs)


def select_one(label: str, options: list, key: str, value=None, format_func=str, where=st, **kwargs):
    """``st.select_slider`` over ``options`` (in ``where``: a column or container); with one option, that option
    written out instead (a slider of one value draws a lone dot that moves nowhere), its value kept under ``key``
    as the slider's would be (the address keeps it)."""
    if len(options) == 1:
        st.session_state[key] = options[0]
        where.markdown(f"{label}: **{format_func(options[0])}** (the only value here)")
        return options[0]
    return where.select_slider(label, options=options, format_func=format_func, key=key,
                               **defaulted(key, value=value if value in options else options[0]), **kwargs)


def defaulted(key: str, **default) -> dict:
    """A widget's default, unless its key already holds a value (a link's, restored before the widget): given both,
    Streamlit logs a warning with a stack dump, and the key's value wins anyway."""
    return {} if key in st.session_state else default


def axis_slider(experiment: str, name: str, key: str, options: list, label: str | None = None, otherwise: int = -1,
                **kwargs):
    """A slider over ``options`` for one value of the axis: labelled as the axis, at its declared default when
    offered (else at ``options[otherwise]``, the largest by default)."""
    declared = axis(experiment, name)
    default = first_default(declared)
    return select_one(label or axis_label(declared), options, key,
                      value=default if default in options else options[otherwise], **kwargs)


def block_size_setting(key: str, options: list[int], label: str, placeholder: str, default: int = 256,
                       settings=None) -> list[int]:
    """A kernel page's block size, among its More settings (``settings``: the page's own box of them, else a new
    one): a slider (``default`` when offered) or a typed size, which overrides it. Widget keys: ``{key}`` and
    ``{key}_typed``."""
    with settings if settings is not None else more_settings():
        block_column, typed_column = st.columns(2)
        block = select_one(label, options, key, value=default, where=block_column)
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
