"""A fleet's store writes run on a thread of their own (``gpu.fleet.stores``): a GPU's next run starts while its last
run's frame is written, the writes keep their order and stay one run each, and a refused write is still said (the run
measured but not stored) and its GPU goes on."""

from __future__ import annotations

import json
import threading
import time

import pandas as pd
import pytest
from distributed import Client

from gpu.core.errors import StoreError
from gpu.experiments import suites
from gpu.fleet import run as fleet_run
from gpu.fleet.progress import Progress
from gpu.fleet.stores import StoreQueue
from gpu.results.exchange.catalog import Catalog
from gpu.results.persistence.store import RunStore
from tests.simulated_fleet import board_uuid
from tests.test_fleet import SIMULATED, Cluster

SUITE = """profile = "interactive"
timeout_s = 60
[[run]]
experiment = "reduction"
[run.params]
sizes = [268435456]
variants = ["warp_shuffle"]
[[run]]
experiment = "host_latency"
[run.params]
sizes = [1048576]
variants = ["mapped"]
"""


class Run:
    """A suite run as the queue reads it: its request (checked) and its GPUs."""

    gpus = "one"

    def __init__(self, experiment: str):
        self.experiment = experiment

    def checked(self):
        return suites.parse(SUITE).run_for(self.experiment).checked()


class GatedCatalog:
    """A catalog whose writes wait for ``gate`` (the first one) and record the order they were made in."""

    def __init__(self, refuse: str = ""):
        self.gate, self.order, self.refuse = threading.Event(), [], refuse

    def save(self, frame, *args, **kwargs):
        experiment = str(frame["experiment"].iloc[0])
        if not self.order:
            assert self.gate.wait(10)
        self.order.append(experiment)
        if experiment == self.refuse:
            raise StoreError(f"{experiment} refused")
        return [experiment]


def frame(experiment: str) -> pd.DataFrame:
    return pd.DataFrame({"experiment": [experiment], "run_id": ["r"]})


def test_writes_return_at_once_keep_their_order_and_are_read_back_in_it():
    catalog = GatedCatalog(refuse="host_latency")
    queue = StoreQueue(catalog, "f1", suites.parse(SUITE))
    try:
        started = time.monotonic()
        for experiment in ("reduction", "host_latency"):
            queue.put(object(), Run(experiment), frame(experiment), 1.0)
        assert time.monotonic() - started < 1.0  # the loop goes on while the first write waits
        assert queue.pending and queue.finished() == [] and catalog.order == []
        catalog.gate.set()
        written = queue.finished(wait_all=True)
    finally:
        queue.close()
    assert [w.run.experiment for w in written] == ["reduction", "host_latency"] == catalog.order
    assert written[0].future.result() == ["reduction"]
    with pytest.raises(StoreError, match="host_latency refused"):  # the loop reads the refusal, and says it
        written[1].future.result()
    assert not queue.pending


class SlowFirstSave(Catalog):
    """The real store, its first write made slow (a loaded database server): when each write began and ended."""

    def __init__(self, store):
        super().__init__(store)
        self.writes: list[tuple[str, float, float]] = []

    def save(self, frame, *args, **kwargs):
        began = time.time()
        if not self.writes:
            time.sleep(3.0)
        try:
            return super().save(frame, *args, **kwargs)
        finally:
            self.writes.append((str(frame["experiment"].iloc[0]), began, time.time()))


@pytest.mark.slow  # a Dask scheduler and a worker, each its own process
def test_a_gpus_next_run_starts_while_its_last_run_is_being_stored(tmp_path, monkeypatch):
    log = tmp_path / "jobs.jsonl"
    cluster = Cluster(tmp_path)
    try:
        cluster.add_worker(0, PINPOINT_SIM_LOG=log)
        cluster.wait_for_workers(1)
        monkeypatch.setenv("PINPOINT_WORKER_SERVICE", SIMULATED)
        catalog = SlowFirstSave(RunStore(f"sqlite:///{tmp_path}/runs.sqlite"))
        with Client(cluster.address, timeout=20) as client:
            result = fleet_run.run_fleet(client, suites.parse(SUITE, name="stores"), catalog, "stores-1", SIMULATED,
                                         progress=Progress(open("/dev/null", "w")))  # noqa: SIM115
    finally:
        cluster.stop()
    assert result.exit_code == 0 and result.runs_stored == 2
    assert [w[0] for w in catalog.writes] == ["reduction", "host_latency"]
    jobs = {j["experiment"]: j for j in map(json.loads, log.read_text().splitlines())}
    first_write_ended = catalog.writes[0][2]
    assert jobs["host_latency"]["start"] < first_write_ended  # measured while the reduction's frame was written
    stored = RunStore(f"sqlite:///{tmp_path}/runs.sqlite").runs(fleet_id="stores-1")
    assert sorted(stored["experiment"]) == ["host_latency", "reduction"]
    assert set(stored["gpu_uuid"]) == {board_uuid(0)}


def test_a_run_that_measured_no_point_is_said_stored_without_a_run_id():
    """A run may measure no point (e.g. device copies of the L2 on a board whose L2 holds none of the sizes): its empty
    frame is said as stored with 0 points, never an IndexError that stopped the whole fleet command."""
    from concurrent.futures import Future

    from gpu.fleet.stores import StoreWrite
    from gpu.fleet.types import FleetGpu, FleetResult

    gpu = FleetGpu(worker="tcp://127.0.0.1:1", name="GPU 0")
    run = suites.parse(SUITE, "night.toml", "night").runs[0]
    done = Future()
    done.set_result([])
    events = []
    progress = Progress(stream=None)
    progress.event = events.append
    result = FleetResult(fleet_id="f-1", suite="night", gpus=[gpu])
    fleet_run._stored(StoreWrite(gpu, run, pd.DataFrame(columns=["run_id"]), 1.25, done), result, progress)
    assert gpu.done == ["reduction"] and result.rows_stored == 0
    assert len(events) == 1 and "reduction stored (0 points in 1.2 s)" in events[0], events
