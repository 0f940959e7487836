"""The measure flow: the Measure button's state machine, following a live job, showing its outcome, and keeping a
live measurement in the runs store."""

from __future__ import annotations

import logging
import os
import time

import streamlit as st

from gpu.core import text
from gpu.core.errors import AccessRefused, ValidationError, WorkerError
from gpu.core.schema import SchemaError
from gpu.core.text import plain
from gpu.experiments.request import Request
from gpu.present.live import conditions_strip
from gpu.present.noise import noisy_points
from gpu.results.analysis import normal
from gpu.results.persistence.store import StoreError, params_by_run
from gpu.service import host_locks
from gpu.service.jobs import JobHandle, whose_job
from pages._ui import access
from pages._ui.backends import opened_run, run_catalog, session_id
from pages._ui.controls import profile_choice, show_reasons
from pages._ui.stage import desk

LOG = logging.getLogger(__name__)
POLL_S = 0.1  # how often a running job is looked at: new points are drawn within this of arriving
REDRAW_S = 0.3  # at most this often a growing chart is redrawn (a redraw costs the browser a Plotly render)
# What a chart raises when the points so far lack what it needs (a missing column, group or size, an empty series).
PARTIAL_FRAME_ERRORS = (LookupError, ValueError, TypeError, ArithmeticError)


def follow(handle: JobHandle, preview=None, redraw_s: float = REDRAW_S) -> None:
    """Show a job's queue position and progress until it finishes. With ``preview(frame, suffix)``, the points
    measured so far are drawn as they arrive: the first as soon as it comes, then redrawn in place as more come, at
    most every ``redraw_s`` (``suffix`` makes each redraw's element keys unique); the page's full view replaces the
    preview when the job ends. Once the first points are drawn (or from the start, without a preview), the page
    readies what it needs once the job ends (``ready_for_result``)."""
    bar = st.progress(0.0, text="starting…")
    strip, shown = st.empty(), None  # the GPU's conditions now, where the worker's witness reports them
    slot = st.empty() if preview is not None else None
    drawn, redraws, last, ready = 0, 0, -1e9, False
    while not handle.wait(POLL_S):
        if not ready and (slot is None or redraws or handle.state == "queued"):
            ready = True  # after the first partial draw: it is not delayed
            ready_for_result()
        if handle.state == "queued" or handle.total:
            bar.progress(0.0 if handle.state == "queued" else min(handle.done / handle.total, 1.0),
                         text=progress_text(handle, access.current_actor()))
        line = conditions_strip(getattr(handle, "conditions_now", None))
        if line != shown:
            shown = line
            if line:
                strip.caption(plain(line, None))
            else:
                strip.empty()
        if slot is None or len(handle.rows) <= drawn or time.monotonic() - last < redraw_s:
            continue
        frame = handle.partial_frame()
        if frame is None:
            continue
        drawn, redraws, last = len(frame), redraws + 1, time.monotonic()
        with slot.container():
            st.caption(f"**Measuring** · {drawn} of {handle.total or '?'} points so far, drawn as they arrive "
                       "(coarse sizes first, then the gaps); the full page follows when the sweep ends.")
            try:
                preview(frame, f"_preview{redraws}")
            except PARTIAL_FRAME_ERRORS as exc:  # a partial sweep may lack what a chart needs: wait for more points
                st.caption(f"(more points needed to draw: {exc})")
    bar.empty()
    strip.empty()
    if slot is not None:
        slot.empty()


def ready_for_result() -> None:
    """What the page needs once a live job ends, read while it measures (the page's thread waits then): the runs
    store it keeps the run in and the bundled recordings its result is compared with (``normal``), each read once
    per process. A served app has read both before its first visitor (serve.py); a page in a process of its own
    (a script, a test) would read them after its first Measure ended, a second or two on a 2-core machine. A store
    that cannot be opened is tried again, and said, when the run is kept; anything else that fails here is left to
    the step that needs it, which says so (following the job goes on)."""
    try:
        if st.session_state.get("save_to_store", True):
            run_catalog()
        normal.read_bundled_points()
    except Exception:  # noqa: BLE001  (the store's save or the context line shows the error, after the result)
        LOG.warning("readying the page's end while a job measures failed", exc_info=True)


