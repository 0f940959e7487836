"""serve.py, PinPoint's server, without a browser: the page HTML that tells Streamlit's frontend where its server is
(and that the installed frontend still reads it), and the routes that answer it. tests/test_stage_browser.py loads
every page through the real server."""

import asyncio
import importlib
import re
from pathlib import Path

import pytest
from streamlit import config

from gpu.experiments.registry import EXPERIMENTS
from pages._shared import PAGES
from tests.browser_helper import streamlit_app

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def serve():
    before = config._main_script_path
    module = importlib.import_module("serve")
    config._main_script_path = before  # building serve's st.App records app.py as the script: not for other tests
    return module


def asgi_get(app, path: str, headers: dict[str, str] | None = None, method: str = "GET"):
    """(status, headers, body) of one request to an ASGI app."""
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "scheme": "http", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1),
             "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()], "http_version": "1.1"}
    sent, asked = [], []

    async def receive():
        if not asked:
            asked.append(True)
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client stays connected until the answer is complete

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body


def test_the_installed_frontend_still_takes_its_server_from_window_streamlit(serve):
    """The contract serve.py relies on: the bundle that probes _stcore/health reads window.__streamlit's
    BACKEND_BASE_URL (Streamlit 1.67's frontend does). If an upgrade drops it, the 404s come back: this fails first."""
    bundles = [p.read_text(encoding="utf-8", errors="replace") for p in (serve.STATIC / "static" / "js").glob("*.js")]
    probing = [text for text in bundles if "_stcore/health" in text and "_stcore/host-config" in text]
    assert probing, "no frontend file probes _stcore/health any more: check how the frontend finds its server"
    assert all("window.__streamlit" in text and "BACKEND_BASE_URL" in text for text in probing)


def test_the_page_html_names_the_server_before_any_of_the_frontends_scripts(serve):
    html = serve.page_html()
    assert html.count(serve.BASE_SCRIPT) == 1
    assert html.index(serve.BASE_SCRIPT) < html.index("<script type=\"module\"") < html.index("</head>")
    assert html.replace("\n    " + serve.BASE_SCRIPT, "") == (serve.STATIC / "index.html").read_text(encoding="utf-8")
    with pytest.raises(RuntimeError, match="no single <head>"):
        serve.page_html("<html><body></body></html>")


def test_every_page_address_answers_the_page_html_and_the_root_is_left_to_streamlit(serve):
    from starlette.routing import Router

    routes = serve.page_routes()
    assert sorted(r.path for r in routes) == sorted(f"/{p.url_path}" for p in PAGES if p.url_path)
    router = Router(routes=routes)
    status, headers, body = asgi_get(router, "/transfers")
    assert status == 200 and body.decode() == serve.page_html()
    assert headers["content-type"].startswith("text/html") and headers["cache-control"] == "no-cache"
    assert asgi_get(router, "/transfers", method="HEAD")[0] == 200
    assert asgi_get(router, "/")[0] == 404  # not one of these routes: Streamlit's own index.html answers there
    assert asgi_get(router, "/transfers/_stcore/health")[0] == 404


def test_under_a_base_url_path_the_page_addresses_carry_it(serve):
    before = config.get_option("server.baseUrlPath")
    config.set_option("server.baseUrlPath", "/pinpoint/")
    try:
        assert "/pinpoint/transfers" in [r.path for r in serve.page_routes()]
    finally:
        config.set_option("server.baseUrlPath", before)


def test_the_warm_up_runs_the_pages_import_lines_and_the_lazy_heavy_ones(serve):
    statements = serve.page_imports()
    assert {"import pandas as pd", "from pages import _ui as ui", "from gpu.results import compare, pairing, report",
            "import scipy.stats"} <= set(statements)
    assert not [s for s in statements if "__future__" in s] and len(statements) == len(set(statements))


def test_the_warm_up_loads_the_shared_recordings_freezes_them_and_logs_what_fails(serve, monkeypatch, caplog):
    import gc
    import sys

    import streamlit as st

    from pages import _ui

    st.cache_resource.clear()
    monkeypatch.setattr(serve, "LAZY_IMPORTS", serve.LAZY_IMPORTS + ("import pinpoint_no_such_module",))
    serve.LOG.addHandler(caplog.handler)
    try:
        serve.prepare()
        frozen = gc.get_freeze_count()
    finally:
        gc.unfreeze()
        serve.LOG.removeHandler(caplog.handler)
    assert "scipy.stats" in sys.modules and frozen > 10_000
    assert _ui.replay_backend() is _ui.replay_backend()  # loaded by the warm-up, shared from then on
    assert set(EXPERIMENTS) <= set(_ui.replay_backend()._recordings)  # and its recordings listed per experiment
    text = caplog.text
    assert "'import pinpoint_no_such_module' failed" in text and "objects frozen out of the garbage collector" in text


