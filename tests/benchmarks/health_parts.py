"""Where a node's health time goes, run by run, with every GPU measuring at once as the fleet runs them.

``health_time.py --parts-concurrent`` runs this file as its own process: a ``LocalCluster`` fleet of the health suite
on every visible GPU (``gpu.fleet.run.run_fleet``, in this process, into a throwaway SQLite store), instrumented in
every process it has:

* the driver (this process): each run's submission, when Dask said its task ended, when the driver noticed, the
  frame's fetch, the store transaction, the next submission;
* each Dask worker (``timed_*`` below stand in for ``gpu.fleet.task``'s tasks, by reference): the task's start and
  end, the GPU worker process' start (spawn to hello), the client's locks and its wait for the job's answer;
* each GPU worker process (``TimedService``, a subclass of the service the fleet would use): its start (imports,
  CUDA context and kernel load, warm-ups, and the threads warm-ups leave running, until they end), and per job the
  provenance, the job's limits, allocation scope, each point's set-up, samples, verification and the witness's NVML
  readings before and after it, the rows, the frame, and the buffers freed after the answer.

Each process appends spans (JSON lines: where, GPU, experiment, part, start, end) to one file; ``report`` reads them
back and prints, per GPU, each run's time split into its parts, the time between its runs, and the worker's start.
Prints, never asserts.

Only this benchmark uses it: nothing here changes what the fleet measures (the same suite, sweeps and profile).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import socket
import sys
import tempfile
import threading
import time
import types
from pathlib import Path

LOG_ENV = "PINPOINT_PARTS_LOG"
BASE_ENV = "PINPOINT_TIMED_BASE"  # the service the fleet would use, which TimedService extends
SETTLE_ENV = "PINPOINT_PARTS_SETTLE"  # "1": the worker waits for its warm-ups' threads before it says hello
DEFAULT_SERVICE = "gpu.service.worker:GpuService"
SETTLE_LIMIT_S = 60.0  # the longest a settling worker waits for one warm-up thread
# The process' current job (experiment), for spans made deep inside it or on its threads (the witness's): a process
# runs one job at a time.
_CONTEXT = types.SimpleNamespace(experiment="")
_WHERE = {"where": "driver", "gpu": ""}


def log(part: str, start: float, end: float | None = None, experiment: str | None = None, gpu: str | None = None,
        **extra) -> None:
    """One span (or an instant, without ``end``) into the shared log: one JSON line, appended whole."""
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    line = {"where": _WHERE["where"], "pid": os.getpid(), "gpu": gpu if gpu is not None else _WHERE["gpu"],
            "experiment": experiment if experiment is not None else _CONTEXT.experiment,
            "part": part, "start": start, "end": end if end is not None else start, **extra}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


class _Tally:
    """Parts that happen at every sample (the samples, the stop rule, the telemetry between samples), added up in
    memory and logged as one line a point (``seconds``, ``count``): a line appended per sample cost ~15-30 µs of file
    work between samples, which the job's "rest" then counted as PinPoint's."""

    def __init__(self):
        self.parts: dict[str, list] = {}  # part → [seconds, count, first start, last end]

    def add(self, part: str, start: float, end: float) -> None:
        tally = self.parts.get(part)
        if tally is None:
            self.parts[part] = [end - start, 1, start, end]
        else:
            tally[0] += end - start
            tally[1] += 1
            tally[3] = end

    def flush(self) -> None:
        parts, self.parts = self.parts, {}
        for part, (seconds, count, start, end) in parts.items():
            log(part, start, end, seconds=seconds, count=count)


_TALLY = _Tally()


def _seconds(s: dict) -> float:
    """A span's seconds: its own, or the sum of the calls a tallied line stands for."""
    return s.get("seconds", s["end"] - s["start"])


@contextlib.contextmanager
def span(part: str, **extra):
    started = time.time()
    try:
        yield
    finally:
        log(part, started, time.time(), **extra)


