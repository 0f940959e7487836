"""One measurement per GPU across the machine's processes (gpu.service.host_locks), with real processes on a simulated
board: two are serialized, a waiter names the holder, a killed holder frees the GPU at once, a wait limit refuses in
one line, an unusable lock folder is named in one line, and a GPU worker whose parent is killed exits."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gpu.service import host_locks
from gpu.service.host_locks import HostClaim, LockFolderUnusable

ROOT = Path(__file__).resolve().parent.parent
RECORDED_SERVICE = "tests.fake_service:TwoGpuRecordedService"
RECORDED_KEY = "GPU-aaaa0000-0000-4000-8000-00000000a0a0"  # TwoGpuRecordedService's board 0


@pytest.fixture
def lock_dir(tmp_path, monkeypatch):
    folder = tmp_path / "locks"
    monkeypatch.setenv("PINPOINT_LOCK_DIR", str(folder))
    return folder


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PINPOINT_FAKE_GPUS": "1", **extra}


def _start(tag: str, log: Path, seconds: float, wait_s: float | None = None, release: Path | None = None):
    command = [sys.executable, "-m", "tests.gpu_lock_process", tag, str(log), str(seconds),
               "-" if wait_s is None else str(wait_s), str(release or "")]
    return subprocess.Popen(command, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _events(log: Path) -> dict[tuple[str, str], float]:
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return {(line["tag"], line["event"]): line["t"] for line in lines}


def _until(condition, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out")


def _measuring(lock_dir: Path, process: subprocess.Popen) -> host_locks.Holder:
    """Once ``process`` measures: the lock record it wrote, as another process reads it."""
    return _until(lambda: next((h for h in host_locks.holders() if h.pid == process.pid), None))


def test_two_processes_on_one_board_are_serialized_and_the_waiter_names_the_holder(lock_dir, tmp_path):
    log, release = tmp_path / "log.jsonl", tmp_path / "release"
    first = _start("first", log, 60.0, release=release)
    holder = _measuring(lock_dir, first)
    assert (holder.gpu, holder.purpose) == (0, "lock test first")
    second = _start("second", log, 0.2)
    waited = _until(lambda: (line := second.stdout.readline()).startswith("waiting: ") and line.strip())
    release.write_text("")
    out, err = second.communicate(timeout=120)
    assert first.wait(60) == 0 and second.returncode == 0, err
    assert out.splitlines()[-1] == "done"
    assert waited.startswith(f"waiting: GPU 0 is measuring for `lock test first` (pid {first.pid}, for ")
    assert waited.endswith(" s); waiting")
    times = _events(log)
    assert times[("first", "end")] <= times[("second", "start")]  # one after the other, never at once
    assert host_locks.holders() == []  # both gone: nothing is left held


def test_another_processs_waiting_job_is_listed_while_it_waits_and_gone_once_it_measures(lock_dir, tmp_path):
    log, release = tmp_path / "log.jsonl", tmp_path / "release"
    first = _start("first", log, 60.0, release=release)
    _measuring(lock_dir, first)
    second = _start("second", log, 60.0, release=tmp_path / "release-second")
    _until(lambda: second.stdout.readline().startswith("waiting: "))
    [waiter] = _until(lambda: [w for w in host_locks.waiters() if w.pid == second.pid])
    assert (waiter.gpu, waiter.purpose) == (0, "lock test second")
    assert waiter.waiting_text().startswith(f"`lock test second` (pid {second.pid}) is waiting for GPU 0, for ")
    assert host_locks.waiters(exclude_pid=second.pid) == []  # a process's own jobs are in its own queue
    release.write_text("")
    _until(lambda: [h for h in host_locks.holders() if h.pid == second.pid])
    assert host_locks.waiters() == []  # measuring now: no longer waiting
    (tmp_path / "release-second").write_text("")
    assert first.wait(60) == 0 and second.wait(60) == 0


def test_a_waiter_killed_with_sigkill_is_no_longer_listed(lock_dir, tmp_path):
    log = tmp_path / "log.jsonl"
    first = _start("first", log, 60.0)
    try:
        _measuring(lock_dir, first)
        second = _start("second", log, 0.1)
        _until(lambda: [w for w in host_locks.waiters() if w.pid == second.pid])
        second.send_signal(signal.SIGKILL)
        second.wait(10)
        assert host_locks.waiters() == []  # its record is no longer held: read as gone, and removed
        assert not list(lock_dir.glob("wait-*"))
    finally:
        first.kill()
        first.wait(10)


def test_a_holder_killed_with_sigkill_frees_the_gpu_at_once(lock_dir, tmp_path):
    log = tmp_path / "log.jsonl"
    first = _start("first", log, 60.0)
    _measuring(lock_dir, first)
    second = _start("second", log, 0.1)
    _until(lambda: second.stdout.readline().startswith("waiting: "))
    killed = time.monotonic()
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    _until(lambda: ("second", "start") in _events(log), timeout=30)
    assert time.monotonic() - killed < 5  # the kernel dropped the lock with its holder: nothing to clean
    assert second.wait(60) == 0


def test_a_wait_limit_refuses_in_one_line(lock_dir, tmp_path):
    log = tmp_path / "log.jsonl"
    first = _start("first", log, 30.0)
    try:
        _measuring(lock_dir, first)
        second = _start("second", log, 0.1, wait_s=0.3)
        out, err = second.communicate(timeout=120)
        assert second.returncode == host_locks.EXIT_GPU_BUSY, err
        assert out.splitlines()[-1].startswith(f"refused: GPU 0 is measuring for `lock test first` (pid {first.pid}, "
                                               "for ")
        assert out.splitlines()[-1].endswith("and stayed busy past the wait limit of 0.3 s")
        assert ("second", "start") not in _events(log)
    finally:
        first.kill()
        first.wait(10)


def test_the_runner_refused_by_its_wait_limit_says_so_in_one_line_with_exit_code_4(lock_dir, tmp_path):
    holder = HostClaim((RECORDED_KEY,), (0,), "the app (owner ada@example.org)")
    assert holder.acquire()
    try:
        done = subprocess.run([sys.executable, "-m", "gpu.bench", "transfers", "--sizes", "4KiB", "--modes", "pinned",
                               "--no-store", "--wait", "0.2", "--device", "0"], cwd=ROOT, capture_output=True,
                              text=True, timeout=120, env=_env(PINPOINT_BACKEND="auto",
                                                               PINPOINT_WORKER_SERVICE=RECORDED_SERVICE))
    finally:
        holder.release()
    assert done.returncode == 4, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: refused: GPU 0 is measuring for `the app (owner ada@example.org)` "
                           f"(pid {os.getpid()}, for ")
    assert last.endswith("and stayed busy past the wait limit of 0.2 s (--wait)")  # the runner names its flag


@pytest.mark.parametrize("value", ["-1", "soon", "1e9", "nan"])
def test_the_runner_refuses_a_bad_wait_in_one_line(value, capsys):
    from gpu import bench

    with pytest.raises(SystemExit) as exited:
        bench.parse_args(["reduction", "--wait", value])
    assert exited.value.code == 2
    assert "is not a number of seconds from 0 to 604800" in capsys.readouterr().err.splitlines()[-1]


def test_the_holders_list_names_other_processes_and_skips_a_dead_ones_record(lock_dir, tmp_path):
    first = _start("first", tmp_path / "log.jsonl", 30.0)
    try:
        _measuring(lock_dir, first)
        own = HostClaim(("GPU-own",), (1,), "this process")
        assert own.acquire()
        assert [h.pid for h in host_locks.holders()] == [first.pid, os.getpid()]
        assert [h.pid for h in host_locks.holders(exclude_pid=os.getpid())] == [first.pid]
        own.release()
    finally:
        first.kill()
        first.wait(10)
    assert host_locks.holders() == []  # its record may still be in the file; nobody holds the lock


def test_a_record_is_another_process_text_shortened_without_control_characters(lock_dir):
    claim = HostClaim(("GPU-x",), (0,), "\x1b[2Jevil " + "x" * 500)
    assert claim.acquire()
    try:
        [holder] = host_locks.holders()
        assert "\x1b" not in holder.purpose and len(holder.purpose) < 120
    finally:
        claim.release()


def test_the_lock_folder_is_shared_by_every_user(lock_dir):
    claim = HostClaim(("GPU-x",), (0,), "test")
    assert claim.acquire()
    claim.release()
    assert oct(lock_dir.stat().st_mode & 0o7777) == "0o1777"
    assert oct(next(lock_dir.iterdir()).stat().st_mode & 0o777) == "0o666"


def test_a_lock_folder_that_is_a_file_is_named_in_one_line(lock_dir):
    lock_dir.write_text("")
    with pytest.raises(LockFolderUnusable, match=f"^the GPU lock folder {lock_dir} is not a folder: set "
                                                 "PINPOINT_LOCK_DIR to a folder"):
        HostClaim(("GPU-x",), (0,), "test").acquire()


def test_a_lock_file_planted_as_a_link_is_refused_in_one_line(lock_dir, tmp_path):
    lock_dir.mkdir()
    target = tmp_path / "precious"
    target.write_text("keep")
    host_locks.lock_path(lock_dir, "GPU-x").symlink_to(target)
    refusal = "cannot open the GPU lock file .*gpu-GPU-x.lock \\(a symbolic link\\)"
    with pytest.raises(LockFolderUnusable, match=refusal):
        HostClaim(("GPU-x",), (0,), "test").acquire()
    assert target.read_text() == "keep"


def test_another_users_lock_folder_is_named_in_one_line(monkeypatch):
    base = Path(tempfile.mkdtemp(prefix="pinpoint-lock-test-"))  # in /tmp, which every user may enter
    base.chmod(0o755)
    folder = base / "theirs"
    folder.mkdir(mode=0o755)
    monkeypatch.setenv("PINPOINT_LOCK_DIR", str(folder))
    if os.geteuid() != 0:
        folder.chmod(0o555)
    read, write = os.pipe()
    child = os.fork()  # a process of another user (root may write anywhere): it tries to lock there
    if child == 0:
        try:
            if os.geteuid() == 0:
                os.setuid(65534)  # nobody
            HostClaim(("GPU-x",), (0,), "test").acquire()
            os.write(write, b"acquired")
        except LockFolderUnusable as exc:
            os.write(write, str(exc).encode())
        finally:
            os._exit(0)
    os.close(write)
    said = os.read(read, 4096).decode()
    os.waitpid(child, 0)
    mode, owner = folder.stat().st_mode & 0o777, folder.stat().st_uid
    folder.chmod(0o755)
    shutil.rmtree(base)
    assert said == (
        f"the GPU lock folder {folder} is not writable by this user (owner uid {owner}, mode "
        f"{mode:o}): set PINPOINT_LOCK_DIR to a folder that every PinPoint user of this "
        f"machine can write (mode 1777), or ask the owner of {folder} to make it so")


def test_a_gpu_worker_exits_once_its_parent_is_killed(tmp_path):
    script = ("import time\nfrom gpu.service.client import WorkerClient\n"
              "c = WorkerClient(service='tests.fake_service:FakeService')\nprint(c.worker_pid, flush=True)\n"
              "time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    os.kill(worker, 0)  # alive
    parent.kill()
    parent.wait(10)
    killed = time.monotonic()
    _until(lambda: not _alive(worker), timeout=10)
    assert time.monotonic() - killed < 10


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited (its new parent reaps it)


def _held_elsewhere(purpose: str) -> subprocess.Popen:
    """Another process holding GPU 0's lock for ``purpose`` until its stdin closes."""
    script = ("import sys\nfrom gpu.service.host_locks import HostClaim\n"
              "claim = HostClaim(('GPU-x',), (0,), sys.argv[1])\nclaim.acquire()\nprint('held', flush=True)\n"
              "sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", script, purpose], cwd=ROOT, env=_env(), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    return holder