def test_the_frontend_files_are_answered_from_memory_as_streamlit_answers_them(serve):
    from streamlit.web.server.starlette.starlette_static_routes import create_streamlit_static_handler

    streamlit_files = create_streamlit_static_handler(str(serve.STATIC), None)
    passed_on = []

    async def streamlit(scope, receive, send):
        passed_on.append(scope["path"])
        await streamlit_files(scope, receive, send)

    files = serve.FrontendFiles(streamlit, prefix="")
    index = (serve.STATIC / "index.html").read_text(encoding="utf-8")
    addresses = [f"/{part}" for part in re.findall(r'href="\./(static/[^"]+)"', index)
                 + re.findall(r'src="\./(static/[^"]+)"', index)]
    assert any(a.endswith(".js") for a in addresses) and any(a.endswith(".css") for a in addresses)
    assert any(a.endswith(".woff2") for a in addresses)
    for address in addresses:
        status, headers, body = asgi_get(files, address)
        assert not passed_on, address
        expected = asgi_get(streamlit_files, address)
        assert status == expected[0] == 200 and body == expected[2] == (serve.STATIC / address[1:]).read_bytes()
        assert headers["content-type"] == expected[1]["content-type"], address
        assert headers["cache-control"] == expected[1]["cache-control"] == serve.IMMUTABLE, address
        assert headers["content-length"] == str(len(body))
    kept = dict(files.responses)
    assert set(kept) == set(addresses)
    assert asgi_get(files, addresses[0])[0] == 200 and files.responses[addresses[0]] is kept[addresses[0]]  # read once


