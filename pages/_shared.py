"""What every page shares: the backend choice, the source banner, running a job with progress, errors."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from gpu import charts, runfiles, text
from gpu.backend import LiveBackend, ReplayBackend, start_live
from gpu.client import JobHandle
from gpu.errors import ValidationError, WorkerError
from gpu.text import plain, shorten


@dataclass(frozen=True)
class PageEntry:
    file: str
    title: str  # in the navigation
    url_path: str
    icon: str  # Streamlit's Material icons render without an emoji font (many projector laptops have none)
    blurb: str  # the Overview's link text


PAGES = [
    PageEntry("pages/overview.py", "Overview", "", ":material/push_pin:", ""),
    PageEntry("pages/transfers.py", "Transfers: pinned vs pageable", "transfers", ":material/swap_vert:",
              "Transfers: pinned vs pageable memory"),
    PageEntry("pages/coalescing.py", "Coalescing", "coalescing", ":material/view_week:",
              "Coalescing: access patterns vs bandwidth"),
    PageEntry("pages/reductions.py", "Reductions: dot product", "reductions", ":material/functions:",
              "Reductions: a dot product, five ways"),
    PageEntry("pages/occupancy.py", "Occupancy", "occupancy", ":material/bar_chart:",
              "Occupancy: calculator and measurement"),
    PageEntry("pages/streams.py", "Streams: overlap", "streams", ":material/view_timeline:",
              "Streams: hiding copies behind compute, with a timeline"),
    PageEntry("pages/memory_modes.py", "Memory modes", "memory-modes", ":material/memory:",
              "Memory modes: managed memory, pools and batching"),
    PageEntry("pages/runs.py", "Runs", "runs", ":material/folder_open:",
              "Runs: every stored and bundled run; import from other machines"),
    PageEntry("pages/compare.py", "Compare runs", "compare", ":material/compare_arrows:",
              "Compare runs: verdicts beyond noise, provenance diff, HTML report"),
    PageEntry("pages/talk.py", "Talk: claims, measured", "talk", ":material/co_present:", ""),
]
ICON = PAGES[0].icon  # PinPoint's own
# The browser tab's icon: a file, since a Material icon there is fetched from Google's font server (offline venues).
FAVICON = str(Path(__file__).resolve().parent.parent / "assets" / "pinpoint-icon.png")


@st.cache_resource(show_spinner="Starting the GPU worker…")
def live_backend() -> tuple[LiveBackend | None, str]:
    """One worker process for all sessions; None (with the reason) where no GPU works."""
    return start_live()


@st.cache_resource(show_spinner=False)
def replay_backend() -> ReplayBackend:
    return ReplayBackend()


def require_router() -> None:
    """Make sure this page runs inside app.py's ``st.navigation``, never on its own.

    Streamlit starts each server process in its legacy pages/ mode: until app.py has called
    ``st.navigation`` once, a first visit straight to /transfers would run the page file alone, without
    the banner that says where the numbers come from. Leave that mode and rerun through app.py.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


@st.cache_resource(show_spinner=False)
def _open_catalog():
    from gpu.catalog import BUNDLED_DIRS, Catalog, read_bundled

    # The bundled replay recordings are already read (and validated) by the replay backend: not a second time.
    return Catalog(bundled=read_bundled(BUNDLED_DIRS, already_read=replay_backend().files))


def run_catalog():
    """The runs store and the bundled runs; (None, reason) when the store cannot be opened, so the rest of the
    app keeps working and the review pages say why. A failure is not cached: the next page view tries again."""
    try:
        return _open_catalog(), ""
    except Exception as exc:  # StoreError says why; anything else still gets one line
        from gpu.store import StoreError

        return None, str(exc) if isinstance(exc, StoreError) else f"{type(exc).__name__}: {shorten(str(exc), 200)}"


@st.cache_resource(show_spinner=False, max_entries=32, ttl=600)
def loaded_run(run_id: str):
    """A stored or bundled run by id, decoded once for all sessions (a stored run's samples are JSON in the
    store). Shared, so callers must not change it. Raises as ``Catalog.load`` does."""
    catalog, reason = run_catalog()
    if catalog is None:
        raise RuntimeError(reason)
    return catalog.load(run_id)