def _wrap(owner, name: str, part: str) -> None:
    """``owner.name`` timed as ``part`` on every call (once: a second wrap is a no-op)."""
    original = getattr(owner, name)
    if getattr(original, "_timed", False):
        return

    def timed(*args, **kwargs):
        with span(part):
            return original(*args, **kwargs)

    timed._timed = True
    timed.__wrapped__ = original
    setattr(owner, name, timed)


# --- the GPU worker process -------------------------------------------------------------------------------------------
def _process_started() -> float:
    """This process' start, in epoch seconds (/proc: boot time plus its start in clock ticks)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


def _tally_calls(owner, name: str, part: str, unless_forced: bool = False) -> None:
    """``owner.name`` added to the tally of ``part`` at every call (``unless_forced``: not its ``force=True`` calls,
    which the witness's spans around a point already count)."""
    original = getattr(owner, name)
    if getattr(original, "_timed", False):
        return

    def tallied(*args, **kwargs):
        if unless_forced and kwargs.get("force"):
            return original(*args, **kwargs)
        started = time.time()
        try:
            return original(*args, **kwargs)
        finally:
            _TALLY.add(part, started, time.time())

    tallied._timed = True
    tallied.__wrapped__ = original
    setattr(owner, name, tallied)


def _instrument_gpu_worker() -> None:
    """Time the device layer's and the harness's parts inside this GPU worker process (class- and module-level)."""
    from gpu.device import context, telemetry, witness
    from gpu.sweeps import harness

    _wrap(context.GpuRuntime, "__init__", "start: CUDA context, kernels loaded (GpuRuntime)")
    _wrap(context.GpuRuntime, "_compile_kernels", "start: kernels built or read from the cubin cache, loaded")
    _wrap(context.GpuRuntime, "provenance", "job: provenance (facts, git commit)")
    _wrap(context.GpuRuntime, "limits", "job: limits (memory free, host memory)")
    _wrap(context.GpuRuntime, "release_after_reply", "job: buffers freed (release_after_reply)")
    _wrap(telemetry.Telemetry, "start_point", "point: witness before (NVML counters, first reading)")
    _wrap(telemetry.Telemetry, "point_summary", "point: witness after (NVML counters, last reading)")
    _wrap(witness.Witness, "_counters", "nvml: counters (PCIe replays, ECC, NVLink errors)")
    _wrap(witness.Witness, "sample", "nvml: one reading (clocks, power, processes, PCIe)")
    from gpu.core import schema, stats
    from gpu.service import worker
    from gpu.sweeps import _kernels

    _tally_calls(stats, "stop_reason", STOP_RULE)
    _tally_calls(telemetry.Telemetry, "sample", BETWEEN_SAMPLES, unless_forced=True)
    _wrap(_kernels, "measured_row", ROW)
    _wrap(worker.JobProgress, "__call__", PROGRESS)
    _wrap(worker.JobProgress, "row", PROGRESS)
    _wrap(schema, "make_frame", FRAME)
    _wrap(worker, "in_point_order", FRAME)
    original_run = harness.run
    if getattr(original_run, "_timed", False):
        return

    def timed_run(declaration, params, gpu, progress, should_cancel):
        return original_run(_timed_sweep(declaration), params, gpu, progress, should_cancel)

    timed_run._timed = True
    harness.run = timed_run  # the runners' closures look ``run`` up in the harness module at each call


def _timed_sweep(declaration):
    """``declaration`` with its generator, set-up, samples and verification timed (a subclass; nothing else changes)."""
    from gpu.sweeps import harness

    per_copy = getattr(harness, "PerCopy", None)

    def timed_sample(sample):
        def sample_once():
            started = time.time()
            try:
                return sample()
            finally:
                _TALLY.add(SAMPLES, started, time.time())
        return sample_once

    class Timed(declaration):
        def setup(self):
            with span("job: sweep set-up (setup)"):
                super().setup()

        def prepare(self, point):
            with span("point: prepare"):
                super().prepare(point)

        def measure(self, point):
            with span("point: set-up (measure: uploads, patterns, calibration)", label=point.label):
                sample = super().measure(point)
            if per_copy is not None and isinstance(sample, per_copy):
                batch_ms = sample.batch_ms

                def timed_batch(copies):
                    started = time.time()
                    try:
                        return batch_ms(copies)
                    finally:
                        _TALLY.add(SAMPLES, started, time.time())
                return dataclasses.replace(sample, batch_ms=timed_batch)  # its copies and rule kept
            return timed_sample(sample) if callable(sample) else sample

        def verify(self, point):
            _TALLY.flush()  # the point's samples, stop rule and telemetry: one line each
            with span("point: verification (verify)"):
                super().verify(point)

        def close(self):
            with span("job: sweep close"):
                super().close()

    # The harness measures what walk() yields (the declared grid's points, a group's set-up between them); a checkout
    # before the grid iterates the sweep's own points() generator.
    generator = "walk" if hasattr(declaration, "walk") else "points"

    def timed_points(self):
        points = getattr(super(Timed, self), generator)()
        while True:
            started = time.time()
            try:
                point = next(points)
            except StopIteration:
                log("point: generator (inputs, buffers, between points)", started, time.time())
                return
            log("point: generator (inputs, buffers, between points)", started, time.time(), label=point.label)
            yield point

    setattr(Timed, generator, timed_points)
    Timed.__name__ = Timed.__qualname__ = declaration.__name__
    return Timed


def _timed_service_class(base):
    """A subclass of the service class ``base`` whose start and jobs are timed into the log."""

    class TimedService(base):
        def __init__(self, *args, **kwargs):
            _WHERE["where"] = "gpu-worker"
            log("start: process spawned until this module imported (interpreter, gpu.service.worker)",
                _process_started(), _IMPORTED)
            _instrument_gpu_worker_if_gpu(base)
            before = set(threading.enumerate())
            with span("start: service built (devices, kernels, warm-ups, method hashes)"):
                super().__init__(*args, **kwargs)
            warm_threads = [t for t in threading.enumerate() if t not in before and t.is_alive()
                            and not t.name.startswith(("verify", "pinpoint-witness"))]
            for thread in warm_threads:
                started = time.time()
                if os.environ.get(SETTLE_ENV) == "1":
                    thread.join(SETTLE_LIMIT_S)
                    log(f"start: waited for warm-up thread {thread.name} (settled before hello)", started,
                        time.time())
                else:
                    threading.Thread(target=self._watch, args=(thread, started), daemon=True).start()

        @staticmethod
        def _watch(thread, started):
            thread.join()
            log(f"warm-up thread {thread.name} running beside jobs", started, time.time())

        def hello(self):
            info = super().hello()
            several = len(info.get("gpu_indices") or []) > 1  # a node run's worker holds every GPU of the node
            _WHERE["gpu"] = "node" if several else str(info.get("facts", {}).get("gpu_uuid") or "")
            now = time.time()
            settled = info.get("settled") or {}
            if settled.get("waited_s"):  # the worker itself waited for its warm-ups' threads (a fleet's, today)
                log("start: waited for the warm-ups' threads (the fleet's worker settles)", now - settled["waited_s"],
                    now, still_running=settled.get("still_running"))
            log("start: hello", now)
            return info

        def handle(self, job, progress, should_cancel):
            request = job.get("request")
            _CONTEXT.experiment = getattr(request, "experiment", job.get("kind", ""))
            try:
                with span("job: in the GPU worker (handle)"):
                    return super().handle(job, progress, should_cancel)
            finally:
                _TALLY.flush()  # a job that failed between samples

        def after_reply(self):
            with span("job: after its answer (buffers freed)"):
                getattr(super(), "after_reply", lambda: None)()

    return TimedService


def _instrument_gpu_worker_if_gpu(base) -> None:
    if base.__module__ == "gpu.service.worker":
        _instrument_gpu_worker()


_IMPORTED = time.time()
_CLASSES: dict[str, type] = {}


def __getattr__(name: str):
    """``TimedService``: the service that ``PINPOINT_TIMED_BASE`` names (GpuService by default), timed; built when a
    worker process loads it by name (``health_parts:TimedService``)."""
    if name != "TimedService":
        raise AttributeError(name)
    if name not in _CLASSES:
        from gpu.service.client import load_service_class

        _CLASSES[name] = _timed_service_class(load_service_class(os.environ.get(BASE_ENV, DEFAULT_SERVICE)))
    return _CLASSES[name]


# --- the Dask workers: gpu.fleet.task's tasks, timed ------------------------------------------------------------------
def _instrument_dask_worker() -> None:
    from gpu.service import client, jobs

    _WHERE["where"] = "dask-worker"
    _wrap(client.WorkerClient, "_start_worker", "dask: GPU worker process started (spawn until its hello)")
    _wrap(client.WorkerClient, "_measure", "client: job on the GPU worker (queued until its answer)")
    _wrap(client.WorkerClient, "_await_freed", "client: waiting for the job's buffers to be freed")
    original_run_one = client.WorkerClient._run_one
    if not getattr(original_run_one, "_timed", False):
        def run_one(self, handle):
            _CONTEXT.experiment = getattr(handle.payload.get("request"), "experiment", handle.kind)
            with span("client: dispatched until done (GPU locks, job, freed)"):
                return original_run_one(self, handle)
        run_one._timed = True
        client.WorkerClient._run_one = run_one
    original_finish = jobs.JobHandle.finish
    if not getattr(original_finish, "_timed", False):
        def finish(self, state, result=None, error=None):
            log(f"client: job {state}", time.time(),
                experiment=getattr(self.payload.get("request"), "experiment", self.kind))
            return original_finish(self, state, result, error)
        finish._timed = True
        jobs.JobHandle.finish = finish


def timed_identify(service: str, *args, **kwargs) -> dict:
    from gpu.fleet import task

    _instrument_dask_worker()
    with span("dask: identify task (the GPU worker's start)", experiment="identify"):
        answer = task.identify(service, *args, **kwargs)
    _WHERE["gpu"] = str(answer.get("gpu_uuid") or "")
    log("dask: identify task (the GPU worker's start)", time.time(), experiment="identify", gpu=_WHERE["gpu"],
        mark="gpu")
    return answer


def timed_measure(service, request, timeout_s, **kwargs):
    from gpu.fleet import task

    _instrument_dask_worker()
    _CONTEXT.experiment = request.experiment
    with span("dask: measure task (on the Dask worker)", experiment=request.experiment):
        return task.measure(service, request, timeout_s, **kwargs)


def timed_release(service):
    from gpu.fleet import task

    _instrument_dask_worker()
    with span("dask: release task (GPU worker closed)", experiment="release"):
        return task.release(service)


def timed_measure_node(service, request, timeout_s, gpus, *released, **kwargs):
    from gpu.fleet import task

    _instrument_dask_worker()
    _CONTEXT.experiment = request.experiment
    with span("dask: node task (on the Dask worker)", experiment=request.experiment, gpu="node"):
        return task.measure_node(service, request, timeout_s, gpus, *released, **kwargs)


# --- the driver -------------------------------------------------------------------------------------------------------
def _instrument_driver(catalog) -> None:
    """The fleet loop's submissions, finishes and store writes, logged per (GPU, experiment)."""
    from gpu.fleet import nodes, run, task

    task_functions = {"identify": timed_identify, "measure": timed_measure, "release": timed_release,
                      "measure_node": timed_measure_node}
    for name, function in task_functions.items():
        setattr(task, name, function)  # pickled by reference: each Dask worker runs this module's timed task
    original_submit, original_finish = run._submit, run._finish

    def submit(client, gpu, service, fleet_id="", wait_s=None):
        experiment = gpu.todo[0].experiment
        log("driver: submitted", time.time(), experiment=experiment, gpu=gpu.gpu_uuid)
        original_submit(client, gpu, service, fleet_id, wait_s)
        gpu.future.add_done_callback(lambda _f, e=experiment, g=gpu.gpu_uuid: log(
            "driver: Dask said the task ended", time.time(), experiment=e, gpu=g))

    def finish(unit, *args, **kwargs):
        experiment = unit.current.experiment
        gpu = getattr(unit, "gpu_uuid", "node")
        log("driver: noticed the task ended", time.time(), experiment=experiment, gpu=gpu)
        with span("driver: frame fetched, stored (one transaction)", experiment=experiment, gpu=gpu):
            return original_finish(unit, *args, **kwargs)

    original_start_node = nodes.start_node_run

    def start_node(client, node, *args, **kwargs):
        log("driver: submitted", time.time(), experiment=node.todo[0].experiment if node.todo else "", gpu="node")
        return original_start_node(client, node, *args, **kwargs)

    run._submit, run._finish, run.start_node_run = submit, finish, start_node
    original_save = catalog.save

    def save(frame, *args, **kwargs):
        experiment = str(frame["experiment"].iloc[0]) if len(frame) else ""
        gpu = str(frame["gpu_uuid"].iloc[0]) if "gpu_uuid" in frame and len(frame) else ""
        with span("driver: store transaction (catalog.save)", experiment=experiment,
                  gpu=gpu if experiment != "peers" else "node"):
            return original_save(frame, *args, **kwargs)

    catalog.save = save


def run_timed_fleet(log_path: Path, no_node: bool, settle: bool, gpus: str | None) -> float:
    """The health fleet on a LocalCluster of this machine's GPUs (or ``gpus``: CUDA_VISIBLE_DEVICES), every process
    timed into ``log_path``; its wall time."""
    from gpu.core.access import Actor
    from gpu.experiments import suites
    from gpu.fleet.cluster import open_cluster
    from gpu.fleet.run import Progress, run_fleet, summary
    from gpu.results.exchange.catalog import Catalog
    from gpu.results.persistence.store import RunStore
    from gpu.service.backends import worker_service

    base = worker_service()
    os.environ.update({LOG_ENV: str(log_path), BASE_ENV: base, SETTLE_ENV: "1" if settle else "0",
                       "PINPOINT_WORKER_SERVICE": "health_parts:TimedService"})
    if gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), here) if p)
    suite = suites.load("health")
    if no_node:
        suite = dataclasses.replace(suite, runs=suite.gpu_runs)
    with tempfile.TemporaryDirectory(prefix="pinpoint-health-parts-") as folder:
        catalog = Catalog(RunStore(f"sqlite:///{folder}/fleet.db"))
        catalog.store.migrate(Actor.local("fleet"))
        _instrument_driver(catalog)
        service = "health_parts:TimedService"
        started = time.time()
        with span("fleet: cluster started (LocalCluster, one worker per GPU)", experiment="fleet"):
            cluster = open_cluster("local", service)
            client = cluster.__enter__()
        try:
            with span("fleet: run_fleet (identify, every run, stores)", experiment="fleet"):
                result = run_fleet(client, suite, catalog, f"parts-{int(started)}", service,
                                   progress=Progress(sys.stderr))
        finally:
            with span("fleet: cluster closed", experiment="fleet"):
                cluster.__exit__(None, None, None)
        print(summary(result), file=sys.stderr, flush=True)
    return time.time() - started


