"""Where a page's numbers come from: the cached live and replay backends, the runs catalog, a run opened from the
URL, the sidebar's source switches and the banner that names the source."""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

from gpu.core import devices
from gpu.core.errors import DeviceNotFound
from gpu.core.text import plain
from gpu.experiments.registry import PAGE_OF
from gpu.results.exchange.catalog import BUNDLED_DIRS, Catalog, read_bundled
from gpu.results.persistence.database import default_url
from gpu.results.persistence.store import RunStore, StoreError
from gpu.service.backends import LiveBackend, ReplayBackend, replay_reason, resolve_devices, start_live
from gpu.service.host_locks import APP_WAIT_S
from pages._shared import entry as page_entry
from pages._ui.access import why_not


@st.cache_resource(show_spinner="Starting the GPU worker…")
def default_live_backend() -> tuple[LiveBackend | None, str]:
    """The worker of PINPOINT_DEVICE's GPU (else the first), shared by all sessions; None (with the reason) where no
    GPU works. Its hello lists every GPU of the machine, for the sidebar. Its first job pins the host buffers that
    sweeps keep between jobs, while nobody waits (``LiveBackend.warm``)."""
    live, reason = for_the_app(*start_live())
    if live is not None:
        live.warm()
    return live, reason


def for_the_app(live: LiveBackend | None, reason: str) -> tuple[LiveBackend | None, str]:
    """A live backend of the app: its jobs say "the app" to other processes waiting for their GPUs, and wait at most
    ``APP_WAIT_S`` for a GPU another process measures on (the queue panel says so)."""
    if live is not None:
        live.client.purpose, live.client.wait_s = "the app", APP_WAIT_S
    return live, reason


@st.cache_resource(show_spinner="Starting a worker for that GPU…", max_entries=64)
def live_backend_on(uuid: str) -> tuple[LiveBackend | None, str]:
    """Each GPU its own worker process, shared by all sessions: two GPUs measure at once, while the jobs of one
    GPU stay one at a time."""
    return for_the_app(*start_live(uuid))


@st.cache_resource(show_spinner="Starting a worker for those GPUs…", max_entries=64)
def live_backend_on_set(boards: tuple[str, ...]) -> tuple[LiveBackend | None, str]:
    """Each device set of several GPUs its own worker process, holding all of them, shared by all sessions: while its
    job measures, no job of another worker measures on any of its GPUs (``gpu.service.locks``)."""
    default, reason = default_live_backend()
    if default is None:
        return None, reason
    return for_the_app(*start_live(devices=list(boards), gpus=default.gpus))


def live_backend_for(devices, need: int = 1, job: str = "this page") -> tuple[LiveBackend | None, str]:
    """The live backend of a device set ("0,1", "all", board UUIDs, a list of indices): the app keeps one worker per
    set it has been asked for (a set of one GPU is that GPU's worker, as the sidebar's choice). None with the reason,
    one line naming the bad value and the GPUs there are, when the set cannot be had (or the person at the page may
    not measure); ``need``: the fewest GPUs ``job`` measures on."""
    if refused := why_not("measure"):
        return None, refused
    default, reason = default_live_backend()
    if default is None:
        return None, reason
    try:
        boards = tuple(str(g.get("uuid") or g["index"]) for g in resolve_devices(devices, default.gpus, need=need,
                                                                                  job=job))
    except DeviceNotFound as exc:
        return None, str(exc)
    if len(boards) > 1:
        return live_backend_on_set(boards)
    if boards[0] in (default.facts.get("gpu_uuid"), str(default.indices[0]) if default.indices else None):
        return default, ""
    return live_backend_on(boards[0])


def live_backend() -> tuple[LiveBackend | None, str]:
    """The live backend of the GPU this session chose in the sidebar (the default one until it chooses); None, with
    the reason, for a person whose role may not measure: every page then replays."""
    if refused := why_not("measure"):
        return None, refused
    live, reason = default_live_backend()
    chosen = st.session_state.get("gpu_choice")
    if live is None or not chosen or chosen == live.facts.get("gpu_uuid"):
        return live, reason
    return live_backend_on(chosen)


@st.cache_resource(show_spinner=False)
def replay_backend() -> ReplayBackend:
    return ReplayBackend()


def require_router() -> None:
    """Make sure this page runs inside app.py's ``st.navigation``, never on its own.

    Streamlit starts each server process in its legacy pages/ mode: until app.py has called
    ``st.navigation`` once, a first visit straight to /transfers would run the page file alone, without
    the banner that says where the numbers come from. Leave that mode and rerun through app.py.
    """
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


@st.cache_resource(show_spinner=False, max_entries=8)
def _open_catalog(store_url: str):
    # One catalog per store address (PINPOINT_DB_URL as it is now), so a process that is pointed at another store
    # never reads the first one's runs from the cache. The bundled replay recordings are already read (and
    # validated) by the replay backend: not a second time.
    return Catalog(RunStore(store_url), bundled=read_bundled(BUNDLED_DIRS, already_read=replay_backend().files))


