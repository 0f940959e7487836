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
def streamlit_app(**env):
    """The app in replay mode with ``env`` added; yields its address. The rest of its settings come from the
    committed .streamlit/config.toml, which is what the tests check; PINPOINT_DB_URL is the test session's
    throwaway store (conftest) unless ``env`` names another."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.fileWatcherType", "none"],
        cwd=ROOT, env={**os.environ, "PINPOINT_BACKEND": "replay", **env},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail("streamlit did not become healthy:\n" + process.stdout.read().decode()[-3000:])
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        process.wait(10)