# --- the report -------------------------------------------------------------------------------------------------------
def _short(uuid: str) -> str:
    return f"…{uuid[-8:]}" if uuid and uuid != "node" else uuid or "?"


def report(log_path: Path, title: str, detail: bool = False) -> None:
    """Per GPU: each run's wall time as the fleet counts it (submission to stored), split into its parts; every gap
    and point for the first GPU (``detail``: for every GPU)."""
    spans = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    by_pid_gpu = {}
    for s in spans:  # spans logged before a process knew its GPU take the GPU it named later
        if s["gpu"]:
            by_pid_gpu.setdefault(s["pid"], s["gpu"])
    for s in spans:
        if not s["gpu"]:
            s["gpu"] = by_pid_gpu.get(s["pid"], "")
    fleet = {s["part"]: s for s in spans if s["experiment"] == "fleet"}
    print(f"\n{title}: {os.cpu_count()} host cores, {socket.gethostname()}", flush=True)
    for part, s in fleet.items():
        print(f"  {part}: {s['end'] - s['start']:.2f} s", flush=True)
    origin = min((s["start"] for s in spans if s["part"].startswith("fleet: run_fleet")), default=0.0)
    gpus = sorted({s["gpu"] for s in spans if s["gpu"] and s["gpu"] != "node" and s["where"] == "driver"})
    for index, gpu in enumerate(gpus):
        mine = [s for s in spans if s["gpu"] == gpu]
        _report_start(gpu, mine, origin)
        _report_runs(gpu, mine, detail or index == 0)
    node = [s for s in spans if s["gpu"] == "node" or s["experiment"] in ("peers", "release")]
    if node:
        _report_runs("node", node, True)