def progress_text(handle: JobHandle, viewer) -> str:
    """A job's progress line as the progress bar shows it (Markdown): whose job it waits behind, as ``viewer`` may
    know it, or how far it is. Names come from sign-in and labels from people: escaped by ``plain``, so a name
    like ``[click me](https://…)@example.org`` shows as typed, never as a link or an image."""
    said = handle.queue_text(viewer) if handle.state == "queued" else f"{handle.done}/{handle.total} · {handle.text}"
    return plain(said, None)


def outcome(handle: JobHandle):
    """The job's result, or None after showing its error as a message (never a traceback)."""
    try:
        result = handle.outcome()
    except ValidationError as exc:
        show_reasons(exc.reasons)
        return None
    except WorkerError as exc:
        if handle.state == "cancelled":  # "cancelled by NAME": a signed-in name, shown as text
            st.info(f"Measurement stopped: {plain(exc, None)}")
        else:
            extra = " The GPU worker was replaced; the next measurement runs on a fresh one." if exc.fatal else ""
            st.error(f"The measurement failed: {plain(exc, None)}.{extra}")
        return None
    for note in handle.notes:
        st.caption(note)  # PinPoint's own sentences (what was reused, what replay lacks)
    return result


def request(flag: str) -> None:
    """A button's on_click: record the click in session state, so no rerun before the page reads it loses it."""
    st.session_state[flag] = True


def measured_frame(backend, checked: Request, key: str, run_id: str | None = None, preview=None,
                   redraw_s: float = REDRAW_S):
    """The page's results for a ``checked`` request: live, after the user presses Measure (kept in the session until
    the next press, so chart options never re-measure); replayed, straight from the chosen recording. None: stop
    here."""
    state = st.session_state
    if backend.kind != "live":
        frame = outcome(backend.submit(checked, run_id=run_id))
        return frame
    # The click is recorded by a callback in session state, so it survives any rerun before it is served.
    refused = access.why_not("measure")
    st.button("Measure", type="primary", key=f"{key}_measure", disabled=bool(refused), help=refused,
              on_click=request, args=(f"{key}_measure_requested",))
    queue_panel(backend, key)
    if state.pop(f"{key}_measure_requested", False) and access.permitted("measure"):
        state[f"{key}_job"] = backend.submit(checked, session=session_id(), reuse=state.get("reuse_points", True),
                                             owner=access.current_actor().who)
        state.pop(f"{key}_result", None)
    job = state.get(f"{key}_job")
    if job is not None:
        follow(job, preview, redraw_s)
        state[f"{key}_result"] = outcome(job)
        state.pop(f"{key}_job")
        if state[f"{key}_result"] is not None:
            if job.kind != "reused":  # reused points were kept and stored when they were measured
                backend.cache.remember(state[f"{key}_result"], checked.profile)
                if state.get("save_to_store", True):
                    save_run(state[f"{key}_result"], checked)
    frame = state.get(f"{key}_result")
    if frame is None:
        st.info("Choose the settings, then press **Measure**. Results stay here while you change chart options.")
    elif desk() and (note := noisy_points(frame)):  # a live spread is named, so it is not read as a result
        st.caption(note)
    return frame


