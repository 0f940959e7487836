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


# Every script run a page starts, counted in the page from its first script on (``watch_runs``): a run begins when
# stApp's script state leaves 'notRunning' (for 'running' or 'rerunRequested'); a fresh page may say 'notRunning'
# before its first run, and a page just clicked still says it until the server answers, so the state alone cannot
# tell a finished run from one not begun.
RUN_WATCH = """(() => {
  if (window.__pinpointRunsBegun !== undefined) return;  // watched twice: counted once
  window.__pinpointRunsBegun = 0;
  window.__pinpointLoad = Math.random();  // this load of the page, told from the next
  const watch = () => {
    const app = document.querySelector("[data-testid='stApp']");
    if (!app) return false;
    let last = app.getAttribute('data-test-script-state');
    const seen = () => {
      const now = app.getAttribute('data-test-script-state');
      if (now !== last && (now === 'running' || now === 'rerunRequested')) window.__pinpointRunsBegun++;
      last = now;
    };
    if (last === 'running' || last === 'rerunRequested') window.__pinpointRunsBegun++;
    new MutationObserver(seen).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
    return true;
  };
  const start = () => {
    if (watch()) return;
    const look = new MutationObserver(() => { if (watch()) look.disconnect(); });
    look.observe(document.documentElement, {childList: true, subtree: true});
  };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start); else start();
})();"""
RUN_ENDED = """(after) => {
  const begun = window.__pinpointRunsBegun || 0;
  const since = after && after[0] === window.__pinpointLoad ? after[1] : 0;  // a new load counts from its start
  return begun > since && document.querySelector("[data-testid='stApp']")
    ?.getAttribute('data-test-script-state') === 'notRunning'; }"""


def watch_runs(page) -> None:
    """Count the page's script runs on every load from now on (before the page's first ``goto``; twice is once)."""
    page.add_init_script(RUN_WATCH)


def runs_begun(page) -> list:
    """The page's load and the script runs begun in it so far: ``wait_for_run(page, runs_begun(page))`` after a
    click (or a key that may load the page anew)."""
    return page.evaluate("[window.__pinpointLoad, window.__pinpointRunsBegun || 0]")


def wait_for_run(page, after: list | None = None) -> None:
    """Until a script run begun after ``after`` (``runs_begun``; None: since the page's load) has ended, the state
    back at 'notRunning': after a ``goto``, its first run; after a click, the run it started. No clock of its own: a
    loaded machine can take minutes for a page, and the test's pytest-timeout (pyproject.toml) is the one limit."""
    page.wait_for_function(RUN_ENDED, arg=after, polling=50, timeout=0)


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
        yield url
    finally:
        process.terminate()
        process.wait(10)
        if log:
            out.close()