def _total(spans: list[dict], part: str, experiment: str | None = None) -> float:
    return sum(_seconds(s) for s in spans if s["part"] == part
               and (experiment is None or s["experiment"] == experiment))


def _count(spans: list[dict], part: str) -> int:
    return sum(s.get("count", 1) for s in spans if s["part"] == part)


def _report_start(gpu: str, mine: list[dict], origin: float) -> None:
    first_run = min((s["start"] for s in mine if s["part"] == "driver: submitted"), default=float("inf"))
    start = [s for s in mine if s["part"].startswith(("start:", "dask: GPU worker process started", "dask: identify"))
             and s["start"] < first_run]
    print(f"  GPU {_short(gpu)}: worker start (during identify, before any run)", flush=True)
    for s in sorted(start, key=lambda s: s["start"]):
        if s["start"] != s["end"]:
            print(f"    {s['part']}: {s['end'] - s['start']:.2f} s (from {s['start'] - origin:+.2f} s)", flush=True)
    for s in mine:
        if s["part"].startswith(("warm-up thread", "start: waited")):
            print(f"    {s['part']}: {s['start'] - origin:+.2f} → {s['end'] - origin:+.2f} s "
                  f"({s['end'] - s['start']:.2f} s)", flush=True)
    if first_run != float("inf"):
        print(f"    first run submitted at {first_run - origin:+.2f} s (times from the fleet's start)", flush=True)