def opened_run() -> str | None:
    """A run id from the URL (?run=…): the page shows that stored or bundled run, like a replay."""
    value = st.query_params.get("run")
    return str(value) if value else None


@st.cache_resource(show_spinner=False, max_entries=16)
def opened_run_backend(run_id: str) -> tuple[ReplayBackend | None, str]:
    catalog, reason = run_catalog()
    if catalog is None:
        return None, reason
    try:
        frame = catalog.load(run_id)
    except Exception as exc:  # unknown id or unreadable store: the page says so and falls back
        return None, str(exc)
    return ReplayBackend(frames=[frame]), ""


def use_replay() -> bool:
    live, _ = live_backend()
    return live is None or st.session_state.get("use_replay", False)


def current_backend() -> LiveBackend | ReplayBackend:
    run_id = opened_run()
    if run_id:
        backend, _ = opened_run_backend(run_id)
        if backend is not None:
            return backend
    live, _ = live_backend()
    return replay_backend() if use_replay() else live


def session_id() -> str | None:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx else None


def source_sidebar() -> None:
    live, reason = live_backend()
    with st.sidebar:
        st.markdown("**Data source**")
        st.toggle("Replay recorded runs", key="use_replay", value=live is None, disabled=live is None,
                  help=("Show runs recorded on a real GPU instead of measuring live (for talks with a flaky "
                        "venue GPU)." if live else f"Live measurement is unavailable: {reason}"))
        if live is not None:
            st.caption(f"GPU worker: {live.facts.get('device_name')} (pid {live.client.worker_pid}, "
                       f"restarts {live.client.restarts})")
            st.toggle("Save live measurements in the runs store", key="save_to_store", value=True,
                      help="Every live measurement is kept (with every sample) for the Runs and Compare pages. "
                           "Turn off for this browser session.")
        if live is not None:
            st.toggle("Reuse measured points", key="reuse_points", value=True,
                      help="A request whose every point this worker has measured before (same profile) is shown at "
                           "once from those points, labelled with when they were measured. Off: always measure.")
        st.toggle("Presentation mode", key="present_mode", help="A stage view: no sidebar or toolbar, large fonts. "
                  "Also ?present=1 in the address; leave it by opening the address without it.")


def source_banner() -> None:
    """Every page says where its numbers come from."""
    run_id = opened_run()
    if run_id:
        backend, reason = opened_run_backend(run_id)
        if backend is not None:
            first = backend.data.iloc[0]
            st.info(f"**Stored run** {plain(run_id)} · recorded on {plain(first['device_name'])} "
                    f"({plain(str(first['timestamp'])[:16])}) by PinPoint, not measured now; experiment: "
                    f"{plain(first['experiment'])}. Remove ?run= from the address to measure or replay.",
                    icon=PAGES[7].icon)
            return
        st.warning(f"Run {plain(run_id)} from the address cannot be shown: {plain(reason, None)}")
    live, reason = live_backend()
    if not use_replay():
        st.success(f"**Live** · measuring on {live.facts.get('device_name')} now", icon=":material/sensors:")
        return
    replay = replay_backend()
    devices = sorted({f"{d} ({t[:10]})" for d, t in zip(replay.data["device_name"], replay.data["timestamp"],
                                                        strict=True)})
    why = "replay switched on" if live is not None else f"no live GPU here: {reason}"
    # No parentheses around ``why``: the reason often has its own ("… (see requirements-gpu.txt)").
    st.info(f"**Replay** · showing runs recorded on a real GPU by PinPoint's runner, not measured now; "
            f"{why}. Recorded on: {', '.join(devices) or 'nothing yet'}.", icon=":material/replay:")
    for problem in replay.problems:
        st.warning(f"A recorded run could not be read and is left out: {plain(problem, 300)}")


def show_reasons(reasons: list[str], title: str = "These settings cannot run") -> None:
    st.error(f"**{title}:**\n" + "\n".join(f"- {r}" for r in reasons))


POLL_S = 0.1  # how often a running job is looked at: new points are drawn within this of arriving
REDRAW_S = 0.3  # at most this often a growing chart is redrawn (a redraw costs the browser a Plotly render)


