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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_app(log: Path | None = None, ready: str | None = None, **env):
    """The app in replay mode with ``env`` added; yields its address. The rest of its settings come from the
    committed .streamlit/config.toml, which is what the tests check; PINPOINT_DB_URL is the test session's
    throwaway store (conftest) unless ``env`` names another. Its output goes to ``log`` (a file of the test's) or a
    pipe; with ``ready`` (and a log), it is yielded only once that text is in its output as well."""
    port = free_port()
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