def _queue_panel(backend):
    from pages._ui import measure

    measure.queue_panel(backend, "q")


def test_the_queue_panel_lists_other_processes_as_plain_text_and_the_apps_wait_limit(lock_dir):
    import types

    from streamlit.testing.v1 import AppTest

    holder = _held_elsewhere("[click me](https://evil.example/q) **now**")
    try:
        backend = types.SimpleNamespace(client=types.SimpleNamespace(jobs=lambda: [], wait_s=600.0))
        at = AppTest.from_function(_queue_panel, args=(backend,), default_timeout=30).run()
        assert at.expander[0].label == "GPU queue: 0 jobs · 1 other process measuring"
        listed, limit = (c.value for c in at.caption)
        assert re.fullmatch(re.escape("another process · GPU 0 is measuring for `[click me](https://evil.example/q) "
                                      f"**now**` (pid {holder.pid}, for ") + r"\d+ s\)",
                            listed.replace("\\", "").replace("\u200b", ""))  # as the reader sees it
        assert "](" not in listed and "**" not in listed  # escaped: no link, no emphasis
        assert limit == "A job here waits at most 600 s for a GPU that another process measures on, then is refused."
    finally:
        holder.stdin.close()
        holder.wait(10)
    at.run()
    assert len(at.expander) == 0  # nothing measures any more: no panel