SAMPLES = "point: samples (the profile's loop)"
STOP_RULE = "point: stop rule after each sample (stats.stop_reason)"
BETWEEN_SAMPLES = "point: telemetry between samples (Telemetry.sample: NVML clock every 50 ms)"
ROW = "point: row (measured_row, the witness's last reading in it)"
ROW_ONLY = "point: row (measured_row, besides the witness's last reading)"
PROGRESS = "job: progress messages (progress, each row sent to the page)"
FRAME = "job: frame (make_frame, point order)"
WITNESS_AFTER = "point: witness after (NVML counters, last reading)"
PARTS_IN_JOB = [
    "job: provenance (facts, git commit)", "job: limits (memory free, host memory)", "job: sweep set-up (setup)",
    "point: generator (inputs, buffers, between points)", "point: prepare",
    "point: set-up (measure: uploads, patterns, calibration)", SAMPLES, STOP_RULE, BETWEEN_SAMPLES,
    "point: verification (verify)", "point: witness before (NVML counters, first reading)",
    WITNESS_AFTER, ROW_ONLY, PROGRESS, FRAME, "job: sweep close",
]


def _part_total(spans: list[dict], part: str) -> float:
    """A part's seconds; the row's without the witness's last reading, which is a part of its own."""
    if part == ROW_ONLY:
        return max(0.0, _total(spans, ROW) - _total(spans, WITNESS_AFTER)) if any(
            s["part"] == ROW for s in spans) else 0.0
    return _total(spans, part)


