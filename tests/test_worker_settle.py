"""A fleet's GPU worker waits for the background work its warm-ups started (host data built on a thread) before it
says hello, so no fleet run measures beside it; the app's worker does not wait (its first Measure should not), and
a warm-up's thread that outlives the limit is named, not waited for forever. A fleet's worker warms up only the
experiments its suite measures on it. No GPU: the service's device set and the registry are stand-ins; the threads
and the waiting are real."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from gpu.fleet import task
from gpu.service import worker
from gpu.service.client import SETTLE_ENV, WARM_UPS_ENV


def registry(release: threading.Event, built: list):
    """One experiment whose warm-up starts a daemon thread building host data until ``release``, and one whose
    warm-up is done when it returns."""

    def background(gpu):
        def build():
            release.wait(10)
            built.append(time.monotonic())
        threading.Thread(target=build, name="host-data", daemon=True).start()

    def at_once(gpu):
        built.append("compiled")

    entries = []
    for name, warm_up in (("background", background), ("at_once", at_once)):
        entries.append(SimpleNamespace(module=SimpleNamespace(NAME=name),
                                       sweep_module=lambda w=warm_up: SimpleNamespace(warm_up=w)))
    return entries


@pytest.fixture(autouse=True)
def _environment(monkeypatch):
    """The variables a fleet task sets in its own process (os.environ, not monkeypatch) restored after each test."""
    for name in (SETTLE_ENV, WARM_UPS_ENV, "CUDA_VISIBLE_DEVICES"):
        monkeypatch.setenv(name, "")  # recorded, so the test's own changes are undone
        monkeypatch.delenv(name)


@pytest.fixture
def service_parts(monkeypatch):
    """GpuService's device layer stood in for: one GPU, no CUDA."""
    release, built = threading.Event(), []
    runtime = SimpleNamespace()
    monkeypatch.setattr(worker, "visible_gpus", lambda: [{"index": 0, "uuid": "GPU-x"}])
    monkeypatch.setattr(worker, "DeviceSet", lambda ordinals: SimpleNamespace(first=runtime, ordinals=ordinals))
    monkeypatch.setattr(worker, "REGISTRY", registry(release, built))
    monkeypatch.setattr(worker.GpuService, "methods", {})
    yield release, built
    release.set()


def test_a_fleet_worker_says_hello_only_once_its_warm_ups_background_work_is_done(service_parts, monkeypatch):
    release, built = service_parts
    monkeypatch.setenv(SETTLE_ENV, "1")
    threading.Timer(0.5, release.set).start()
    started = time.monotonic()
    service = worker.GpuService()
    assert built[0] == "compiled" and isinstance(built[1], float)  # the background build ended inside the start
    assert built[1] - started >= 0.4 and service.settled["still_running"] == []
    assert service.settled["waited_s"] >= 0.3 and service.warmed.keys() == {"background", "at_once"}


def test_the_apps_worker_does_not_wait_and_a_thread_past_the_limit_is_named(service_parts, monkeypatch):
    release, built = service_parts
    service = worker.GpuService()
    assert service.settled == {} and built == ["compiled"]  # hello at once, the build still running beside it
    assert service.settle(limit_s=0.2) == {"waited_s": pytest.approx(0.2, abs=0.15), "still_running": ["host-data"]}
    release.set()
    assert service.settle()["still_running"] == [] and len(built) == 2


def test_a_fleet_worker_warms_up_only_what_its_suite_measures(service_parts, monkeypatch):
    release, built = service_parts
    monkeypatch.setenv(SETTLE_ENV, "1")
    monkeypatch.setenv(WARM_UPS_ENV, "at_once,transfers")  # the background builder is not among them
    started = time.monotonic()
    service = worker.GpuService()
    assert time.monotonic() - started < 2 and built == ["compiled"] and service.warmed.keys() == {"at_once"}
    assert service.settled["still_running"] == [] and not service.warm_threads
    monkeypatch.setenv(WARM_UPS_ENV, "")  # a suite of experiments without warm-ups: none
    assert worker.GpuService().warmed == {}


def test_a_fleet_task_starts_its_gpu_worker_with_settling_asked_for(monkeypatch):
    seen = []

    class Client:
        worker_pid = 1

        def __init__(self, service, service_options=None):
            import os
            seen.append((service, service_options, os.environ.get(SETTLE_ENV), os.environ.get("CUDA_VISIBLE_DEVICES"),
                         os.environ.get(WARM_UPS_ENV)))

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(task, "WorkerClient", Client)
    monkeypatch.setattr(task, "LiveBackend", lambda client: SimpleNamespace(client=client))
    monkeypatch.setattr(task, "_BACKENDS", {})
    task.backend("svc", ["transfers", "occupancy"])
    task.node_backend("svc", ["GPU-a", "GPU-b"], ["peers"])
    assert seen == [("svc", None, "1", "0", "transfers,occupancy"),
                    ("svc", {"devices": [0, 1]}, "1", "GPU-a,GPU-b", "peers")]
    import os
    # the Dask worker's own GPU worker, started again after a hang, warms up its suite's runs as before
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0" and os.environ[WARM_UPS_ENV] == "transfers,occupancy"
