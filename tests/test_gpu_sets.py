"""Device sets through real spawned worker processes (a CPU stand-in pretending a node of 2 or 8 GPUs): a job on a set
holds every GPU of it, jobs on overlapping sets never measure at once, jobs on disjoint sets do, and a cancelled or
crashed job gives its GPUs back. Each fake job logs its start and end (one monotonic clock for every process), and
the assertions are about order and overlap, never durations."""

import json
import threading
import time
from collections import defaultdict
from itertools import combinations

import pytest

from gpu.core.errors import DeviceNotFound, WorkerError
from gpu.service import backends
from gpu.service.client import WorkerClient
from gpu.service.locks import GpuLocks
from tests.fake_service import GpuSetService

SERVICE = "tests.fake_service:GpuSetService"


class Workers:
    """Worker clients on pretend nodes, one per (node size, device set), kept for the module's tests (each start is a
    process spawn) and sharing one lock table, as every client of the app's process does."""

    def __init__(self):
        self.locks, self.clients, self._guard = GpuLocks(), {}, threading.Lock()

    def start(self, gpu_count: int, devices) -> WorkerClient:
        return WorkerClient(SERVICE, {"devices": devices, "gpu_count": gpu_count}, start_timeout=60, locks=self.locks)

    def get(self, gpu_count: int, *sets) -> list[WorkerClient]:
        missing = [s for s in sets if (gpu_count, str(s)) not in self.clients]
        threads = [threading.Thread(target=lambda s=s: self.clients.__setitem__((gpu_count, str(s)),
                                                                                self.start(gpu_count, s)))
                   for s in missing]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        return [self.clients[(gpu_count, str(s))] for s in sets]

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


class Node:
    """A pretend node of ``gpu_count`` GPUs for one test: its workers, and the log its jobs write."""

    def __init__(self, workers: Workers, tmp_path, gpu_count: int = 2):
        self.pool, self.gpu_count, self.tmp_path, self.log = workers, gpu_count, tmp_path, tmp_path / "jobs.log"

    def workers(self, *sets) -> list[WorkerClient]:
        return self.pool.get(self.gpu_count, *sets)

    def measure(self, client: WorkerClient, tag: str, hold: bool = False, **job):
        """A job that measures until released (``hold``), else for a moment."""
        release = self.tmp_path / f"release-{tag}"
        return client.submit("measure", {"tag": tag, "log": str(self.log), "release": str(release),
                                         "seconds": 120 if hold else 0.05, **job}, session=tag)

    def release(self, tag: str) -> None:
        (self.tmp_path / f"release-{tag}").write_text("go")

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def started(self, tag: str) -> bool:
        return any(e["tag"] == tag and e["event"] == "start" for e in self.events())

    def intervals(self) -> dict[str, tuple[float, float, list[int]]]:
        spans: dict[str, dict] = defaultdict(dict)
        for e in self.events():
            spans[e["tag"]][e["event"]] = e["t"]
            spans[e["tag"]]["gpus"] = e["gpus"]
        return {tag: (s["start"], s.get("end", float("inf")), s["gpus"]) for tag, s in spans.items()}


@pytest.fixture(scope="module")
def workers():
    pool = Workers()
    yield pool
    pool.close()


@pytest.fixture
def node(workers, tmp_path):
    pretend = Node(workers, tmp_path)
    yield pretend
    for tag in pretend.intervals():  # a job that a failed test left measuring is let go: the next test starts free
        pretend.release(tag)
    until(lambda: not workers.locks.busy())


def until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


