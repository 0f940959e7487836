"""PinPoint's server. Run with ``streamlit run serve.py``: Streamlit's own server (``st.App``) runs app.py and
every page exactly as ``streamlit run app.py`` does, with six additions.

- **It serves this machine only, unless told to serve a team.** .streamlit/config.toml sets the loopback address;
  an address beyond this machine without ``PINPOINT_SERVE=team``, a team server whose sign-in is not set up
  (secrets.toml's [auth]), a roles file with an error: each stops the server before it answers anyone, with one
  line (gpu.core.serving). Otherwise one line says where it listens and how to serve a team.

- **A page's own address loads cleanly.** Loaded at /transfers (typed, or reloaded), Streamlit's frontend takes its
  server to be one level down and probes /transfers/_stcore/health and …/host-config before the root: two 404s in
  the browser's console. It takes its candidates from ``window.__streamlit.BACKEND_BASE_URL`` when a page sets it,
  else from the address. Here every page's address answers Streamlit's own index.html with one script in front
  that sets it to the address's parent (the app's root, also under a path prefix), so the frontend asks the root
  at once; the websocket, page links and query parameters are the root's, as before.
- **The first visitor does not pay for the server's start.** The modules the pages import (pandas, Plotly, SciPy's
  stats, PinPoint's own), the replay recordings and the runs catalog are loaded before the server answers its first
  request (healthy after 3.4 s of CPU instead of 0.6 s), not inside the first page view. What they leave in memory
  is then frozen out of the garbage collector, which Streamlit runs after every script run: each run then walks
  only what is new since, not the whole heap (~0.14 s of CPU per page view before).
- **Every page's first view is made at start-up.** A page's default view builds Plotly figures and tables that
  later views take from Streamlit's caches (pages/_ui/cache.py, shared by all sessions): ~0.3 s of CPU that only
  the first visitor of each page paid for (Transfers' first view 0.46–0.67 s, a repeat 0.20–0.26 s). Right after
  the server starts answering, each page is viewed once in a session of Streamlit's own runtime, started as its
  websocket starts a browser's (connect_session, then the browser's first rerun: the page's address, no query, no
  widget values) with a client that keeps only the errors shown, so exactly the cache entries a visitor looks up
  are made (~2.3 s of CPU in all, in the background). A page that fails or hangs is logged and left to its
  visitors. In live mode this also starts the GPU worker, as the first visitor would. A visitor's page goes first:
  while one runs, the next first view waits (each one is a few tenths of a second of CPU, and the two would share
  the Python interpreter), so someone who opens the app during those seconds waits for one at most.
- **The address is printed when the server answers.** Streamlit prints its own "URL:" banner before serve.py has
  even loaded, seconds before anyone can be answered; ``make app`` and ``pinpoint app`` hide that banner
  (STREAMLIT_LOGGER_HIDE_WELCOME_MESSAGE) and this prints "PinPoint is ready: <address>" once the server answers.
- **Streamlit's frontend files are answered from memory.** A browser's first visit fetches about 120 of them
  (/static/…, 11 MB); through Streamlit's file serving, each one a few thread hops and the whole middleware stack,
  they cost ~0.2 s of the server's CPU per visit. They are content-hashed and served as immutable, so each is read
  once per server process and answered from memory with the same type and caching headers.
- **Uploads are bounded.** Nothing is uploaded before sign-in on a team server, each session keeps at most 16
  files and 256 MiB at once, and the files of a session that ended are dropped, also when Streamlit forgets a
  disconnected one without dropping them (pages/_ui/uploads.py).
"""

from __future__ import annotations

import ast
import asyncio
import gc
import mimetypes
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from streamlit import config, file_util
from streamlit.logger import get_logger
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime import Runtime
from streamlit.runtime.app_session import AppSessionState
from streamlit.runtime.session_manager import SessionClient
from streamlit.web.server import server_util

from gpu.core import paths
from gpu.core import serving as srv
from gpu.experiments.registry import EXPERIMENTS
from pages import _ui
from pages._shared import PAGES
from pages._ui.uploads import UploadLimits, sweep_ended_uploads

ROOT = paths.ROOT  # the folder of app.py and pages/, a checkout or the installed copy
STATIC = Path(file_util.get_static_dir())
LOG = get_logger("pinpoint.serve")

# --- a page's own address -------------------------------------------------------------------------------------
# Read by Streamlit's frontend before it looks for its server (tests/test_serve.py checks that the bundle still
# does). new URL(".", …) is the address without its last segment and its query: the root for /transfers?present=1.
BASE_SCRIPT = ('<script>window.__streamlit = Object.assign({}, window.__streamlit, '
               '{BACKEND_BASE_URL: new URL(".", window.location.href).href})</script>')


def page_html(index: str | None = None) -> str:
    """Streamlit's index.html with BASE_SCRIPT first in its head, before the frontend's own scripts."""
    index = (STATIC / "index.html").read_text(encoding="utf-8") if index is None else index
    if index.count("<head>") != 1:
        raise RuntimeError("Streamlit's index.html has no single <head> to put the base address in")
    return index.replace("<head>", "<head>\n    " + BASE_SCRIPT, 1)


