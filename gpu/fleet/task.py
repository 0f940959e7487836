"""What a Dask worker runs for a fleet: PinPoint's own GPU worker process (``gpu.service``) on the one GPU this
Dask worker owns, kept for the worker's lifetime, and jobs submitted to it.

Which GPU: the one ``CUDA_VISIBLE_DEVICES`` leaves visible. Where a worker sees several (a Slurm job holding a
node's GPUs with one Dask worker per GPU, or a LocalCluster), it takes the one at its own place among its job's
workers: worker ``name-2`` (or ``2``) takes the third. The GPU worker process is spawned from the Dask worker, so
Dask's workers must not be daemonic processes (``DASK_DISTRIBUTED__WORKER__DAEMON=False``; ``cluster`` sets it).
It says hello only once its warm-ups' background work is done (``SETTLE_ENV``): the host data an experiment builds on
a thread as a worker starts (seconds on several cores) would otherwise be built beside the first runs, and the
Transfers sweep's pageable copies run on the same host's cores and memory.

A node run (``gpus = "node"``) is a second GPU worker process, started by one Dask worker of the node for the
node's GPUs together: the fleet gives it the node's board UUIDs (what every worker of the node reported), and the
process is spawned with ``CUDA_VISIBLE_DEVICES`` set to them all and ``devices`` 0…n-1, so it holds every GPU of
the node whatever the Dask worker's own one is. ``release`` closes a Dask worker's GPU worker processes: the fleet
releases the node's one-GPU processes before its node run, so their contexts and pools are not on the GPUs then.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import socket
import threading

from distributed import get_worker

from gpu.core.errors import PinPointError, ValidationError, WorkerUnavailable
from gpu.experiments.request import Request
from gpu.service.backends import LiveBackend
from gpu.service.client import SETTLE_ENV, WARM_UPS_ENV, WorkerClient
from gpu.service.host_locks import GpuBusy

_BACKENDS: dict[str, LiveBackend] = {}
_LOCK = threading.Lock()
CANCEL_GRACE_S = 10.0


class TaskFailed(PinPointError, RuntimeError):
    """A (GPU, experiment) task that ended without a run; its one argument says why (pickled back to the driver)."""


def gpu_for_worker(visible: str | None, worker_name) -> str | None:
    """The CUDA_VISIBLE_DEVICES value for this worker: the one GPU it sees, or where it sees several, the one at the
    worker's own place (the number that ends its name). None: leave the environment as it is."""
    if visible is None or "," not in visible:
        return None
    listed = [v.strip() for v in visible.split(",") if v.strip()]
    found = re.search(r"(\d+)$", str(worker_name))
    if found is None or int(found.group(1)) >= len(listed):
        raise TaskFailed(f"Dask worker {str(worker_name)[:60]} sees GPUs {visible[:120]} and cannot tell which is its "
                         "own: start one worker per GPU with CUDA_VISIBLE_DEVICES set to that GPU, or name the "
                         "workers of a node …-0, …-1, … (dask worker --nworkers N --name NODE)")
    return listed[int(found.group(1))]


def _worker_name() -> str:
    try:
        return str(get_worker().name)
    except ValueError:  # not on a Dask worker (a direct call, in tests)
        return "0"


def _kept(key) -> LiveBackend | None:
    """The GPU worker process kept under ``key`` while it lives; None where one must be started, which a daemonic
    Dask worker cannot do (TaskFailed). Called with ``_LOCK`` held."""
    if key in _BACKENDS and _BACKENDS[key].client.worker_pid is not None:
        return _BACKENDS[key]
    if multiprocessing.current_process().daemon:
        raise TaskFailed("this Dask worker is a daemonic process and cannot start PinPoint's GPU worker: start "
                         "Dask workers with DASK_DISTRIBUTED__WORKER__DAEMON=False")
    return None


def backend(service: str, experiments: list[str] | None = None) -> LiveBackend:
    """This Dask worker's GPU worker process, started on its GPU at the first task and kept. ``experiments``: the
    ones it will measure (its suite's one-GPU runs), the only ones it warms up; None: those named before (a worker
    started again after a hang), else every one."""
    with _LOCK:
        if (kept := _kept(service)) is not None:
            return kept
        chosen = gpu_for_worker(os.environ.get("CUDA_VISIBLE_DEVICES"), _worker_name())
        if chosen is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = chosen  # before any CUDA call: the spawned worker inherits it
        os.environ[SETTLE_ENV] = "1"  # the spawned worker's first run never measures beside its warm-ups' threads
        if experiments is not None:
            os.environ[WARM_UPS_ENV] = ",".join(experiments)
        try:
            _BACKENDS[service] = LiveBackend(WorkerClient(service=service))
        except WorkerUnavailable as exc:
            raise TaskFailed(f"no GPU worker on {socket.gethostname()}: {exc}") from None
        return _BACKENDS[service]