def run_catalog():
    """The runs store and the bundled runs; (None, reason) when the store cannot be opened, so the rest of the
    app keeps working and the review pages say why. A failure is not cached: the next page view tries again."""
    try:
        return _open_catalog(default_url()), ""
    except StoreError as exc:  # the store wraps whatever stopped it (URL, server, file) in one that says why
        return None, str(exc)


def loaded_run(run_id: str):
    """A stored or bundled run by id, decoded once for all sessions (a stored run's samples are JSON in the
    store). Shared, so callers must not change it. Raises StoreError as ``Catalog.load`` does."""
    return _loaded_run(run_id, default_url())


@st.cache_resource(show_spinner=False, max_entries=32, ttl=600)
def _loaded_run(run_id: str, store_url: str):
    catalog, reason = run_catalog()
    if catalog is None:
        raise StoreError(reason)
    return catalog.load(run_id)


def opened_run() -> str | None:
    """A run id from the URL (?run=…): the page shows that stored or bundled run, like a replay."""
    value = st.query_params.get("run")
    return str(value) if value else None


def opened_run_backend(run_id: str) -> tuple[ReplayBackend | None, str]:
    return _opened_run_backend(run_id, default_url())


@st.cache_resource(show_spinner=False, max_entries=16)
def _opened_run_backend(run_id: str, store_url: str) -> tuple[ReplayBackend | None, str]:
    catalog, reason = run_catalog()
    if catalog is None:
        return None, reason
    try:
        frame = catalog.load(run_id)
    except StoreError as exc:  # unknown id or unreadable store: the page says so and falls back
        return None, str(exc)
    return ReplayBackend(frames=[frame]), ""


def opened_run_kind(run_id: str) -> str:
    """"Bundled run" for a recording shipped with PinPoint (a file in git, not in the runs store), else
    "Stored run"."""
    catalog, _ = run_catalog()
    bundled = catalog is not None and run_id in catalog.bundled \
        and not (catalog.store is not None and catalog.store.has_run(run_id))
    return "Bundled run" if bundled else "Stored run"


def open_run_page(navigation) -> None:
    """``/?run=ID`` on Overview (the app's root) opens the run on its experiment's page, with the address's other
    values; an unknown run stays on Overview, where the banner names it."""
    run_id = opened_run()
    if not run_id or navigation.url_path:
        return
    backend, _ = opened_run_backend(run_id)
    experiments = set(backend.data["experiment"]) if backend is not None else set()
    if len(experiments) == 1 and (page := PAGE_OF.get(experiments.pop())):
        st.switch_page(page, query_params={k: st.query_params.get_all(k) for k in st.query_params})


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
        gpus = default_live_backend()[0].gpus if live is not None else []
        if len(gpus) > 1:
            by_uuid = {str(g["uuid"]): g for g in gpus}
            st.selectbox("GPU", list(by_uuid), key="gpu_choice", format_func=lambda u: devices.describe(by_uuid[u]),
                         index=list(by_uuid).index(live.facts.get("gpu_uuid")) if live.facts.get("gpu_uuid")
                         in by_uuid else 0,
                         help="The GPU that measures for this browser session; each GPU has its own worker process.")
        if live is not None:
            st.caption(f"GPU worker: {plain(live.gpu_name())} (pid {live.client.worker_pid}, "
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
            st.info(f"**{opened_run_kind(run_id)}** {plain(run_id)} · recorded on {plain(first['device_name'])} "
                    f"({plain(str(first['timestamp'])[:16])}) by PinPoint, not measured now; experiment: "
                    f"{plain(first['experiment'])}. Remove ?run= from the address to measure or replay.",
                    icon=page_entry("pages/runs.py").icon)
            return
        st.warning(f"Run {plain(run_id)} from the address cannot be shown: {plain(reason, None)}")
    live, reason = live_backend()
    if not use_replay():
        st.success(f"**Live** · measuring on {plain(live.gpu_name())} now", icon=":material/sensors:")
        return
    replay = replay_backend()
    devices = sorted({f"{d} ({t[:10]})" for d, t in zip(replay.data["device_name"], replay.data["timestamp"],
                                                        strict=True)})
    why = "replay switched on" if live is not None else replay_reason(reason)
    # No parentheses around ``why``: the reason often has its own ("… (see requirements-gpu.txt)").
    st.info(f"**Replay** · showing runs recorded on a real GPU by PinPoint's runner, not measured now; "
            f"{why}. Recorded on: {', '.join(devices) or 'nothing yet'}.", icon=":material/replay:")
    for problem in replay.problems:
        st.warning(f"A recorded run could not be read and is left out: {plain(problem, 300)}")
