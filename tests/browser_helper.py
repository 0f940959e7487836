"""`streamlit run serve.py` (PinPoint's server) for the browser tests: on a free loopback port, healthy before it is
used, stopped after."""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
SHOTS = ROOT / "out" / "screenshots"  # git-ignored: for a person to look at
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]
# Every chart shown on the page drawn by Plotly (it draws after the script run ends) and left alone: the charts'
# count and each one's SVG node count and size unchanged for STEADY_MS (charts of a hidden tab do not count). What it
# last saw is kept in the page between polls, and forgotten by each wait.
CHARTS_STEADY = """(steady) => {
  const shown = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const charts = Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"]')).filter(shown).length;
  const plots = Array.from(document.querySelectorAll('.js-plotly-plot')).filter(shown);
  const key = charts + '|' + plots.map(gd => !gd._fullLayout || !gd.querySelector('.main-svg') ? '-'
    : gd.getElementsByTagName('*').length + ':' + Math.round(gd.getBoundingClientRect().width) + 'x'
      + Math.round(gd.getBoundingClientRect().height)).join(',');
  const now = performance.now(), seen = window.__pinpointChartsSeen;
  if (!seen || seen.key !== key) { window.__pinpointChartsSeen = {key, since: now}; return false; }
  return plots.length >= charts && !key.includes('-') && now - seen.since >= steady;
}"""
STEADY_MS = 250
# The page's keyboard shortcuts (pages/_ui/stage.py) are listening and ``key`` has a button to press.
SHORTCUT_READY = """(key) => window.__pinpointKeys === true && Object.entries(window.__pinpointShortcuts || {})
  .some(([name, shortcut]) => shortcut === key && document.querySelector(`.st-key-${name} button:not([disabled])`))"""


class Runs:
    """The script runs the server has finished for a page, from its websocket (ForwardMsg ``script_finished``): what
    a wait follows, rather than stApp's script state alone, which says 'notRunning' on a fresh page before its first
    run and on a page just clicked until the server answers, and may skip 'running' for a run shorter than a frame.
    Each load of the page (a document request of its main frame) opens a websocket of its own; its runs count from
    zero."""

    def __init__(self, page) -> None:
        self.load = self.socket = self.ended = 0
        self.socket_load = -1  # the load whose websocket is counted
        page.on("request", self.requested)
        page.on("websocket", self.opened)

    def requested(self, request) -> None:
        if request.resource_type == "document" and request.frame.parent_frame is None:
            self.load += 1

    def opened(self, socket) -> None:
        self.socket, self.socket_load, self.ended = self.socket + 1, self.load, 0
        number = self.socket
        socket.on("framereceived", lambda payload: self.received(number, payload))

    def received(self, number: int, payload) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        if number == self.socket and isinstance(payload, bytes) \
                and ForwardMsg.FromString(payload).WhichOneof("type") == "script_finished":
            self.ended += 1


WATCHED: dict = {}  # page → its Runs (``watch_runs``)
NOT_RUNNING = """() => document.querySelector("[data-testid='stApp']")
  ?.getAttribute('data-test-script-state') === 'notRunning'"""


def watch_runs(page) -> None:
    """Count the page's script runs from now on (before its first ``goto``; twice is once)."""
    WATCHED.setdefault(page, Runs(page))


def runs_begun(page) -> tuple[int, int]:
    """Where the page's runs stand (its websocket, runs finished on it): ``wait_for_run(page, runs_begun(page))``
    after a click or a key, which may also load the page anew."""
    runs = WATCHED[page]
    return runs.socket, runs.ended


def wait_for_run(page, after: tuple[int, int] | None = None) -> None:
    """Until a script run finished after ``after`` (``runs_begun``; None: the first of the page's current load) and
    the page has drawn it (stApp back at 'notRunning'). No clock of its own: a loaded machine can take minutes for a
    page, and the test's pytest-timeout (pyproject.toml) is the one limit."""
    runs = WATCHED[page]

    def finished() -> bool:
        if after is None:
            return runs.socket_load == runs.load and runs.ended > 0
        return runs.ended > (after[1] if runs.socket == after[0] else 0)

    while not (finished() and page.evaluate(NOT_RUNNING)):
        page.wait_for_timeout(50)  # lets Playwright deliver the websocket's frames; no limit of its own


def wait_for_charts(page, timeout: int = 0) -> None:
    """Until every chart on the page is drawn and has stopped changing (instead of a fixed pause after the run); by
    default no clock of its own, as ``wait_for_run``."""
    page.evaluate("delete window.__pinpointChartsSeen")
    page.wait_for_function(CHARTS_STEADY, arg=STEADY_MS, polling=50, timeout=timeout)


def wait_for_shortcut(page, key: str, timeout: int = 30_000) -> None:
    """Until pressing ``key`` (lower case, as the page names it: "arrowright") would reach its button."""
    page.wait_for_function(SHORTCUT_READY, arg=key, polling=50, timeout=timeout)


class Socket:
    """What the server sent a tab over its websockets since this was attached: the script runs it started
    (ForwardMsg new_session, one per run) and the bytes."""

    def __init__(self, page) -> None:
        self.runs, self.bytes = 0, 0
        page.on("websocket", lambda socket: socket.on("framereceived", self.received))

    def received(self, payload) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        if isinstance(payload, bytes):
            self.bytes += len(payload)
            self.runs += ForwardMsg.FromString(payload).WhichOneof("type") == "new_session"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVER_PIDS: dict[str, int] = {}  # a running streamlit_app's address → its server process


def resident_mib(pid: int) -> float:
    """The process's resident memory (VmRSS), in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


@contextmanager
def streamlit_app(log: Path | None = None, ready: str | None = None, port: int | None = None, **env):
    """The app in replay mode with ``env`` added; yields its address. The rest of its settings come from the
    committed .streamlit/config.toml, which is what the tests check; PINPOINT_DB_URL is the test session's
    throwaway store (conftest) unless ``env`` names another. Its output goes to ``log`` (a file of the test's) or a
    pipe; with ``ready`` (and a log), it is yielded only once that text is in its output as well. ``port``: a free
    port chosen before (an address the app's settings must name), else one found here."""
    port = port or free_port()
    out = log.open("wb") if log else subprocess.PIPE
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.fileWatcherType", "none"],
        cwd=ROOT, env={**os.environ, "PINPOINT_BACKEND": "replay", **env}, stdout=out, stderr=subprocess.STDOUT)

    def output() -> str:
        return log.read_text(errors="replace") if log else process.stdout.read().decode(errors="replace")

    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + (120 if ready else 60)
        healthy = False
        while not (healthy and (ready is None or ready in output())):
            try:
                healthy = healthy or urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok"
            except OSError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail(f"streamlit did not become {'ready' if healthy else 'healthy'}:\n" + output()[-3000:])
            time.sleep(0.3)
        SERVER_PIDS[url] = process.pid
        yield url
    finally:
        SERVER_PIDS.pop(url, None)
        process.terminate()
        process.wait(10)
        if log:
            out.close()