# --- fleets: --wait, and no GPU worker outlives its Dask worker ----------------------------------------------------
QUICK_SUITE = 'profile = "interactive"\n[[run]]\nexperiment = "host_latency"\n[run.params]\nsizes = [1048576]\n' \
              'variants = ["mapped"]\n'


@pytest.mark.slow  # a Dask scheduler and worker
def test_a_fleet_run_past_its_wait_fails_naming_the_process_that_held_its_gpu(tmp_path):
    from tests.simulated_fleet import board_uuid
    from tests.test_fleet import Cluster, fleet

    cluster = Cluster(tmp_path)
    suite = tmp_path / "quick.toml"
    suite.write_text(QUICK_SUITE)
    holder = HostClaim((board_uuid(0),), (0,), "pinpoint measure transfers")
    try:
        cluster.add_worker(0)
        cluster.wait_for_workers(1)
        assert holder.acquire()
        code, out, err = fleet(f"sqlite:///{tmp_path}/runs.sqlite", str(suite), "--cluster", cluster.address,
                               "--fleet-id", "w1", "--wait", "0.5")
    finally:
        holder.release()
        cluster.stop()
    assert code == 1, err
    refusal = re.escape(f"host_latency failed: refused: GPU 0 is measuring for `pinpoint measure transfers` (pid "
                        f"{os.getpid()}, for ") + r"\d+ s\) and stayed busy past the wait limit of 0\.5 s \(--wait\)"
    assert re.search(refusal, out), out