def url_prefix() -> str:
    """Streamlit's server.baseUrlPath as a path prefix ('' or '/prefix')."""
    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}" if base else ""


def page_routes() -> list[Route]:
    """GET (and HEAD) of every page's address (/transfers …): the page HTML, never cached by the browser, as
    Streamlit serves its index.html. The root keeps Streamlit's own answer: loaded there, the frontend asks the
    root only."""
    html = page_html()

    async def page(_request) -> Response:
        return HTMLResponse(html, headers={"Cache-Control": "no-cache"})
    return [Route(f"{url_prefix()}/{entry.url_path}", page, methods=["GET"]) for entry in PAGES if entry.url_path]


# --- the frontend's files from memory ---------------------------------------------------------------------------
IMMUTABLE = "public, immutable, max-age=31536000"  # as Streamlit marks these content-hashed files (one year)
PASSED_ON = {b"range", b"if-range", b"if-none-match", b"if-modified-since"}  # Streamlit answers these itself


class FrontendFiles:
    """ASGI middleware: a GET of one of Streamlit's frontend files (a file in its static/static folder, by its exact
    address) is answered from memory, each file read once per server process. Anything else, and any ranged or
    conditional request, goes on to Streamlit unchanged. Only the files listed at start are ever read, so no
    request can name another file."""

    def __init__(self, app, directory: Path = STATIC / "static", prefix: str | None = None) -> None:
        self.app = app
        prefix = url_prefix() if prefix is None else prefix
        self.files = {f"{prefix}/static/{path.relative_to(directory).as_posix()}": path
                      for path in directory.rglob("*") if path.is_file()}
        self.responses: dict[str, Response] = {}

    def response(self, address: str) -> Response:
        if address not in self.responses:
            file = self.files[address]
            media_type = mimetypes.guess_type(file.name)[0] or "text/plain"  # as Starlette's FileResponse
            self.responses[address] = Response(file.read_bytes(), media_type=media_type,
                                               headers={"Cache-Control": IMMUTABLE})
        return self.responses[address]

    async def __call__(self, scope, receive, send) -> None:
        if (scope["type"] == "http" and scope["method"] == "GET" and scope["path"] in self.files
                and not any(name in PASSED_ON for name, _ in scope["headers"])):
            await self.response(scope["path"])(scope, receive, send)
        else:
            await self.app(scope, receive, send)


# --- loaded before the first visitor --------------------------------------------------------------------------
# Imported inside functions where they are used (tests/test_layers.py says why), but needed by a page view.
LAZY_IMPORTS = ("import scipy.stats",)  # the verdicts' Mann-Whitney test: Streams, Compare and the talk


def page_imports() -> list[str]:
    """The import statements at the top of the page files (as written, once each), then LAZY_IMPORTS."""
    statements = [ast.unparse(node) for entry in PAGES
                  for node in ast.parse((ROOT / entry.file).read_text(encoding="utf-8")).body
                  if isinstance(node, ast.Import | ast.ImportFrom) and getattr(node, "module", "") != "__future__"]
    return list(dict.fromkeys(statements + list(LAZY_IMPORTS)))


def prepare() -> None:
    """What the first page views would otherwise pay for: the pages' imports, the replay backend (every recording
    read and checked, and listed per experiment) and the runs catalog (both st.cache_resource, shared by all
    sessions); then what they left in memory is frozen out of the garbage collector. A step that fails is logged
    and left to the page view that needs it, which shows the error as before."""
    started = time.process_time()
    for statement in page_imports():
        try:
            exec(statement, {})  # noqa: S102  (a page file's own import line)
        except Exception:  # noqa: BLE001  (the page that imports it shows the error)
            LOG.warning("warm-up: %r failed", statement, exc_info=True)
    try:
        replay = _ui.replay_backend()
        for experiment in EXPERIMENTS:  # its list of recordings per experiment, which Overview shows in full
            replay.recordings(experiment)
        _ui.run_catalog()  # a store that cannot be opened is not cached: Runs and Compare say why
    except Exception:  # noqa: BLE001  (the pages that need them show the error)
        LOG.warning("warm-up: loading the recordings failed", exc_info=True)
    gc.collect()
    gc.freeze()
    LOG.info("warm-up: %.1f s of CPU before the first request; %d objects frozen out of the garbage collector",
             time.process_time() - started, gc.get_freeze_count())


# --- the first visitor, at start-up ---------------------------------------------------------------------------
VISIT_TIMEOUT_S = 60  # per page
GIVE_WAY_MAX_S = 30  # the longest a first view waits for visitors' pages (a live measurement may run for a minute)
GIVE_WAY_POLL_S = 0.1