COMPACT = [("samples", SAMPLES),
           ("stop rule", STOP_RULE),
           ("telemetry", BETWEEN_SAMPLES),
           ("set-up", "point: set-up (measure: uploads, patterns, calibration)"),
           ("generator", "point: generator (inputs, buffers, between points)"),
           ("verify", "point: verification (verify)"),
           ("witness", ("point: witness before (NVML counters, first reading)", WITNESS_AFTER)),
           ("rows", ROW_ONLY),
           ("progress", PROGRESS),
           ("frame", FRAME)]


def _report_runs(gpu: str, mine: list[dict], detail: bool) -> None:
    """Each run of ``gpu`` (or the node) in one line (its parts in seconds), with every gap in ``detail``."""
    submitted = sorted((s for s in mine if s["part"] == "driver: submitted"), key=lambda s: s["start"])
    totals: dict[str, float] = {}
    compact, lines = [], []
    for index, sub in enumerate(submitted):
        experiment = sub["experiment"]
        run = [s for s in mine if s["experiment"] == experiment and s["start"] >= sub["start"] - 0.001]
        first = {s["part"]: s for s in sorted(run, key=lambda s: s["start"], reverse=True)}  # each part's first

        def at(part, key="start", first=first):
            return first[part][key] if part in first else None

        # The store transaction's end (on the loop's thread before the fleet stored on a thread of its own).
        stored = at("driver: store transaction (catalog.save)", "end") or at(
            "driver: frame fetched, stored (one transaction)", "end")
        noticed = at("driver: noticed the task ended")
        next_sub = submitted[index + 1]["start"] if index + 1 < len(submitted) else None
        task_start = at("dask: measure task (on the Dask worker)") or at("dask: node task (on the Dask worker)")
        task_end = at("dask: measure task (on the Dask worker)", "end") or at("dask: node task (on the Dask worker)",
                                                                              "end")
        job_start, job_end = at("job: in the GPU worker (handle)"), at("job: in the GPU worker (handle)", "end")
        dispatched = at("client: dispatched until done (GPU locks, job, freed)")
        queued = at("client: job on the GPU worker (queued until its answer)")
        answered = at("client: job done")
        dask_ended = at("driver: Dask said the task ended")
        fleet_s = (noticed - sub["start"]) if noticed else float("nan")
        record = {"fleet": fleet_s if noticed else 0.0}
        if job_start is not None and job_end is not None:
            record["job"] = job_end - job_start
            for name, parts in COMPACT:
                parts = (parts,) if isinstance(parts, str) else parts
                record[name] = sum(_part_total(run, p) for p in parts)
            record["rest of job"] = record["job"] - sum(_part_total(run, p) for p in PARTS_IN_JOB)
            record["to job"] = job_start - sub["start"]
            if noticed is not None:
                record["job → noticed"] = noticed - job_end
        if stored is not None and noticed is not None:
            record["noticed → stored"] = stored - noticed
        if noticed is not None and next_sub is not None:
            record["noticed → next"] = next_sub - noticed
        if "job" in record:
            record["fleet − job"] = record["fleet"] - record["job"]
        for key, value in record.items():
            totals[key] = totals.get(key, 0.0) + value
        compact.append(f"    {experiment:<13} " + " · ".join(f"{k} {v:.2f}" for k, v in record.items()))
        if not detail:
            continue
        lines.append(f"    {experiment}: {fleet_s:.2f} s as the fleet counts it (submitted → noticed ended)"
                     + (f", {stored - sub['start']:.2f} s to stored" if stored else ""))

        def gap(name, a, b):
            if a is not None and b is not None:
                lines.append(f"      {name}: {b - a:.3f} s")

        gap("submitted → task started on its Dask worker", sub["start"], task_start)
        gap("task started → client dispatched the job", task_start, dispatched)
        gap("dispatched → GPU locks held, job queued to the GPU worker", dispatched, queued)
        gap("queued → the GPU worker started the job", queued, job_start)
        if job_start is not None and job_end is not None:
            parts = {p: _part_total(run, p) for p in PARTS_IN_JOB
                     if any(s["part"] == (ROW if p == ROW_ONLY else p) for s in run)}
            lines.append(f"      job in the GPU worker: {job_end - job_start:.3f} s")
            for part, seconds in parts.items():
                count = _count(run, ROW if part == ROW_ONLY else part)
                lines.append(f"        {part}: {seconds:.3f} s ({count}×)")
            lines.append(f"        the rest (allocation scope, grid walk, key checks, Python between): "
                         f"{record['rest of job']:.3f} s")
            nvml_counters = _total(run, "nvml: counters (PCIe replays, ECC, NVLink errors)")
            readings = [s for s in run if s["part"] == "nvml: one reading (clocks, power, processes, PCIe)"]
            if readings:
                lines.append(f"        (NVML inside the above: counters {nvml_counters:.3f} s; "
                             f"{len(readings)} readings {sum(_seconds(s) for s in readings):.3f} s, "
                             "most on the witness's thread)")
            lines.extend(_points(run, job_end))
        gap("job ended → client got its answer (pickling, queue)", job_end, answered)
        gap("answer → task returned on its Dask worker", answered, task_end)
        gap("task returned → Dask told the driver", task_end, dask_ended)
        gap("Dask told → the driver's loop noticed", dask_ended, noticed)
        gap("noticed → frame fetched and stored", noticed, stored)
        gap("noticed → this GPU's next run submitted", noticed, next_sub)
        freed = _total(run, "job: after its answer (buffers freed)")
        if freed:
            lines.append(f"      (after the answer, beside the above: buffers freed {freed:.3f} s)")
    label = "node" if gpu == "node" else f"GPU {_short(gpu)}"
    print(f"  {label}: runs {totals.get('fleet', 0.0):.1f} s in all as the fleet counts them (seconds; 'to job': "
          "submission to the job's start in the GPU worker; 'job → noticed': its end to the driver noticing; "
          "'noticed → next': to the GPU's next submission)", flush=True)
    print("\n".join(compact), flush=True)
    print(f"    {'in all':<13} " + " · ".join(f"{k} {v:.2f}" for k, v in totals.items()), flush=True)
    if lines:
        print("\n".join(lines), flush=True)