def follow(handle: JobHandle, preview=None) -> None:
    """Show a job's queue position and progress until it finishes. With ``preview(frame, suffix)``, the points
    measured so far are drawn as they arrive, redrawn in place as more come (``suffix`` makes each redraw's
    element keys unique); the page's full view replaces the preview when the job ends."""
    bar = st.progress(0.0, text="starting…")
    slot = st.empty() if preview is not None else None
    drawn, redraws, last = 0, 0, -1e9
    while not handle.wait(POLL_S):
        if handle.state == "queued":
            bar.progress(0.0, text=f"queued behind {text.count(handle.queued_ahead, 'job')} from other sessions")
        elif handle.total:
            bar.progress(min(handle.done / handle.total, 1.0), text=f"{handle.done}/{handle.total} · {handle.text}")
        if slot is None or len(handle.rows) <= drawn or time.monotonic() - last < REDRAW_S:
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
            except Exception as exc:  # a partial sweep may lack what a chart needs: wait for more points
                st.caption(f"(more points needed to draw: {exc})")
    bar.empty()
    if slot is not None:
        slot.empty()


def outcome(handle: JobHandle):
    """The job's result, or None after showing its error as a message (never a traceback)."""
    try:
        result = handle.outcome()
    except ValidationError as exc:
        show_reasons(exc.reasons)
        return None
    except WorkerError as exc:
        if handle.state == "cancelled":
            st.info(f"Measurement stopped: {exc}")
        else:
            extra = " The GPU worker was replaced; the next measurement runs on a fresh one." if exc.fatal else ""
            st.error(f"The measurement failed: {exc}.{extra}")
        return None
    for note in handle.notes:
        st.caption(note)
    return result


def request(flag: str) -> None:
    """A button's on_click: record the click in session state, so no rerun before the page reads it loses it."""
    st.session_state[flag] = True


def measured_frame(backend, experiment: str, params: dict, key: str, run_id: str | None = None, preview=None):
    """The page's results: live, after the user presses Measure (kept in the session until the next press,
    so chart options never re-measure); replayed, straight from the chosen recording. None: stop here."""
    state = st.session_state
    if backend.kind != "live":
        frame = outcome(backend.submit(experiment, params, run_id=run_id))
        return frame
    # The click is recorded by a callback in session state, so it survives any rerun before it is served.
    st.button("Measure", type="primary", key=f"{key}_measure",
              on_click=request, args=(f"{key}_measure_requested",))
    if state.pop(f"{key}_measure_requested", False):
        state[f"{key}_job"] = backend.submit(experiment, params, session=session_id(),
                                             reuse=state.get("reuse_points", True))
        state.pop(f"{key}_result", None)
    job = state.get(f"{key}_job")
    if job is not None:
        follow(job, preview)
        state[f"{key}_result"] = outcome(job)
        state.pop(f"{key}_job")
        if state[f"{key}_result"] is not None:
            if job.kind != "reused":  # reused points were kept and stored when they were measured
                backend.cache.remember(state[f"{key}_result"], params.get("profile"))
                if state.get("save_to_store", True):
                    save_run(state[f"{key}_result"])
    frame = state.get(f"{key}_result")
    if frame is None:
        st.info("Choose the settings, then press **Measure**. Results stay here while you change chart options.")
    return frame


def save_run(frame) -> None:
    """Keep a live measurement in the runs store; a store that fails never costs the measurement."""
    catalog, reason = run_catalog()
    if catalog is None:
        st.warning(f"This measurement was not saved: {plain(reason, None)}")
        return
    try:
        for result in catalog.store.save(frame, "live"):
            st.caption(f"Saved in the runs store as run {plain(result.run_id)} (Runs and Compare pages).")
    except Exception as exc:
        st.warning(f"This measurement was not saved in the runs store: {plain(exc, 300)}")


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
    from_url(f"{key}_recording", "str", list(labels))
    return st.selectbox("Recorded run", list(labels), format_func=labels.get, key=f"{key}_recording")