def overlapping(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_a_worker_on_a_set_holds_every_gpu_of_it(node):
    pair, one = node.workers([0, 1], "GPU-00000001")
    assert pair.gpu_indices == [0, 1] and one.gpu_indices == [1]
    assert pair.gpu_claim().keys == ("GPU-00000000-1111-4222-8333-4444000000a0",
                                     "GPU-00000001-1111-4222-8333-4444000000a1")


def test_a_job_on_one_gpu_of_a_measuring_pair_waits_and_says_for_what(node):
    pair, one = node.workers([0, 1], [1])
    first = node.measure(pair, "pair", hold=True)
    until(lambda: node.started("pair"))
    second = node.measure(one, "one")
    until(lambda: second.waiting)
    assert second.waiting == "waiting for GPU 1: a job on GPUs 0,1 is measuring"
    assert second.queue_text() == second.waiting and one.queued_ahead(second) == 1
    assert not second.wait(0.5) and second.state == "queued" and not node.started("one")
    node.release("pair")
    assert second.outcome() == {"tag": "one", "gpus": [1]} and first.outcome()["gpus"] == [0, 1]
    spans = node.intervals()
    assert spans["one"][0] >= spans["pair"][1]  # it started only after the pair ended
    assert second.waiting == "" and second.queued_ahead == 0


def test_the_next_job_on_a_gpu_starts_only_once_the_last_one_freed_its_buffers(node):
    """The page draws a finished job at once, but its worker frees what it allocated afterwards: the GPU stays held
    until then, so a job of another worker never measures beside the freeing."""
    pair, one = node.workers([0, 1], [1])
    first = node.measure(pair, "pair", free_seconds=0.5)
    until(lambda: node.started("pair"))
    second = node.measure(one, "one")
    first.outcome()
    second.outcome()
    freed = next(e["t"] for e in node.events() if e["tag"] == "pair" and e["event"] == "freed")
    assert node.intervals()["one"][0] >= freed


def test_jobs_on_disjoint_gpus_measure_at_the_same_time(node):
    zero, one = node.workers([0], [1])
    long = node.measure(zero, "zero", hold=True)
    until(lambda: node.started("zero"))
    assert node.measure(one, "one").outcome()["gpus"] == [1]  # done while GPU 0 still measures
    assert not long.finished and long.state == "running"
    node.release("zero")
    long.outcome()
    spans = node.intervals()
    assert overlapping(spans["zero"], spans["one"])


def test_many_jobs_on_overlapping_sets_of_an_eight_gpu_node_never_share_a_gpu(node):
    node.gpu_count = 8
    sets = [[0, 1], [1, 2], [2, 3, 4, 5, 6, 7, 0], [7, 6]]
    clients = node.workers(*sets)
    assert clients[2].gpu_indices == [0, 2, 3, 4, 5, 6, 7]
    jobs = [node.measure(client, f"w{w}-{n}", seconds=0.02) for n in range(4) for w, client in enumerate(clients)]
    for job in jobs:
        assert job.wait(120), "a job never ran: the locks deadlocked"
        job.outcome()
    spans = node.intervals()
    assert len(spans) == len(jobs)
    for (a, span_a), (b, span_b) in combinations(spans.items(), 2):
        if set(span_a[2]) & set(span_b[2]):
            assert not overlapping(span_a, span_b), f"{a} and {b} measured on a shared GPU at once"


def test_cancelling_a_measuring_pair_lets_the_waiting_job_run(node):
    pair, zero = node.workers([0, 1], [0])
    first = node.measure(pair, "pair", hold=True)
    until(lambda: node.started("pair"))
    second = node.measure(zero, "zero")
    until(lambda: second.waiting == "waiting for GPU 0: a job on GPUs 0,1 is measuring")
    pair.cancel(first)
    assert second.outcome()["gpus"] == [0]
    assert first.state == "cancelled"
    assert node.measure(pair, "again").outcome()["gpus"] == [0, 1]  # nothing of the pair's GPUs stayed held


def test_a_waiting_pair_that_is_replaced_gives_back_the_gpu_it_took(node):
    """The pair takes GPU 0, then waits for GPU 1; replaced by its session's next request, it gives GPU 0 back and a
    job on GPU 0 runs while GPU 1 still measures."""
    pair, zero, one = node.workers([0, 1], [0], [1])
    busy = node.measure(one, "one", hold=True)
    until(lambda: node.started("one"))
    waiting_pair = node.measure(pair, "pair")
    until(lambda: waiting_pair.waiting == "waiting for GPU 1: a job on GPU 1 is measuring")
    behind = node.measure(zero, "zero")
    until(lambda: behind.waiting == "waiting for GPU 0: a job on GPUs 0,1 holds it while it waits for GPU 1")
    replacement = pair.submit("echo", {"value": 1}, session="pair")  # the same session asks for something else
    with pytest.raises(WorkerError, match="cancelled"):
        waiting_pair.outcome()
    assert behind.outcome()["gpus"] == [0] and not busy.finished  # GPU 0 measured while GPU 1 still did
    node.release("one")
    assert busy.outcome()["gpus"] == [1] and replacement.outcome()["value"] == 1
    assert not node.started("pair")


@pytest.mark.parametrize("failure", ["crash", "sticky"])
def test_a_job_whose_worker_dies_gives_its_gpus_back(node, failure):
    """A worker killed mid-job, or one that reports a sticky CUDA error and exits: either way its GPUs come back."""
    pair, one = node.workers([0, 1], [1])
    pid, restarts = pair.run("echo")["pid"], pair.restarts
    doomed = node.measure(pair, "pair", crash=True) if failure == "crash" else pair.submit("sticky", {})
    until(lambda: doomed.state != "queued")  # it holds both GPUs
    waiting = node.measure(one, "one", hold=True)
    with pytest.raises(WorkerError) as failed:
        doomed.outcome()
    assert failed.value.fatal
    until(lambda: node.started("one"))  # the pair's GPUs came back although its worker died
    node.release("one")
    assert waiting.outcome()["gpus"] == [1]
    again = pair.run("measure", {"tag": "again", "log": str(node.log), "seconds": 0.01})
    assert again["gpus"] == [0, 1] and pair.run("echo")["pid"] != pid and pair.restarts == restarts + 1


def test_closing_a_worker_whose_job_waits_for_a_gpu_cancels_that_job(node):
    [one] = node.workers([1])
    pair = node.pool.start(2, [0, 1])  # its own, since this test closes it
    busy = node.measure(one, "one", hold=True)
    until(lambda: node.started("one"))
    waiting = node.measure(pair, "pair")
    until(lambda: waiting.waiting)
    pair.close()
    with pytest.raises(WorkerError, match="shut down"):
        waiting.outcome()
    node.release("one")
    busy.outcome()


# --- the live backend on a set ------------------------------------------------------------------------------------
@pytest.fixture
def fake_node(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    monkeypatch.setenv("PINPOINT_WORKER_SERVICE", SERVICE)
    monkeypatch.setenv("PINPOINT_FAKE_GPUS", "8")
    opened = []
    yield opened
    for backend in opened:
        backend.client.close()


@pytest.mark.slow
def test_a_live_backend_on_a_pair_or_on_all_gpus_names_its_set(fake_node):
    pair = backends.open_live(devices="3,GPU-00000002")
    fake_node.append(pair)
    assert pair.indices == [2, 3] and [g["uuid"][-8:] for g in pair.device_set] == ["000000a2", "000000a3"]
    assert pair.label() == "Live on GPUs 2,3 · NVIDIA H100 80GB HBM3 · node-0"
    everything = backends.open_live(devices="all", gpus=pair.gpus)  # a known listing: no probe of the machine
    fake_node.append(everything)
    assert everything.indices == list(range(8)) and len(everything.device_set) == 8
    one, reason = backends.start_live(devices=[5])
    fake_node.append(one)
    assert reason == "" and one.indices == [5] and one.label() == "Live on NVIDIA H100 80GB HBM3 · …000000a5 · node-0"


@pytest.mark.parametrize(("devices", "choice", "message"), [
    ("2,2", {}, "'2,2' names GPU 2 twice; name each GPU once; the GPUs are: 0 · NVIDIA H100 80GB HBM3 · …000000a0"),
    ("9", {}, "no GPU '9' here; the GPUs are: 0 · NVIDIA H100"),
    ("0,1,2,3,4,5,6,7,8", {}, "'0,1,2,3,4,5,6,7,8' names 9 GPUs; this machine has 8: 0 · NVIDIA H100"),
    (" , ", {}, "',' names no GPU; give indices (0,1), board UUIDs or 'all'"),
    ("4", {"need": 2, "job": "the peers experiment"}, "'4' names 1 GPU; the peers experiment needs two;"),
])
def test_a_bad_set_for_a_live_backend_is_one_line(fake_node, devices, choice, message):
    listed = GpuSetService.visible_gpus(8)  # as a worker's hello lists them
    backend, reason = backends.start_live(devices=devices, gpus=listed, **choice)
    assert backend is None and reason.startswith(message) and "\n" not in reason
    with pytest.raises(DeviceNotFound):
        backends.open_live(devices=devices, gpus=listed, **choice)


def test_a_bad_set_is_refused_from_the_machines_own_listing(fake_node):
    """Without a listing at hand, the GPUs are asked in a spawned process; nothing is started for a bad set."""
    backend, reason = backends.start_live(devices="1,1,")
    assert backend is None and reason.startswith("'1,1,' names GPU 1 twice; name each GPU once; the GPUs are: 0 · ")
    assert reason.endswith("7 · NVIDIA H100 80GB HBM3 · …000000a7 · node-0")


def test_a_pair_on_a_one_gpu_machine_names_the_one_gpu(fake_node, monkeypatch):
    monkeypatch.setenv("PINPOINT_FAKE_GPUS", "1")
    backend, reason = backends.start_live(devices=None, need=2, job="the peers experiment")
    assert backend is None
    assert reason == ("the peers experiment needs two GPUs; this machine has 1: "
                      "0 · NVIDIA H100 80GB HBM3 · …000000a0 · node-0")


def test_one_gpu_and_a_set_at_once_is_refused(fake_node):
    with pytest.raises(DeviceNotFound, match="give one GPU or a set of GPUs, not both"):
        backends.open_live("0", devices="0,1")
