"""The worker/client machinery, in real spawned processes, with a CPU stand-in for the GPU service."""

import sys
import time
import types

import pytest

from gpu.core.errors import ValidationError, WorkerError
from gpu.service.client import WorkerClient, WorkerUnavailable

FAKE = "tests.fake_service:FakeService"


@pytest.fixture
def client():
    c = WorkerClient(service=FAKE, start_timeout=60)
    yield c
    c.close()


def test_jobs_from_sessions_run_one_at_a_time_in_order(client):
    first = client.submit("steps", {"n": 10, "seconds": 0.05}, session="alice")
    second = client.submit("steps", {"n": 2}, session="bob")
    third = client.submit("echo", {"value": 3}, session="carol")
    assert second.queued_ahead == 1 and third.queued_ahead == 2
    assert client.queued_ahead(third) == 2
    assert third.outcome()["value"] == 3
    assert first.state == second.state == third.state == "done"
    assert first.total == 10 and first.done == 10  # progress streamed back


def test_rows_arrive_while_the_job_is_still_running(client, tmp_path):
    """Progressive delivery: each row the service hands to progress.row reaches the handle before the result."""
    release = tmp_path / "release"
    job = client.submit("rows", {"n": 3, "release": str(release)})
    deadline = 200
    while len(job.rows) < 3 and deadline:
        job.wait(0.05)
        deadline -= 1
    assert job.rows == [{"point": 0}, {"point": 1}, {"point": 2}]
    assert not job.finished and job.state == "running"  # the rows came first; the job has not ended
    release.write_text("go")
    assert job.outcome() == {"points": 3}


def test_a_sessions_new_job_cancels_its_running_job(client):
    long_job = client.submit("steps", {"n": 200, "seconds": 0.05}, session="talk")
    while long_job.state != "running" or long_job.done < 2:
        long_job.wait(0.02)
    replacement = client.submit("echo", {"value": 1}, session="talk")
    assert replacement.outcome()["value"] == 1
    assert long_job.state == "cancelled" and long_job.done < 50
    with pytest.raises(WorkerError, match="cancelled"):
        long_job.outcome()


def test_a_sessions_new_job_drops_its_queued_job(client):
    blocker = client.submit("steps", {"n": 5, "seconds": 0.05}, session="other")
    queued = client.submit("echo", {"value": 1}, session="me")
    newer = client.submit("echo", {"value": 2}, session="me")
    assert queued.state == "cancelled"
    assert newer.outcome()["value"] == 2 and blocker.outcome()["points"] == 5


def test_validation_errors_come_back_as_reasons(client):
    with pytest.raises(ValidationError) as refused:
        client.run("invalid")
    assert refused.value.reasons == ["size 0 B is too small"]
    assert client.run("echo", {"value": 5})["value"] == 5  # same worker carries on
    assert client.restarts == 0


def test_a_sticky_error_fails_that_job_only_and_a_fresh_worker_takes_over(client):
    pid = client.run("echo")["pid"]
    with pytest.raises(WorkerError) as failure:
        client.run("sticky")
    assert failure.value.fatal and "illegal memory access" in str(failure.value)
    after = client.run("echo")
    assert after["pid"] != pid and client.restarts == 1


def test_a_recoverable_error_keeps_the_worker(client):
    pid = client.run("echo")["pid"]
    with pytest.raises(WorkerError) as failure:
        client.run("recoverable")
    assert not failure.value.fatal
    assert client.run("echo")["pid"] == pid and client.restarts == 0


def test_a_worker_that_dies_mid_job_is_replaced(client):
    pid = client.run("echo")["pid"]
    with pytest.raises(WorkerError, match="died during this job"):
        client.run("crash")
    assert client.run("echo")["pid"] != pid


def test_a_worker_that_cannot_start_says_why():
    with pytest.raises(WorkerUnavailable, match="no CUDA device"):
        WorkerClient(service=FAKE, service_options={"fail_start": True}, start_timeout=60)


def test_close_cancels_pending_jobs():
    client = WorkerClient(service=FAKE, start_timeout=60)
    client.submit("steps", {"n": 20, "seconds": 0.05}, session="a")
    pending = client.submit("echo", {}, session="b")
    client.close()
    assert pending.state == "cancelled"
    with pytest.raises(WorkerUnavailable):
        client.submit("echo")


def test_the_worker_starts_when_main_is_an_app_script(tmp_path, monkeypatch):
    # Streamlit installs the running app script as __main__; spawn must not re-run it in the worker.
    script = tmp_path / "app_script.py"
    script.write_text("raise SystemExit('the app script ran inside the worker')\n")
    fake_main = types.ModuleType("__main__")
    fake_main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    client = WorkerClient(service=FAKE, start_timeout=60)
    try:
        assert client.run("echo", {"value": 7})["value"] == 7
    finally:
        client.close()
    assert sys.modules["__main__"] is fake_main


@pytest.mark.slow
def test_a_worker_started_from_a_thread_that_ends_keeps_serving():
    """Streamlit starts the worker on a script-run thread that ends at once: the worker must outlive that thread."""
    import threading
    import time

    started = {}
    thread = threading.Thread(target=lambda: started.setdefault("client", WorkerClient(service=FAKE, start_timeout=60)))
    thread.start()
    thread.join()
    client = started["client"]
    try:
        time.sleep(2.5)  # longer than the worker's watch on its parent takes to notice anything
        assert client.run("echo", {"value": 7})["value"] == 7 and client.restarts == 0
    finally:
        client.close()


@pytest.mark.slow
def test_a_worker_whose_parent_is_killed_exits():
    """kill -9 of the app (or of a fleet's Dask worker) must not leave its worker process holding the GPU."""
    import os
    import signal
    import subprocess
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    parent = subprocess.Popen(
        [sys.executable, "-c", "from gpu.service.client import WorkerClient; import time; "
         f"c = WorkerClient(service={FAKE!r}, start_timeout=60); print(c.worker_pid, flush=True); time.sleep(120)"],
        cwd=root, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(root)})
    worker = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return
        if Path(f"/proc/{worker}/stat").exists() and Path(f"/proc/{worker}/stat").read_text().split()[2] == "Z":
            return  # exited; only its zombie waits for init to reap it
        time.sleep(0.2)
    os.kill(worker, signal.SIGKILL)
    raise AssertionError(f"worker {worker} outlived its killed parent by 10 s")


def test_a_worker_marks_itself_as_pinpoints_while_it_lives(client):
    """Another worker's witness reads the mark: a PinPoint worker beside it is waiting its turn, not sharing."""
    from gpu.core import gpu_workers

    assert client.submit("echo", {"value": 1}).outcome()["value"] == 1
    pid = client.worker_pid
    assert pid in gpu_workers.marked()
    client.close()
    deadline = time.monotonic() + 10
    while pid in gpu_workers.marked() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid not in gpu_workers.marked()