def profile_choice(backend, key: str, params: dict) -> None:
    if backend.kind == "live":
        from_url(f"{key}_profile", "str", ["interactive", "precise"])
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
    st.download_button("Download this run (CSV in the schema of gpu/schema.py, every sample included)",
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


def section_frame(backend, experiment: str, params: dict, key: str, run_id: str | None = None,
                  extra_reasons: list[str] | None = None, preview=None):
    """Profile choice, validation (with messages), then the measured or replayed frame; None (after saying
    why, or asking for Measure) when there is none. For pages with several experiments in sections."""
    profile_choice(backend, key, params)
    reasons = extra_reasons or backend.check(experiment, params)
    if reasons:
        show_reasons(reasons)
        return None
    return measured_frame(backend, experiment, params, key, run_id, preview)


def checked_frame(backend, experiment: str, params: dict, key: str, run_id: str | None = None,
                  extra_reasons: list[str] | None = None, preview=None):
    """``section_frame`` for a page of one experiment: the page stops when there is no frame. ``preview(frame,
    suffix)`` draws the page's main chart from the points measured so far while a live job runs."""
    frame = section_frame(backend, experiment, params, key, run_id, extra_reasons, preview)
    if frame is None:
        st.stop()
    return frame


# --- links that reproduce a view ---------------------------------------------------------------------------
URL_RESERVED = ("run", "present")  # read by every page (app.py); the talk's ``scene`` is its own

# PinPoint's links address the app's root and name the page in ``?page=`` (/?page=transfers&…). Streamlit's
# frontend, loaded straight at a page's path (/transfers), first looks for its server one level down
# (/transfers/_stcore/health and …/host-config: two 404s in the browser's console), then at the root; loaded at the
# root it asks the root only. Its candidates come from window.location, or from a ``window.__streamlit`` object
# that only a script in Streamlit's own index.html could set, so no server option changes them.
LINK_PAGE = "page"


def open_linked_page(navigation) -> None:
    """Before the page runs: ``?page=NAME`` (a PinPoint link) opens that page with the link's other values; the
    address then reads /NAME?… as if the page had been opened from the menu. An unknown name is said and dropped."""
    wanted = st.query_params.get(LINK_PAGE)
    st.session_state["_page_url_path"] = navigation.url_path
    if wanted is None:
        return
    entry = next((p for p in PAGES if p.url_path and p.url_path == wanted.strip()), None)
    rest = {k: st.query_params.get_all(k) for k in st.query_params if k != LINK_PAGE}
    if entry is None:
        st.warning(f"page={text.plain(wanted)} is not a page of PinPoint, so Overview is shown (pages: "
                   f"{', '.join(p.url_path for p in PAGES if p.url_path)}).")
        del st.query_params[LINK_PAGE]
    elif entry.url_path == navigation.url_path:
        del st.query_params[LINK_PAGE]
    else:
        st.switch_page(entry.file, query_params=rest)


def view_link(params: dict[str, str]) -> str:
    """The address of this view: the app's root (this page's address without its own path) with ``?page=`` and
    ``params``, so the link loads without the frontend's 404 probe (see LINK_PAGE)."""
    from urllib.parse import urlencode

    current = st.session_state.get("_page_url_path", "")
    address = (getattr(st.context, "url", None) or "").split("?")[0].split("#")[0]
    if current and address.endswith("/" + current):
        address = address[: -len(current)]
    elif address and not address.endswith("/"):
        address += "/"
    return address + "?" + urlencode(({LINK_PAGE: current} if current else {}) | params)


def url_page() -> None:
    """Start mirroring this page's controls into the URL (call once, at the top of the page)."""
    st.session_state["_url_registered"] = {}
    st.session_state["_url_problems"] = []
    st.session_state["_url_slot"] = st.empty()
    st.session_state["_url_link"] = None


def parse_url_value(raw: str, kind: str, options=None):
    """A control's value from its text in the URL; ValueError (with the reason) when it is not one it can take.

    Kinds: int, str, bool, ints / strs (several, comma-separated), int_range ("low~high"). ``options`` is the
    list of allowed values (or a (low, high) pair for a numeric slider); None allows any value of the kind."""
    def one_int(value: str) -> int:
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"'{text.shorten(value)}' is not a whole number") from None

    def allowed(value):
        if options is None:
            return value
        if isinstance(options, tuple) and len(options) == 2 and kind in ("int",) and not isinstance(options[0], str):
            if not options[0] <= value <= options[1]:
                raise ValueError(f"{value} is outside {options[0]}…{options[1]}")
            return value
        if value not in options:
            shown = ", ".join(map(str, list(options)[:8])) + (" …" if len(options) > 8 else "")
            raise ValueError(f"{text.shorten(repr(value))} is not one of the choices ({shown})")
        return value

    value = str(raw).strip()
    if kind == "bool":
        if value not in ("0", "1", "true", "false"):
            raise ValueError(f"'{text.shorten(value)}' is not 0 or 1")
        return value in ("1", "true")
    if kind == "int":
        return allowed(one_int(value))
    if kind == "str":
        return allowed(value)
    if kind in ("ints", "strs"):
        items = [t for t in value.split(",") if t.strip()]
        return [allowed(one_int(t) if kind == "ints" else t.strip()) for t in items]
    if kind == "int_range":
        low, sep, high = value.partition("~")
        if not sep:
            raise ValueError(f"'{text.shorten(value)}' is not a range low~high")
        return (allowed(one_int(low)), allowed(one_int(high)))
    raise ValueError(f"unknown kind {kind}")


