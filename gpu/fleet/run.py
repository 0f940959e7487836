"""A suite on every GPU of a Dask cluster: one task per GPU and experiment, each stored as soon as it finishes.

Placement is Dask's: every task names the one worker whose GPU it measures (``workers=[address]``, no other
worker allowed) and asks for the resource ``GPU=1``, which each worker holds once, so no two measurements ever share
a GPU. A GPU's experiments run one after another, in the suite's order; GPUs run at once.

Node runs (``gpus = "node"`` in the suite: a node's GPUs together, e.g. the peer matrix) are phased per node by this
driver (``gpu.fleet.nodes``), not by Dask: a node is the GPUs whose workers report one host. Its node runs start
only when every one of its GPUs has finished (or failed) its one-GPU runs, and while they run nothing else is
submitted to any worker of the node, so a node run never measures beside a one-GPU task on the same GPUs; other
nodes go on with their own phases meanwhile. A node run is one task on the node's first worker
(``task.measure_node``), after a ``task.release`` on each worker of the node (Dask dependencies) has closed their
one-GPU worker processes; it starts one GPU worker process holding all the node's GPUs (by board UUID). A node with
fewer GPUs than the run needs (its ``min_gpus``) reports "no peer" for it, which is not a failure; a node one of
whose GPUs failed (its worker gone, hung) does not run its node runs, and says why.

Faults: a task that fails (a bad parameter for that GPU, a CUDA fault, a wrong result, its own time limit) fails
that (GPU, experiment) with its reason, and the GPU goes on with the next; a worker that leaves the cluster (killed,
crashed, its node gone) or a task that outlives its time limit fails the GPU, and the other GPUs finish. Nothing
partial is stored: a run is stored whole, in one transaction, only when its task returned every point. A scheduler
that goes away (killed, its node gone) ends the fleet: what is left is named, not measured, and the runs stored
stay. Running the same fleet id again measures only the (GPU, experiment) pairs, and the (node, experiment) pairs of
node runs, that the store does not hold yet; a suite that measures differently from the stored one is refused
(``gpu.fleet.resume``). While it measures, the command holds the fleet id's lease
(``gpu.results.persistence.leases``): each run is stored only while it holds it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import time
from concurrent.futures import CancelledError

from distributed import Client, Future, wait
from distributed.client import FuturesCancelledError
from distributed.comm.core import CommClosedError

from gpu.core import text
from gpu.core.errors import AccessRefused, FleetError, StoreError
from gpu.experiments.suites import Suite
from gpu.fleet import task
from gpu.fleet.nodes import group_by_host, plan_node_runs, start_node_run, stored_node_runs
from gpu.fleet.progress import Progress, summary
from gpu.fleet.resume import stored_pairs, suite_as_stored
from gpu.fleet.stores import StoreQueue, StoreWrite
from gpu.fleet.types import FleetGpu, FleetNode, FleetResult

__all__ = ["FleetGpu", "FleetNode", "FleetResult", "Progress", "new_fleet_id", "run_fleet", "summary"]

POLL_S = 0.2
LIVENESS_EVERY_S = 1.0
TASK_GRACE_S = 30.0  # beyond a task's own limit (it cancels itself), before its GPU counts as hung
IDENTIFY_TIMEOUT_S = 300.0


def new_fleet_id(suite: Suite, now: dt.datetime | None = None) -> str:
    """``health-20261125T0412Z``: the suite and when the fleet started (to the minute; resume by naming it); always a
    valid fleet id (``gpu.fleet.command.FLEET_ID``), whatever the suite file is called."""
    now = now or dt.datetime.now(dt.UTC)
    # A suite file's name may hold anything (spaces, accents, brackets): only what a fleet id allows is kept.
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", suite.name).strip("-._")[:40].rstrip("-._") or "suite"
    return f"{name}-{now.strftime('%Y%m%dT%H%MZ')}"


def run_fleet(client: Client, suite: Suite, catalog, fleet_id: str, service: str, *, label: str | None = None,
              progress: Progress | None = None, identify_timeout: float = IDENTIFY_TIMEOUT_S,
              lease=None, wait_s: float | None = None) -> FleetResult:
    """Measure ``suite`` on every GPU worker of ``client``'s cluster into ``catalog``'s store under ``fleet_id``.
    ``lease``: the fleet id's ``gpu.results.persistence.leases.FleetLease``, held by this command: each run is stored
    only while it holds it, and the fleet stops when it is lost. ``wait_s``: how long a run waits for a GPU that another
    process of its node measures on before it fails (``--wait``; None: up to the run's own time limit)."""
    progress = progress or Progress()
    started = time.perf_counter()
    suite = suite_as_stored(catalog, fleet_id, suite, progress)
    stored_before = stored_pairs(catalog, fleet_id, suite)
    try:
        gpus, problems = _identify(client, service, identify_timeout, progress,
                                   [run.experiment for run in suite.gpu_runs])
    except Exception as exc:
        if not scheduler_lost(client, exc):
            raise
        raise FleetError(f"the Dask scheduler {_address(client)} was lost before every GPU reported ({_why(exc)}): "
                         "nothing was measured") from None
    nodes = group_by_host(gpus)
    result = FleetResult(fleet_id, suite.name, gpus, problems=problems, nodes=nodes)
    for gpu in gpus:
        for run in suite.gpu_runs:
            if (gpu.gpu_uuid, run.experiment) in stored_before:
                gpu.skipped.append(run.experiment)
            else:
                gpu.todo.append(run)
        if gpu.skipped:
            progress.event(f"{gpu.label()}: {', '.join(gpu.skipped)} already stored in fleet {fleet_id}: not "
                           "measured again")
    plan_node_runs(nodes, suite, stored_node_runs(catalog, fleet_id), fleet_id, progress)
    total = len(gpus) * len(suite.gpu_runs) + len(nodes) * len(suite.node_runs)
    alive_checked = 0.0
    stores = StoreQueue(catalog, fleet_id, suite, label, lease)
    try:
        while stores.pending or any(u.todo or u.current for u in [*gpus, *nodes] if not u.lost):
            try:
                if lease is not None and lease.lost:
                    raise LeaseLost(lease.lost)
                alive_checked = _step(client, gpus, nodes, stores, service, result, progress, alive_checked, wait_s)
            except LeaseLost as exc:
                _lose_all(client, [*gpus, *nodes], f"fleet {fleet_id}'s lease was lost", str(exc), fleet_id,
                          progress)
                break
            except Exception as exc:
                if not scheduler_lost(client, exc):
                    raise
                _lose_all(client, [*gpus, *nodes], f"the Dask scheduler {_address(client)} was lost", _why(exc),
                          fleet_id, progress)
                break
            progress.bar(gpus, total, nodes)
        for write in stores.finished(wait_all=True):  # runs measured before the loop ended are stored all the same
            _stored(write, result, progress)
    finally:
        stores.close()
    result.wall_s = time.perf_counter() - started
    return result


def _step(client: Client, gpus: list[FleetGpu], nodes: list[FleetNode], stores: StoreQueue, service: str,
          result: FleetResult, progress: Progress, alive_checked: float, wait_s: float | None = None) -> float:
    """One turn of the fleet's loop: submit what may start, wait a little, watch workers and time limits, hand what
    finished to the store's thread, and report what it stored. The time of the last liveness check."""
    for gpu in gpus:
        if not gpu.lost and gpu.current is None and gpu.todo:
            _submit(client, gpu, service, stores.fleet_id, wait_s)
    for node in nodes:
        if not node.lost and node.current is None and node.todo and node.gpus_finished:
            start_node_run(client, node, service, progress, stores.fleet_id, wait_s)
    running = [u.future for u in [*gpus, *nodes] if u.future is not None]
    if running:  # wake as soon as any run ends (or after POLL_S, to watch workers and time limits)
        with contextlib.suppress(TimeoutError):
            wait(running, timeout=POLL_S, return_when="FIRST_COMPLETED")
    else:
        time.sleep(POLL_S)
    now = time.monotonic()
    if now - alive_checked >= LIVENESS_EVERY_S:
        alive_checked = now
        alive = _alive_workers(client)
        for gpu in gpus:
            if not gpu.lost and gpu.worker not in alive and (gpu.current or gpu.todo):
                _lose(client, gpu, "its Dask worker left the cluster (killed, crashed or its node gone)",
                      progress)
        for node in nodes:
            if not node.lost and node.current is not None and node.worker not in alive:
                _lose(client, node, "its Dask worker left the cluster (killed, crashed or its node gone)",
                      progress, "the other nodes go on")
    for unit in [*gpus, *nodes]:
        if unit.current is None or unit.lost:
            continue
        if unit.future.done():
            if unit.future.status == "cancelled" and scheduler_lost(client):
                raise SchedulerLost("its connection closed")
            _finish(unit, stores, result, progress)
        elif now - unit.started > unit.current.timeout_s + TASK_GRACE_S:
            late = now - unit.started - unit.current.timeout_s
            _lose(client, unit, f"hung: {unit.current.experiment} was still running {late:.0f} s after its time "
                                f"limit of {unit.current.timeout_s:.0f} s", progress,
                  "the other GPUs go on" if isinstance(unit, FleetGpu) else "the other nodes go on")
    for write in stores.finished():
        _stored(write, result, progress)
    return alive_checked


class SchedulerLost(FleetError):
    """The fleet's Dask scheduler went away while runs were left."""


class LeaseLost(FleetError):
    """Another command took the fleet id's lease (this one was not heard from for the lease's time)."""


def scheduler_lost(client: Client, exc: BaseException | None = None) -> bool:
    """The client's scheduler is gone (killed, its node down, the link cut): Dask cancels every future then, and
    calls to the scheduler fail with a closed connection."""
    if client.status not in ("running", "newly-created"):
        return True
    return isinstance(exc, SchedulerLost | FuturesCancelledError | CommClosedError | CancelledError) or (
        isinstance(exc, OSError) and "connect" in str(exc).lower())


def _address(client: Client) -> str:
    address = getattr(getattr(client, "scheduler", None), "address", None)
    return f"at {address}" if address else "of the fleet"


def _why(exc: BaseException) -> str:
    if isinstance(exc, SchedulerLost | FuturesCancelledError):
        return "its connection closed"
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"


def _lose_all(client: Client, units: list, reason: str, why: str, fleet_id: str, progress: Progress) -> None:
    """Every GPU and node with runs left stops (the scheduler is gone, or the fleet's lease): nothing more is
    measured."""
    left = [u for u in units if not u.lost and (u.current is not None or u.todo)]
    progress.event(f"{reason} ({why}): not measured on {', '.join(u.label() for u in left) or 'no GPU'}; the runs "
                   f"stored so far are kept; measure what is missing with --fleet-id {fleet_id}")
    for unit in left:
        _lose(client, unit, reason, progress, "", cancel=False)


def _alive_workers(client: Client) -> set[str]:
    return set(client.run_on_scheduler(_worker_addresses))


def _worker_addresses(dask_scheduler=None) -> list[str]:
    return list(dask_scheduler.workers)


def _gpu_workers(client: Client) -> list[tuple[str, str]]:
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return sorted((address, str(info.get("name", address))) for address, info in workers.items()
                  if info.get("resources", {}).get("GPU", 0) >= 1)


def _identify(client: Client, service: str, timeout: float, progress: Progress,
              experiments: list[str] | None = None) -> tuple[list[FleetGpu], list[str]]:
    """Every GPU worker's GPU (starting its GPU worker process, which warms up only ``experiments``: the suite's
    one-GPU runs); workers that cannot say are problems, not GPUs."""
    workers = _gpu_workers(client)
    if not workers:
        raise FleetError("the cluster has no worker holding a GPU resource: start each worker with --resources "
                         "GPU=1 (one worker per GPU)")
    futures = {address: client.submit(task.identify, service, experiments, workers=[address],
                                       allow_other_workers=False, resources={"GPU": 1}, pure=False,
                                       key=f"pinpoint-identify-{address}")
               for address, _ in workers}
    deadline = time.monotonic() + timeout
    pending = dict(futures)
    answers, problems = {}, []
    while pending and time.monotonic() < deadline:
        time.sleep(POLL_S)
        alive = _alive_workers(client)
        for address, future in list(pending.items()):
            if future.done():
                pending.pop(address)
                if future.status == "finished":
                    answers[address] = future.result()
                else:
                    problems.append(f"worker {address}: {_reason(future)}")
            elif address not in alive:
                pending.pop(address)
                future.cancel()
                problems.append(f"worker {address} left the cluster before it reported its GPU")
    for address, future in pending.items():
        future.cancel()
        problems.append(f"worker {address} did not report its GPU within {timeout:.0f} s")
    gpus, seen = [], {}
    # GPUs in the order a person reads them: by host, then by the worker's name with its numbers as numbers.
    workers.sort(key=lambda w: (str(answers.get(w[0], {}).get("host", "")), _natural(w[1])))
    for address, name in workers:
        answer = answers.get(address)
        if answer is None:
            continue
        gpu = FleetGpu(address, name, answer["host"], answer["device_name"], answer["gpu_uuid"])
        if gpu.gpu_uuid in seen:
            problems.append(f"worker {address} sees the same GPU as {seen[gpu.gpu_uuid]} ({gpu.label()}): give each "
                            "worker its own GPU (CUDA_VISIBLE_DEVICES); it measures nothing")
            continue
        seen[gpu.gpu_uuid] = address
        gpus.append(gpu)
        progress.event(f"GPU {len(gpus) - 1}: {gpu.label()} (worker {name})")
    for line in problems:
        progress.event(f"problem: {line}")
    if not gpus:
        raise FleetError("no worker of the cluster reported a GPU: " + "; ".join(problems))
    return gpus, problems


def _natural(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _submit(client: Client, gpu: FleetGpu, service: str, fleet_id: str = "", wait_s: float | None = None) -> None:
    run = gpu.todo.pop(0)
    gpu.current, gpu.started = run, time.monotonic()
    gpu.future = client.submit(task.measure, service, run.checked(), run.timeout_s,
                               workers=[gpu.worker], allow_other_workers=False, resources={"GPU": 1}, pure=False,
                               retries=0, key=f"pinpoint-{run.experiment}-{gpu.gpu_uuid}-{time.time_ns()}",
                               fleet_id=fleet_id, wait_s=wait_s)


def _reason(future: Future) -> str:
    try:
        exc = future.exception(timeout=5)
    except Exception as waited:  # cancelled, or the scheduler lost it
        return f"{type(waited).__name__}: {waited}"
    if isinstance(exc, task.TaskFailed):
        return str(exc)
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def _finish(gpu: FleetGpu | FleetNode, stores: StoreQueue, result: FleetResult, progress: Progress) -> None:
    """A run that ended: a failure is said at once; a frame goes to the store's thread, and the GPU is free for its
    next run before the frame is stored."""
    run, future = gpu.current, gpu.future
    gpu.current, gpu.future = None, None
    elapsed = time.monotonic() - gpu.started
    if future.status != "finished":
        gpu.failed[run.experiment] = f"{run.experiment}: {_reason(future)}"
        progress.event(f"{gpu.label()}: {run.experiment} failed after {elapsed:.1f} s: {_reason(future)}")
        return
    frame = future.result()
    result.rows_sent += len(frame)
    stores.put(gpu, run, frame, elapsed)


def _stored(write: StoreWrite, result: FleetResult, progress: Progress) -> None:
    """A run's store write done: stored, or measured but refused by the store (said, and the GPU goes on)."""
    gpu, run, frame = write.unit, write.run, write.frame
    try:
        saved = write.future.result()
    except (StoreError, AccessRefused, ValueError) as exc:  # measured, the store refused it: say so, the GPU goes on
        gpu.failed[run.experiment] = f"{run.experiment} was measured but not stored: {exc}"
        progress.event(f"{gpu.label()}: {gpu.failed[run.experiment]}")
        return
    result.runs_stored += len(saved)
    result.rows_stored += sum(s.points for s in saved)
    gpu.done.append(run.experiment)
    stored_as = f", run {frame['run_id'].iloc[0]}" if len(frame) else ""  # a run may measure no point (none could run)
    progress.event(f"{gpu.label()}: {run.experiment} stored ({text.count(len(frame), 'point')} in "
                   f"{write.elapsed:.1f} s{stored_as})")


def _lose(client: Client, gpu: FleetGpu | FleetNode, reason: str, progress: Progress,
          rest: str = "the other GPUs go on", cancel: bool = True) -> None:
    """The whole GPU (or node) stops: its current run fails with ``reason``, the rest of its suite is not run
    (``cancel``: its task is cancelled, which needs the scheduler)."""
    if gpu.future is not None and cancel:
        client.cancel(gpu.future)
    if gpu.current is not None:
        gpu.failed[gpu.current.experiment] = f"{gpu.current.experiment}: {reason}"
    for run in gpu.todo:
        gpu.failed[run.experiment] = f"{run.experiment}: not run ({reason})"
    gpu.lost, gpu.current, gpu.future, gpu.todo = reason, None, None, []
    progress.event(f"{gpu.label()}: failed: {reason}" + (f"; {rest}" if rest else ""))