def queue_panel(backend, key: str) -> None:
    """The worker's jobs, measuring and queued in the order they will be served, each with whose it is as this
    person may know it; an admin can cancel any of them (the client checks the role again: ``cancel_as``). Then what
    other processes of this machine measure now (a runner, a fleet task, the tests: ``host_locks.holders``) and which
    of their jobs wait for a GPU (``host_locks.waiters``)."""
    actor = access.current_actor()
    jobs = [job for job in backend.client.jobs() if job.kind != "warm_host_pool"]
    others = host_locks.holders(exclude_pid=os.getpid())
    waiting = host_locks.waiters(exclude_pid=os.getpid())
    refused = st.session_state.pop(f"{key}_cancel_refused", None)
    if refused:  # names the person refused: text, not Markdown
        st.warning(plain(refused, None))
    if not jobs and not others and not waiting:
        return
    title = f"GPU queue: {text.count(len(jobs), 'job')}" + (f" · {text.count(len(others), 'other process')} measuring"
                                                             if others else "") + \
        (f" · {text.count(len(waiting), 'job')} of other processes waiting" if waiting else "")
    with st.expander(title):
        for holder in others:  # another process's own words: shown as text
            st.caption(plain(f"another process · {holder.text()}", None))
        for waiter in waiting:
            st.caption(plain(f"another process · {waiter.waiting_text()}", None))
        if backend.client.wait_s is not None:
            st.caption(f"A job here waits at most {backend.client.wait_s:g} s for a GPU that another process "
                       "measures on, then is refused.")
        for place, job in enumerate(jobs):
            whose = whose_job(job.owner, actor) or "a job of this machine"
            where = "measuring" if place == 0 and job.state == "running" else job.queue_text(actor)
            left, right = st.columns([5, 1])
            left.caption(plain(f"{whose} · {where}", None))  # names come from sign-in: shown as text, not Markdown
            if job.owner is not None and (job.owner == actor.who or actor.may("cancel_any")):
                right.button("Cancel", key=f"{key}_cancel_{job.id}", on_click=cancel_job,
                             args=(backend, job, f"{key}_cancel_refused"))


def cancel_job(backend, job, refused_key: str) -> None:
    """A Cancel button's on_click: cancel ``job`` as the person at the page, or say in one line why not."""
    try:
        backend.client.cancel_as(access.current_actor(), job)
    except AccessRefused as exc:
        st.session_state[refused_key] = str(exc)


def save_run(frame, checked: Request) -> None:
    """Keep a live measurement in the runs store, with the parameters of the ``checked`` request that measured it;
    a store that fails never costs the measurement."""
    catalog, reason = run_catalog()
    if catalog is None:
        st.warning(f"This measurement was not saved: {plain(reason, None)}")
        return
    try:
        for result in catalog.store.save(frame, "live", actor=access.current_actor(),
                                         params=params_by_run(frame, checked)):
            st.caption(f"Saved in the runs store as run {plain(result.run_id)} (Runs and Compare pages).")
    except (StoreError, SchemaError, AccessRefused) as exc:  # one line that says why (a server gone, a refused run)
        st.warning(f"This measurement was not saved in the runs store: {plain(exc, 300)}")


def section_frame(backend, experiment: str, params: dict, key: str, run_id: str | None = None,
                  extra_reasons: list[str] | None = None, preview=None, redraw_s: float = REDRAW_S):
    """Profile choice, validation (with messages), then the measured or replayed frame; None (after saying
    why, or asking for Measure) when there is none. For pages with several experiments in sections."""
    opened = opened_run()
    if opened and backend.kind == "replay" and backend.recordings(experiment).empty:
        # A run opened from the address (Runs → Open on its page) holds one experiment; a page of several shows it
        # in its own section and says so in the others, rather than calling their settings wrong.
        shown = ", ".join(sorted(set(backend.data["experiment"]))) or "no"
        st.info(f"Run {plain(opened)} is a {plain(shown)} run: it holds no {experiment} points. Leave the run (drop "
                "run= from the address) to see this section's recordings.")
        return None
    profile_choice(backend, key, params)
    if extra_reasons:
        show_reasons(extra_reasons)
        return None
    try:
        checked = backend.request(experiment, params)  # parsed and checked here, once: the worker trusts it
    except ValidationError as exc:
        show_reasons(exc.reasons)
        return None
    return measured_frame(backend, checked, key, run_id, preview, redraw_s)


def checked_frame(backend, experiment: str, params: dict, key: str, run_id: str | None = None,
                  extra_reasons: list[str] | None = None, preview=None, redraw_s: float = REDRAW_S):
    """``section_frame`` for a page of one experiment: the page stops when there is no frame. ``preview(frame,
    suffix)`` draws the page's main chart from the points measured so far while a live job runs, redrawn at most
    every ``redraw_s`` (a page whose chart costs more to build redraws it less often)."""
    frame = section_frame(backend, experiment, params, key, run_id, extra_reasons, preview, redraw_s)
    if frame is None:
        st.stop()
    return frame