def _points(run: list[dict], job_end: float) -> list[str]:
    """Each point of a run: its set-up (measure) to the next one's, split into set-up, samples, verification and the
    witness's readings after it."""
    setups = sorted((s for s in run if s["part"] == "point: set-up (measure: uploads, patterns, calibration)"),
                    key=lambda s: s["start"])
    lines = []
    for index, setup in enumerate(setups):
        until = setups[index + 1]["start"] if index + 1 < len(setups) else job_end
        inside = [s for s in run if setup["start"] <= s["start"] < until]

        def seconds(part, inside=inside):
            return sum(_seconds(s) for s in inside if s["part"] == part)

        lines.append(f"          point {setup.get('label', index)}: {until - setup['start']:.3f} s: set-up "
                     f"{seconds(setup['part']):.3f}, samples {seconds(SAMPLES):.3f}, stop rule "
                     f"{seconds(STOP_RULE):.3f}, telemetry between samples {seconds(BETWEEN_SAMPLES):.3f}, "
                     f"verify {seconds('point: verification (verify)'):.3f}, witness after "
                     f"{seconds('point: witness after (NVML counters, last reading)'):.3f}, next witness before "
                     f"{seconds('point: witness before (NVML counters, first reading)'):.3f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--no-node", action="store_true", help="leave the node's links (peers) out")
    parser.add_argument("--settle", action="store_true",
                        help="each GPU worker waits for its warm-ups' threads before its hello")
    parser.add_argument("--gpus", help="CUDA_VISIBLE_DEVICES for the fleet (default: every GPU)")
    parser.add_argument("--log", type=Path, help="keep the spans in this file (default: a temporary one)")
    parser.add_argument("--detail", action="store_true", help="every gap and point of every GPU (default: the first)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pinpoint-health-parts-log-") as folder:
        log_path = args.log or Path(folder) / "spans.jsonl"
        log_path.write_text("")
        wall = run_timed_fleet(log_path, args.no_node, args.settle, args.gpus)
        what = "settled warm-ups" if args.settle else "as the fleet runs"
        report(log_path, f"PARTS-CONCURRENT health fleet from {args.root} ({what}), {wall:.1f} s in all", args.detail)


if __name__ == "__main__":
    if "--root" in sys.argv[:-1]:  # the checkout whose fleet is timed, before anything of PinPoint is imported
        sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--root") + 1]).resolve()))
    import health_parts  # this file again, under its own name: the tasks it gives Dask are pickled by reference

    health_parts.main()