def _gpu_worker_outlives(kill_dask_worker, client, service: str) -> float:
    """Seconds the GPU worker lived on after its Dask worker was killed (kill -9)."""
    dask_pid, gpu_pid = client.submit(_pids, service, pure=False).result(timeout=120)
    assert _alive(gpu_pid)
    kill_dask_worker(dask_pid)
    killed = time.monotonic()
    _until(lambda: not _alive(gpu_pid), timeout=15)
    return time.monotonic() - killed


def _pids(service: str):
    from tests.gpu_lock_process import worker_pids

    return worker_pids(service)


@pytest.mark.slow  # a Dask scheduler and a worker, killed
def test_a_gpu_worker_exits_when_its_tcp_dask_worker_is_killed(tmp_path):
    from distributed import Client

    from tests.test_fleet import SIMULATED, Cluster

    cluster = Cluster(tmp_path)
    try:
        cluster.add_worker(0)
        cluster.wait_for_workers(1)
        with Client(cluster.address, timeout=20) as client:
            assert _gpu_worker_outlives(lambda pid: os.kill(pid, signal.SIGKILL), client, SIMULATED) < 10
    finally:
        cluster.stop()


@pytest.mark.slow  # a LocalCluster, a worker killed
def test_a_gpu_worker_exits_when_its_local_dask_worker_is_killed(monkeypatch):
    from gpu.fleet.cluster import open_cluster
    from tests.test_fleet import SIMULATED, environment

    for name, value in environment().items():
        monkeypatch.setenv(name, value)
    with open_cluster("local", SIMULATED) as client:
        assert _gpu_worker_outlives(lambda pid: os.kill(pid, signal.SIGKILL), client, SIMULATED) < 10


def _children(pid: int) -> list[int]:
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat_file.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat_file.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def test_a_process_listing_the_gpus_exits_once_its_parent_is_killed():
    script = ("from gpu.service.client import visible_gpus\nprint('asking', flush=True)\n"
              "visible_gpus('tests.gpu_lock_process:SlowListing')\n")
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True)
    assert parent.stdout.readline() == "asking\n"
    children = _until(lambda: [pid for pid in _children(parent.pid)
                               if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()])
    time.sleep(1.0)  # the listing has started (its process imported the service)
    parent.kill()
    parent.wait(10)
    _until(lambda: not any(_alive(pid) for pid in children), timeout=10)


@pytest.mark.parametrize(("argv", "expected"), [
    (["/usr/lib/python3/site-packages/pytest/__main__.py", "-m", "gpu"], "python -m pytest -m gpu"),
    (["/opt/venv/bin/pinpoint", "measure", "transfers"], "pinpoint measure transfers")])
def test_a_process_that_names_no_purpose_is_named_by_its_command_line(monkeypatch, argv, expected):
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(host_locks, "_purpose", "")
    assert host_locks.process_purpose() == expected