def url_text(value, kind: str) -> str:
    if kind == "bool":
        return "1" if value else "0"
    if kind in ("ints", "strs"):
        return ",".join(str(v) for v in value or [])
    if kind == "int_range":
        return f"{value[0]}~{value[1]}"
    return str(value)


def from_url(key: str, kind: str, options=None, check=None) -> None:
    """Before creating the widget ``key``: take its value from the URL once per session (when valid; otherwise
    keep the default and say why), and mirror it into the URL from then on. ``check(value)`` may refuse a value
    of the right kind by raising ValueError with the reason. A reversed range is swapped, with a note."""
    registered = st.session_state.setdefault("_url_registered", {})
    registered[key] = kind
    restored = st.session_state.setdefault("_url_restored", set())
    if key in restored:
        return
    restored.add(key)
    raw = st.query_params.get(key)
    if raw is None:
        return
    problems = st.session_state.setdefault("_url_problems", [])
    named = f"{text.plain(key)}={text.plain(raw)}"
    try:
        value = parse_url_value(raw, kind, options)
        if check is not None:
            check(value)
    except ValueError as exc:
        problems.append(f"{named}: {text.plain(exc, 160)}; the default is used")
        return
    if kind == "int_range" and value[0] > value[1]:
        value = (value[1], value[0])
        problems.append(f"{named}: the range was reversed, so it is read as {text.plain(url_text(value, kind))}")
    st.session_state[key] = value


def sync_url(final: bool = True, link: bool = True, own: tuple[str, ...] = ()) -> None:
    """After the controls: the URL holds each one's value; unknown or invalid parameters are named, and a link
    to this view is offered (``link=False``: a page without settings offers none, and leaves the address as it is).
    A page with controls further down calls it with ``final=False`` first (so their parameters are not yet taken
    for unknown ones), then again at the end. ``own``: parameters the page reads itself (the talk's ``scene``)."""
    registered = st.session_state.get("_url_registered", {})
    problems = list(st.session_state.get("_url_problems", []))
    unknown = [k for k in st.query_params if k not in registered and k not in URL_RESERVED and k not in own
               and not k.startswith("_")] if final else []
    ctx = get_script_run_ctx()
    named = st.session_state.setdefault("_url_unknown_named", set())  # (page, key): each named once per page
    page = ctx.page_script_hash if ctx else ""
    problems += [f"{text.plain(k)} is not a setting of this page; it is ignored" for k in unknown
                 if (page, k) not in named]
    for key in unknown:
        named.add((page, key))
        if link:
            del st.query_params[key]  # named once, then dropped, so a copied link is clean
    for key, kind in registered.items():
        value = st.session_state.get(key)
        shown = url_text(value, kind) if value is not None else ""
        if shown:
            st.query_params[key] = shown
        elif key in st.query_params:
            del st.query_params[key]
    slot = st.session_state.get("_url_slot")
    if problems and slot is not None:
        slot.warning("Not used as written in this link:\n" + "\n".join(f"- {p}" for p in problems))
        st.session_state["_url_problems"] = []
    if not link:
        return
    address = view_link({k: st.query_params[k] for k in st.query_params})
    if not presenting() and st.session_state.get("_url_link") is None:  # the link box is for the desk
        with st.expander("Link to this view", icon=":material/link:"):
            st.session_state["_url_link"] = st.empty()
            st.caption("Opening this link shows the same controls and the same recording (or the same live "
                       "request). The copy button is at the right of the box.")
    if st.session_state.get("_url_link") is not None:
        st.session_state["_url_link"].code(address, language=None)


