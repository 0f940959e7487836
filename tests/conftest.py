import os
import subprocess
import sys
import threading
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@lru_cache(maxsize=1)
def gpu_unavailable_reason() -> str | None:
    """Why GPU tests cannot run here, or None. Probed in a subprocess: the test process stays CUDA-free."""
    try:
        import pycuda  # noqa: F401
    except ImportError:
        return "PyCUDA is not installed (GPU extra: requirements-gpu.txt)"
    probe = subprocess.run(
        [sys.executable, "-c", "import pycuda.driver as d; d.init(); print(d.Device.count())"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    if probe.returncode != 0 or not probe.stdout.strip().isdigit() or int(probe.stdout.strip()) == 0:
        return "no CUDA device: " + (probe.stderr.strip().splitlines() or ["none found"])[-1]
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:  # a browser test starts Chromium and drives whole pages: always in the slow set
        if "browser" in item.keywords:
            item.add_marker(pytest.mark.slow)
    reason = gpu_unavailable_reason() if any("gpu" in item.keywords for item in items) else None
    if reason:
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def live_backend():
    """One worker for the GPU tests that share it. Started under the machine's GPU lock folder, as every GPU test's
    own workers are (tests/gpu/conftest.py; a session fixture starts before that per-test setting): a worker reads
    the folder once, as it starts, to mark itself and to know PinPoint's other workers by their marks, so one that
    started elsewhere named the app's idle worker as a process sharing its GPU."""
    from gpu.service import host_locks
    from gpu.service.backends import LiveBackend
    from gpu.service.client import WorkerClient

    with pytest.MonkeyPatch.context() as env:
        env.setenv(host_locks.LOCK_DIR_ENV, MACHINE_LOCK_DIR or host_locks.DEFAULT_LOCK_DIR)
        client = WorkerClient()
    yield LiveBackend(client)
    client.close()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """One PinPoint server in replay mode for the browser tests that need nothing else (``streamlit_app``)."""
    from tests.browser_helper import streamlit_app

    store = tmp_path_factory.mktemp("server-store") / "runs.sqlite"
    with streamlit_app(PINPOINT_DB_URL=f"sqlite:///{store}") as url:  # its own store, whichever test starts it
        yield url


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium per browser test module (Playwright's sync API runs one at a time), and the folder its
    screenshots go to."""
    from playwright.sync_api import sync_playwright

    from tests.browser_helper import CHROMIUM, FLAGS, SHOTS

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


MACHINE_LOCK_DIR: str | None = None  # PINPOINT_LOCK_DIR as the session found it


def pytest_configure(config):
    # Tests never touch the user's own runs store: a throwaway SQLite file for the session's start, and each test its
    # own (``own_store``) on top of it.
    if "PINPOINT_DB_URL" not in os.environ:
        import tempfile

        folder = tempfile.mkdtemp(prefix="pinpoint-test-store-")
        os.environ["PINPOINT_DB_URL"] = f"sqlite:///{folder}/runs.sqlite"
    # Nor the machine's GPU locks: simulated boards lock files of this session's own folder, so test sessions side by
    # side never wait for each other; GPU tests take the machine's (tests/gpu/conftest.py).
    global MACHINE_LOCK_DIR
    MACHINE_LOCK_DIR = os.environ.get("PINPOINT_LOCK_DIR")
    import tempfile

    os.environ["PINPOINT_LOCK_DIR"] = tempfile.mkdtemp(prefix="pinpoint-test-locks-")


@pytest.fixture(autouse=True)
def own_store(monkeypatch, tmp_path_factory):
    """Each test gets its own empty runs store (PINPOINT_DB_URL): what one test saves is never seen by another, so no
    test's result depends on which tests ran before it. A test that wants another store sets its own on top."""
    monkeypatch.setenv("PINPOINT_DB_URL", f"sqlite:///{tmp_path_factory.mktemp('own-store')}/runs.sqlite")


def _postgres_bin() -> Path | None:
    import shutil

    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory):
    """A throwaway PostgreSQL server: initdb in a temp dir, loopback only, a random port, stopped at the end.
    Skipped with the reason where PostgreSQL is not installed (``make test`` installs it when root)."""
    import pwd
    import socket

    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (make test installs Debian's postgresql when run as root)")
    run_as: list[str] = []
    folder = tmp_path_factory.mktemp("postgres")
    if os.geteuid() == 0:  # the server refuses to run as root: run it as the postgres user
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server as")
        os.chmod(folder, 0o777)
        for parent in folder.parents:
            if parent == Path("/"):
                break
            os.chmod(parent, os.stat(parent).st_mode | 0o011)
        os.chown(folder, user.pw_uid, user.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data = folder / "data"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    init = subprocess.run(run_as + [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                                    "-E", "UTF8", "--no-instructions"], capture_output=True, text=True, timeout=120)
    if init.returncode != 0:
        pytest.skip(f"initdb failed: {init.stderr.strip()[-300:]}")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    start = subprocess.run(run_as + [str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l",
                                     str(folder / "log"), "-w", "start"], capture_output=True, text=True, timeout=120)
    if start.returncode != 0:
        pytest.skip(f"PostgreSQL did not start: {start.stderr.strip()[-300:]}")
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(run_as + [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)


def new_postgres_database(base: str) -> str:
    """A fresh, empty database on the throwaway server of ``postgres_url``; its URL."""
    import time

    import sqlalchemy as sa

    name = f"t{os.getpid()}_{time.monotonic_ns() % 10**12}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base.rsplit("/", 1)[0] + f"/{name}"


def wait_until(condition, timeout: float = 10.0) -> None:
    """Poll ``condition`` every 10 ms until it holds; AssertionError after ``timeout`` seconds."""
    event = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        event.wait(0.01)
    raise AssertionError("timed out")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def store_url(request, tmp_path):
    """A fresh, empty runs store's URL: a SQLite file of the test's, then a database on the session's PostgreSQL
    server (``postgres_url``, started once for the whole session), so the test runs on both. The PostgreSQL half of
    an AppTest doubles its time: it is in the slow set, which ``make test`` runs too."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.sqlite"
    return new_postgres_database(request.getfixturevalue("postgres_url"))