def node_backend(service: str, gpus: list[str], experiments: list[str] | None = None) -> LiveBackend:
    """This Dask worker's GPU worker process on ``gpus`` (a node's board UUIDs, in the fleet's order) together,
    started at the node's first node run and kept; it warms up only ``experiments`` (the suite's node runs; None:
    every one)."""
    key = _node_key(service, gpus)
    with _LOCK:
        if (kept := _kept(key)) is not None:
            return kept
        own, own_warm_ups = os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get(WARM_UPS_ENV)
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)  # the spawned process inherits it at its start
        os.environ[SETTLE_ENV] = "1"
        if experiments is not None:
            os.environ[WARM_UPS_ENV] = ",".join(experiments)
        try:
            _BACKENDS[key] = LiveBackend(WorkerClient(service=service,
                                                      service_options={"devices": list(range(len(gpus)))}))
        except WorkerUnavailable as exc:
            raise TaskFailed(f"no GPU worker for the {len(gpus)} GPUs of {socket.gethostname()}: {exc}") from None
        finally:  # this Dask worker's own one-GPU process keeps its one GPU, and its warm-ups
            for name, value in (("CUDA_VISIBLE_DEVICES", own), (WARM_UPS_ENV, own_warm_ups)):
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        return _BACKENDS[key]


def release(service: str) -> int:
    """Close this Dask worker's GPU worker processes (its own GPU's and any node's); how many were closed."""
    with _LOCK:
        keys = [k for k in _BACKENDS if k == service or k.startswith(f"{service}|node|")]
        closing = [_BACKENDS.pop(k) for k in keys]
    for live in closing:
        live.client.close()
    return len(closing)


def identify(service: str, experiments: list[str] | None = None) -> dict:
    """The GPU this Dask worker measures on: host, model, board UUID (and the worker's name and visible devices).
    ``experiments``: the suite's one-GPU runs, the only ones its GPU worker warms up."""
    facts = backend(service, experiments).facts
    return {"host": str(facts.get("host") or socket.gethostname()), "device_name": str(facts.get("device_name")),
            "gpu_uuid": facts.get("gpu_uuid"), "worker": _worker_name(),
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES", "")}


def measure(service: str, request: Request, timeout_s: float, fleet_id: str = "", wait_s: float | None = None):
    """One experiment on this worker's GPU (``request``: a suite run's, checked when the suite was read): the whole
    run's DataFrame, or TaskFailed (nothing partial comes back). A job past ``timeout_s`` is cancelled; one that does
    not stop then has its GPU worker process replaced. ``wait_s``: how long it waits for a GPU that another process
    of this machine measures on (``--wait``); ``fleet_id`` names it to such a process."""
    return _run(backend(service), service, request, timeout_s, f"fleet {fleet_id} task".strip(), wait_s)


def measure_node(service: str, request: Request, timeout_s: float, gpus: list[str], *released, fleet_id: str = "",
                 wait_s: float | None = None, experiments: list[str] | None = None):
    """One experiment on all of a node's GPUs together (``gpus``: their board UUIDs), as ``measure``. ``released``:
    the node's ``release`` tasks, which Dask finishes before this one starts. ``experiments``: the suite's node
    runs, the only ones a node worker started for it warms up."""
    return _run(node_backend(service, gpus, experiments), _node_key(service, gpus), request, timeout_s,
                f"fleet {fleet_id} node task".strip(), wait_s)


def _node_key(service: str, gpus: list[str]) -> str:
    return f"{service}|node|{','.join(gpus)}"


def _run(live: LiveBackend, key: str, request: Request, timeout_s: float, purpose: str = "fleet task",
         wait_s: float | None = None):
    experiment = request.experiment
    # A Dask worker runs one task on its GPU at a time (resources GPU=1): the client's settings are this task's.
    live.client.purpose, live.client.wait_s = f"{' '.join(purpose.split())} {experiment}", wait_s
    try:
        checked = live.checked_here(request)  # the suite's typed parameters, checked against this GPU's limits
    except ValidationError as exc:
        raise TaskFailed(f"{experiment} failed: {' '.join(str(exc).split())[:300]}") from None
    handle = live.submit(checked)
    if not handle.wait(timeout_s):
        live.client.cancel(handle)
        if not handle.wait(CANCEL_GRACE_S):
            with _LOCK:
                _BACKENDS.pop(key, None)
            live.client.close()  # a GPU stuck in one job: the next task starts a fresh worker process
        raise TaskFailed(f"timed out: {experiment} did not finish within {timeout_s:.0f} s")
    try:
        return handle.outcome()
    except GpuBusy as exc:  # the fleet's --wait ran out: the holder is named, the run can be resumed
        raise TaskFailed(f"{experiment} failed: {' '.join(str(exc).split())[:300]} (--wait)") from None
    except PinPointError as exc:  # ValidationError, WorkerError (a CUDA fault, a wrong result): say why, in one line
        raise TaskFailed(f"{experiment} failed: {' '.join(str(exc).split())[:300]}") from None