def visitor_page_running(runtime: Runtime) -> bool:
    """Whether a visitor's page script runs now: a session of the runtime's (a first view closes its own before the
    next starts) in the running state. Read from Streamlit's session manager; where that is not there, False."""
    try:
        # Streamlit has no public listing of its sessions or their state
        sessions = runtime._session_mgr.list_active_sessions()
        return any(info.session._state == AppSessionState.APP_IS_RUNNING for info in sessions)
    except AttributeError:
        return False


async def give_way(runtime: Runtime, limit: float = GIVE_WAY_MAX_S) -> float:
    """Waits while a visitor's page runs (at most ``limit`` s); returns the seconds waited."""
    started = time.monotonic()
    while visitor_page_running(runtime) and time.monotonic() - started < limit:
        await asyncio.sleep(GIVE_WAY_POLL_S)
    return time.monotonic() - started


class Visitor(SessionClient):
    """A session's client that keeps only the errors its page shows (Streamlit's exception elements)."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def write_forward_msg(self, msg) -> None:
        if msg.WhichOneof("type") == "delta" and msg.delta.new_element.WhichOneof("type") == "exception":
            shown = msg.delta.new_element.exception
            self.errors.append(f"{shown.type}: {shown.message}")


async def visit(runtime: Runtime, url_path: str, timeout: float = VISIT_TIMEOUT_S) -> list[str]:
    """One page view in a new session, as a browser opening the page's address starts it: the session is connected
    to the runtime, sent the browser's first rerun (the page's address, no query, no widget values) and closed once
    its runs are over and their messages delivered. Returns the errors the page showed."""
    client = Visitor()
    session_id = runtime.connect_session(client=client, user_info={})
    try:
        session = runtime.get_app_session(session_id)
        session.track_settling()
        runtime.handle_backmsg(session_id, BackMsg(rerun_script=ClientState(page_name=url_path)))
        async with asyncio.timeout(timeout):
            await session.wait_until_settled()
    finally:
        runtime.close_session(session_id)
    return client.errors


async def first_visits(runtime: Runtime | None = None) -> None:
    """Every page's default view, once, through Streamlit's own sessions: the figures and tables it caches for
    all sessions are built with exactly the keys a visitor's view looks up. Then what they left is frozen out of
    the garbage collector, as prepare() does. A page that fails or hangs is logged and left to its visitors."""
    started, cpu, waited = time.monotonic(), time.process_time(), 0.0
    try:
        runtime = runtime or Runtime.instance()
        for entry in PAGES:
            address = f"/{entry.url_path}"
            waited += await give_way(runtime)
            try:
                errors = await visit(runtime, entry.url_path)
            except TimeoutError:
                LOG.warning("first visit: %s was not done after %d s; stopped", address, VISIT_TIMEOUT_S)
                continue
            except Exception:  # noqa: BLE001  (the page's visitors see the error)
                LOG.warning("first visit: %s failed", address, exc_info=True)
                continue
            if errors:
                LOG.warning("first visit: %s showed %s", address, "; ".join(errors))
        gc.collect()
        gc.freeze()
    except Exception:  # noqa: BLE001  (the server answers as before, without it)
        LOG.warning("first visit failed", exc_info=True)
        return
    LOG.info("first visit: %d pages in %.1f s (%.1f s of CPU; %.1f s waiting for visitors' pages)", len(PAGES),
             time.monotonic() - started, time.process_time() - cpu, waited)


@asynccontextmanager
async def warm_up(_app):
    """st.App's lifespan: prepare() after Streamlit's runtime has started, before the server answers any request;
    then every page's first view while it answers, and the sweep of ended sessions' uploads (both stopped with the
    server)."""
    await asyncio.to_thread(prepare)
    tasks = [asyncio.create_task(first_visits()), asyncio.create_task(sweep_ended_uploads())]
    print(ready_line(), flush=True)  # the server answers as this returns
    yield
    for task in tasks:
        task.cancel()


# --- this machine, or a team -----------------------------------------------------------------------------------
def ready_line() -> str:
    """The line printed once the server answers: the address to open, as Streamlit's banner would give it (the
    configured browser.serverAddress, the port and path prefix)."""
    return (f"PinPoint is ready: {server_util.get_url(config.get_option('browser.serverAddress'))} "
            "(each page's first view is made in the background for a few seconds; a visitor's page goes first)")


def check_serving() -> srv.Serving:
    """The serving settings, checked before the server answers anyone: SystemExit with one line when the server
    must not start (gpu.core.serving says why each setting exists)."""
    try:
        plan = srv.serving(address=config.get_option("server.address"))
        if plan.sign_in:
            srv.providers(_ui.access.auth_settings())
            srv.read_roles(srv.roles_path())
            srv.session_hours()
    except srv.ServingError as exc:
        print(f"PinPoint does not start: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    print(plan.startup_line(config.get_option("server.port")), flush=True)
    return plan


SERVING = check_serving()
app = st.App("app.py", routes=page_routes(),
             middleware=[Middleware(FrontendFiles), Middleware(UploadLimits, prefix=url_prefix())], lifespan=warm_up)