# --- presentation mode ---------------------------------------------------------------------------------------
# The stage is a 1920×1080 projector: title, one or two controls, the main chart whole and its takeaway, no
# scrolling. Fonts are sized for the back of the room; the leave button floats at the top right.
STAGE_CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], header[data-testid="stHeader"],
[data-testid="stToolbar"], [data-testid="stDecoration"], [data-testid="stStatusWidget"] { display: none !important; }
.stMainBlockContainer, .block-container { padding-top: 0.6rem !important; padding-bottom: 1rem !important;
  max-width: 96vw !important; }
html, body, [data-testid="stAppViewContainer"] { font-size: 22px; }
.stMarkdown h1, h1 { font-size: 2.3rem !important; padding: 0.2rem 0 0.4rem !important; }
.stMarkdown h2 { font-size: 1.8rem !important; padding: 0.3rem 0 !important; }
.stMarkdown h3 { font-size: 1.45rem !important; padding: 0.2rem 0 !important; }
[data-testid="stVerticalBlock"] { gap: 0.6rem !important; }
[data-testid="stButtonGroup"] > div { flex-wrap: wrap !important; }
.st-key-present_leave { position: fixed !important; top: 0.3rem; right: 1rem; z-index: 1000; width: auto !important; }
.st-key-present_leave button { font-size: 0.75rem !important; opacity: 0.6; }
button:focus-visible, button:focus { box-shadow: none !important; outline: none !important; }
.st-key-stage_title_card { min-height: 88vh; justify-content: center; align-items: center; text-align: center; }
.st-key-stage_title_card h1 { font-size: 4.2rem !important; }
</style>
"""
STAGE_CHART_HEIGHT = 540  # px: with title, controls and takeaway the stage fits 1080 px without scrolling

# A shortcut clicks its button (streamlit-shortcuts), which then keeps the focus: the browser scrolls it into view
# and draws a focus ring. Remember the scroll before the key is handled, then blur the button and restore it.
KEEP_SCROLL_JS = """<script>
(() => {
const doc = document, win = window;
if (!win.__pinpointKeepScroll) {
  win.__pinpointKeepScroll = true;
  const boxes = () => [doc.scrollingElement, doc.querySelector('[data-testid="stMain"]'),
                       doc.querySelector('[data-testid="stAppViewContainer"]')].filter(Boolean);
  win.addEventListener('keydown', (e) => {
    if (['INPUT', 'TEXTAREA'].includes((e.target.tagName || '').toUpperCase())) return;
    const kept = boxes().map(b => [b, b.scrollTop]);
    const restore = () => {
      if (doc.activeElement && doc.activeElement.tagName === 'BUTTON') doc.activeElement.blur();
      kept.forEach(([b, top]) => { b.scrollTop = top; });
    };
    setTimeout(restore, 0);
    setTimeout(restore, 120);
  }, true);
}
})();
</script>"""


def check_present_value() -> None:
    """``?present=`` takes 1 (the stage view) or 0; any other value is named once, dropped from the address, and
    the desk view is shown."""
    raw = st.query_params.get("present")
    if raw is None or raw in ("0", "1"):
        return
    st.warning(f"present={text.plain(raw)} is not 0 or 1, so presentation mode stays off (present=1 turns it on).")
    del st.query_params["present"]


def scene_from_url(count: int) -> int:
    """The talk's first scene (0-based) from ``?scene=N`` (1 … count): a number outside is clamped and anything
    else ignored, with a note in the page's link warning."""
    raw = st.query_params.get("scene")
    if raw is None:
        return 0
    problems = st.session_state.setdefault("_url_problems", [])
    try:
        wanted = int(raw)
    except ValueError:
        problems.append(f"scene={text.plain(raw)} is not a scene number; the talk starts at scene 1")
        return 0
    shown = min(max(wanted, 1), count)
    if shown != wanted:
        problems.append(f"scene={wanted} is outside 1 … {count}; showing scene {shown}")
    return shown - 1