@pytest.mark.parametrize("address,headers,method", [
    ("/", {}, "GET"),  # not a frontend file
    ("/static/js/not-a-file.js", {}, "GET"),
    ("/static/../index.html", {}, "GET"),
    ("/static/js/{bundle}", {"Range": "bytes=0-9"}, "GET"),  # ranged and conditional requests: Streamlit's answer
    ("/static/js/{bundle}", {"If-None-Match": '"x"'}, "GET"),
    ("/static/js/{bundle}", {}, "HEAD"),
])
def test_anything_else_goes_on_to_streamlit(serve, address, headers, method):
    bundle = next((serve.STATIC / "static" / "js").glob("index.*.js")).name
    passed_on = []

    async def streamlit(scope, receive, send):
        passed_on.append(scope["path"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    files = serve.FrontendFiles(streamlit, prefix="")
    assert asgi_get(files, address.format(bundle=bundle), headers, method)[0] == 299
    assert passed_on == [address.format(bundle=bundle)] and not files.responses


def test_under_a_base_url_path_the_frontend_files_carry_it(serve):
    files = serve.FrontendFiles(None, prefix="/pinpoint")
    assert files.files and all(address.startswith("/pinpoint/static/") for address in files.files)


def test_the_lifespan_does_not_wait_for_the_first_visits_and_stops_them_with_the_server(serve, monkeypatch):
    visiting, stopped = [], []

    async def first_visits():
        visiting.append(True)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stopped.append(True)
            raise

    monkeypatch.setattr(serve, "prepare", lambda: None)
    monkeypatch.setattr(serve, "first_visits", first_visits)

    async def serving():
        async with serve.warm_up(None):
            await asyncio.sleep(0)
            assert visiting and not stopped  # the server answers while the pages are visited
        await asyncio.sleep(0)

    asyncio.run(serving())
    assert stopped


def test_a_first_visit_that_fails_or_hangs_is_logged_and_the_other_pages_are_still_visited(serve, monkeypatch,
                                                                                          caplog):
    import gc

    visited = []

    async def visit(_runtime, url_path):
        visited.append(url_path)
        if url_path == "transfers":
            raise RuntimeError("no session")
        if url_path == "streams":
            raise TimeoutError
        return ["ValueError: no such run"] if url_path == "compare" else []

    monkeypatch.setattr(serve, "visit", visit)
    serve.LOG.addHandler(caplog.handler)
    try:
        asyncio.run(serve.first_visits(runtime=object()))
    finally:
        gc.unfreeze()
        serve.LOG.removeHandler(caplog.handler)
    assert visited == [entry.url_path for entry in PAGES]
    text = caplog.text
    assert "first visit: /transfers failed" in text and "RuntimeError: no session" in text
    assert f"first visit: /streams was not done after {serve.VISIT_TIMEOUT_S} s; stopped" in text
    assert "first visit: /compare showed ValueError: no such run" in text
    assert f"first visit: {len(PAGES)} pages in" in text


class RunningSessions:
    """A runtime whose one visitor's page script runs for ``seconds``, then is done."""

    def __init__(self, seconds: float):
        import time
        from types import SimpleNamespace

        from streamlit.runtime.app_session import AppSessionState

        self.until, self.states = time.monotonic() + seconds, AppSessionState
        self.session = SimpleNamespace(_state=AppSessionState.APP_IS_RUNNING)
        self._session_mgr = self

    def list_active_sessions(self):
        import time
        from types import SimpleNamespace

        if time.monotonic() >= self.until:
            self.session._state = self.states.APP_NOT_RUNNING
        return [SimpleNamespace(session=self.session)]


def test_a_first_view_waits_while_a_visitors_page_runs(serve, monkeypatch, caplog):
    """The warm-up gives way: no page's first view starts while a visitor's page script runs."""
    import gc
    import time

    runtime = RunningSessions(seconds=0.3)
    started = []

    async def visit(_runtime, url_path):
        started.append(time.monotonic())
        return []

    monkeypatch.setattr(serve, "visit", visit)
    monkeypatch.setattr(serve, "GIVE_WAY_POLL_S", 0.01)
    serve.LOG.addHandler(caplog.handler)
    try:
        asyncio.run(serve.first_visits(runtime=runtime))
    finally:
        gc.unfreeze()
        serve.LOG.removeHandler(caplog.handler)
    assert len(started) == len(PAGES) and min(started) >= runtime.until
    waited = float(re.search(r"([\d.]+) s waiting for visitors' pages", caplog.text).group(1))
    assert waited >= 0.2


def test_a_first_view_waits_for_a_visitors_page_only_so_long(serve):
    runtime = RunningSessions(seconds=60)  # a page that runs on (a live measurement)
    assert 0.05 <= asyncio.run(serve.give_way(runtime, limit=0.05)) < 1 and serve.visitor_page_running(runtime)
    assert serve.visitor_page_running(object()) is False  # a runtime without Streamlit's session manager


def test_streamlit_still_keeps_what_give_way_reads():
    """Streamlit has no public listing of sessions and their state; these are the attributes give_way reads."""
    import inspect

    from streamlit.runtime.app_session import AppSession, AppSessionState
    from streamlit.runtime.runtime import Runtime

    assert "self._session_mgr" in inspect.getsource(Runtime.__init__)
    assert "self._state = AppSessionState.APP_IS_RUNNING" in inspect.getsource(AppSession)
    assert AppSessionState.APP_IS_RUNNING.value == "APP_IS_RUNNING"


def test_the_ready_line_names_the_address_to_open(serve, monkeypatch):
    real = config.get_option
    set_here = {"browser.serverAddress": "pinpoint.example.org", "browser.serverPort": 8502,
                "server.baseUrlPath": "lab"}
    monkeypatch.setattr(config, "get_option", lambda name: set_here[name] if name in set_here else real(name))
    assert serve.ready_line().startswith("PinPoint is ready: http://pinpoint.example.org:8502/lab")


def test_a_hung_first_visit_is_given_up_and_its_session_closed(serve):
    class Session:
        def track_settling(self):
            pass

        async def wait_until_settled(self):
            await asyncio.Event().wait()

    class Runtime:
        closed, sent = [], []

        def connect_session(self, client, user_info):
            return "s1"

        def get_app_session(self, session_id):
            return Session()

        def handle_backmsg(self, session_id, msg):
            self.sent.append(msg)

        def close_session(self, session_id):
            self.closed.append(session_id)

    runtime = Runtime()
    with pytest.raises(TimeoutError):
        asyncio.run(serve.visit(runtime, "transfers", timeout=0.01))
    assert runtime.closed == ["s1"]
    assert runtime.sent[0].rerun_script.page_name == "transfers" and not runtime.sent[0].rerun_script.query_string


# --- the real server ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """`streamlit run serve.py` in replay mode (a throwaway runs store) once its first visits are over: (address,
    its log so far)."""
    folder = tmp_path_factory.mktemp("serve")
    log = folder / "server.log"
    with streamlit_app(log=log, ready="first visit:", PINPOINT_DB_URL=f"sqlite:///{folder}/runs.sqlite") as url:
        yield url, log.read_text(errors="replace")


def cache_lookups(url: str) -> dict[tuple[str, str, str], int]:
    """Streamlit's count of calls to each cached function, by result: {(cache type, function, hit|miss): count}."""
    import urllib.request

    text = urllib.request.urlopen(f"{url}/_stcore/metrics?families=cache_lookups", timeout=10).read().decode()
    pattern = r'cache_lookups_total\{cache="([^"]+)",cache_type="([^"]+)",result="(hit|miss)"\} (\d+)'
    return {(kind, name, result): int(count) for name, kind, result, count in re.findall(pattern, text)}


def browser_view(url: str, url_path: str) -> list[str]:
    """A page's first view over Streamlit's websocket, as a browser opening its address starts one: the errors
    the page showed, once its run has finished."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ClientState_pb2 import ClientState
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect

    errors = []
    with connect(url.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"],
                 open_timeout=10) as socket:
        socket.send(BackMsg(rerun_script=ClientState(page_name=url_path)).SerializeToString())
        while True:
            msg = ForwardMsg()
            msg.ParseFromString(socket.recv(timeout=60))
            if msg.WhichOneof("type") == "delta" and msg.delta.new_element.WhichOneof("type") == "exception":
                errors.append(msg.delta.new_element.exception.message)
            if msg.WhichOneof("type") == "script_finished" and msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                return errors


@pytest.mark.slow
def test_after_start_up_a_first_view_of_any_page_finds_every_cached_figure_and_table_made(started):
    url, log = started
    assert f"first visit: {len(PAGES)} pages in" in log and " failed" not in log and " showed " not in log
    before = cache_lookups(url)
    assert before[("st_cache_resource", "gpu.experiments.transfers.view.bandwidth_figure", "miss")] == 1  # made then
    for entry in PAGES:
        assert browser_view(url, entry.url_path) == [], entry.title
    after = cache_lookups(url)
    built = {key[:2]: after[key] - before.get(key, 0) for key in after
             if key[2] == "miss" and after[key] != before.get(key, 0)}
    assert not built, f"built again by a first view after start-up: {built}"
    assert after[("st_cache_resource", "gpu.experiments.transfers.view.bandwidth_figure", "hit")] >= 1


@pytest.mark.slow
def test_a_headless_server_asks_no_outside_address_at_start_up(tmp_path):
    """`streamlit run serve.py --server.headless true` on every interface, as a team server runs it: every HTTP(S)
    request it makes goes through a proxy that is a loopback listener here, which must see none by the time the
    server is healthy and has printed its address (Streamlit would ask checkip.amazonaws.com for an External URL)."""
    import os
    import socket
    import subprocess
    import sys
    import threading
    import time
    import urllib.request

    from tests.browser_helper import ROOT, free_port

    proxy = socket.socket()
    proxy.bind(("127.0.0.1", 0))
    proxy.listen()
    proxy.settimeout(0.2)
    seen = []
    stop = threading.Event()

    def listen():
        while not stop.is_set():
            try:
                connection, _ = proxy.accept()
            except OSError:
                continue
            connection.settimeout(1)
            try:
                seen.append(connection.recv(200))
            except OSError:
                seen.append(b"?")
            connection.close()

    threading.Thread(target=listen, daemon=True).start()
    address = f"http://127.0.0.1:{proxy.getsockname()[1]}"
    port = free_port()
    env = {**os.environ, "PINPOINT_BACKEND": "replay", "HTTP_PROXY": address, "HTTPS_PROXY": address,
           "http_proxy": address, "https_proxy": address, "NO_PROXY": "", "no_proxy": "",
           "PINPOINT_DB_URL": f"sqlite:///{tmp_path}/runs.sqlite"}
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true",
                                    "--server.port", str(port), "--server.fileWatcherType", "none"],
                                   cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while "URL:" not in log.read_text(errors="replace"):
                assert process.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
                time.sleep(0.3)
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the test's own check: direct
            assert opener.open(f"http://127.0.0.1:{port}/_stcore/health", timeout=10).read() == b"ok"
            time.sleep(2)  # a lookup after the banner would still show
        finally:
            process.terminate()
            process.wait(10)
            stop.set()
            proxy.close()
    printed = log.read_text(errors="replace")
    assert not seen, seen
    assert "External URL" not in printed and "URL: http://localhost" in printed
