"""Node runs (a suite's ``gpus = "node"``: a node's GPUs measured together, e.g. the peer matrix), phased per node.

A node is the GPUs whose workers report one host. Its node runs start only when every one of its GPUs is through its
one-GPU runs; a node run is one task on the node's first worker (``task.measure_node``), after a ``task.release`` on
each worker of the node (Dask dependencies) has closed their one-GPU worker processes. ``gpu.fleet.run`` follows
these tasks beside the one-GPU ones.
"""

from __future__ import annotations

import time

from distributed import Client

from gpu.experiments.suites import Suite
from gpu.fleet import task
from gpu.fleet.progress import Progress
from gpu.fleet.types import FleetGpu, FleetNode


def group_by_host(gpus: list[FleetGpu]) -> list[FleetNode]:
    """The fleet's nodes: its GPUs grouped by the host their workers report, in the fleet's order."""
    hosts: dict[str, list[FleetGpu]] = {}
    for gpu in gpus:
        hosts.setdefault(gpu.host or gpu.worker, []).append(gpu)
    return [FleetNode(host, members) for host, members in hosts.items()]


def plan_node_runs(nodes: list[FleetNode], suite: Suite, stored: set[tuple], fleet_id: str, progress: Progress) -> None:
    for node in nodes:
        for run in suite.node_runs:
            if (node.host, run.experiment) in stored:
                node.skipped.append(run.experiment)
            elif len(node.gpus) < run.min_gpus:
                node.no_peer.append(run.experiment)
                progress.event(f"{node.label()}: {run.experiment}: no peer (it measures {run.min_gpus} or more GPUs "
                               "of a node together): not measured, the node goes on")
            else:
                node.todo.append(run)
        if node.skipped:
            progress.event(f"{node.label()}: {', '.join(node.skipped)} already stored in fleet {fleet_id}: not "
                           "measured again")


def start_node_run(client: Client, node: FleetNode, service: str, progress: Progress, fleet_id: str = "",
                   wait_s: float | None = None) -> None:
    """The node's next node run, once its GPUs are through their one-GPU runs; none when one of them failed."""
    failed = [g for g in node.gpus if g.lost]
    if failed:
        reason = f"not run: {failed[0].label()} of this node failed ({failed[0].lost})"
        for run in node.todo:
            node.failed[run.experiment] = f"{run.experiment}: {reason}"
        node.todo = []
        progress.event(f"{node.label()}: node runs {reason}")
        return
    node.worker = node.gpus[0].worker
    run = node.todo.pop(0)
    node.current, node.started = run, time.monotonic()
    stamp = time.time_ns()
    released = [client.submit(task.release, service, workers=[g.worker], allow_other_workers=False,
                               resources={"GPU": 1}, pure=False, retries=0,
                               key=f"pinpoint-release-{g.gpu_uuid}-{stamp}") for g in node.gpus]
    node.future = client.submit(task.measure_node, service, run.checked(), run.timeout_s, node.uuids,
                                *released, workers=[node.worker], allow_other_workers=False, resources={"GPU": 1},
                                pure=False, retries=0, key=f"pinpoint-{run.experiment}-{node.host}-{stamp}",
                                fleet_id=fleet_id, wait_s=wait_s,
                                experiments=[run.experiment, *(r.experiment for r in node.todo)])
    progress.event(f"{node.label()}: {run.experiment} on the node's GPUs together")


def stored_node_runs(catalog, fleet_id: str) -> set[tuple]:
    """(host, experiment) of the fleet's stored runs: a node run is stored once per node."""
    stored = catalog.store.runs(fleet_id=fleet_id)
    return set(zip(stored["host"], stored["experiment"], strict=True))