def presenting() -> bool:
    """?present=1 in the address, or the sidebar switch."""
    return st.query_params.get("present") == "1" or st.session_state.get("present_mode", False)


def stage_style() -> None:
    """The stage look: no sidebar or toolbar, fonts readable at the back of a room."""
    st.html(STAGE_CSS)


def shortcuts(**keys: str) -> None:
    """Keyboard shortcuts for buttons (widget key = key name), which never move the page or leave a focus ring."""
    try:
        from streamlit_shortcuts import add_shortcuts
    except ImportError:  # the keys are a convenience; the buttons work without them
        st.caption("Keyboard shortcuts need streamlit-shortcuts (requirements.txt).")
        return
    add_shortcuts(**keys)
    st.html(KEEP_SCROLL_JS, unsafe_allow_javascript=True)


def leave_presentation() -> None:
    st.session_state["present_mode"] = False
    if "present" in st.query_params:
        del st.query_params["present"]


def stage_exit() -> None:
    """The sidebar is hidden on stage: a small button (and Esc) leaves presentation mode."""
    st.button("leave presentation (Esc)", key="present_leave", on_click=leave_presentation, type="tertiary",
              icon=":material/close:")
    shortcuts(present_leave="escape")


def desk() -> bool:
    """True off stage: intros, tables, downloads and secondary charts are shown only then."""
    return not presenting()


def more_settings():
    """Where a page puts its secondary controls: on stage they fold into a closed "More settings" box, so the
    one or two controls a scene is about stay in view; at the desk they are laid out as usual."""
    return st.expander("More settings", icon=":material/tune:") if presenting() else st.container()


def takeaway(text: str | None, heading: str = "###", always: bool = False, key: str = "stage_takeaway") -> None:
    """On stage, the one sentence under a chart that says what it shows, computed from its data (gpu.takeaways).
    ``always``: shown at the desk too (a talk's verdict). ``key``: one per takeaway, starting "stage_takeaway"."""
    if text and (always or presenting()):
        with st.container(key=key):
            st.markdown(f"{heading} {text}")


# --- work that depends only on a recording: done once for every session --------------------------------------
UNHASHED_COLUMNS = ("samples_ms", "intervals")  # lists per row; the rows' other columns already tell runs apart


def frame_key(frame: pd.DataFrame) -> tuple:
    """What identifies a results frame for the caches below, without hashing every sample: its columns and a hash
    of every other value (run id, parameters, medians …)."""
    plain = [c for c in frame.columns if c not in UNHASHED_COLUMNS]
    try:
        digest = pd.util.hash_pandas_object(frame[plain], index=False).sum()
    except TypeError:  # an unhashable value (a list in a column): hash the text of every value instead
        digest = pd.util.hash_pandas_object(frame[plain].astype(str), index=False).sum()
    return tuple(plain), len(frame), int(digest)


def cached(function):
    """``function(frame, …)`` (a table or a sentence computed from results) worked out once per frame and
    arguments for all sessions, so a page view does not redo it."""
    return st.cache_data(show_spinner=False, max_entries=256, ttl=3600, hash_funcs={pd.DataFrame: frame_key})(function)


def cached_figure(build):
    """``build(frame, …) → go.Figure``, built once per frame and arguments for all sessions. Each caller gets its own
    copy (a copy costs a tenth of a build), so a page that retitles or restyles it changes nobody else's."""
    shared_figure = st.cache_resource(show_spinner=False, max_entries=128, ttl=3600,
                                      hash_funcs={pd.DataFrame: frame_key})(build)

    @functools.wraps(build)
    def own_copy(*args, **kwargs):
        return go.Figure(shared_figure(*args, **kwargs))
    return own_copy


def chart(figure, key: str) -> None:
    """A chart at stage size when presenting (fonts for the back of the room, a height that fits), else as is."""
    if presenting():
        charts.stage_figure(figure, STAGE_CHART_HEIGHT)
    st.plotly_chart(figure, key=key)
