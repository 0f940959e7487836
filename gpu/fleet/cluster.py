"""The three ways to get a Dask cluster for a fleet, each with one worker per GPU holding the resource ``GPU=1``:

* ``local``: a ``distributed.LocalCluster`` on this machine, one worker process per visible GPU;
* ``slurm``: dask-jobqueue's ``SLURMCluster``, one Slurm job per node, one worker per GPU of the node;
* ``tcp://HOST:PORT``: a running scheduler (``dask scheduler``), its workers started by hand on each node.

Each worker's own GPU is the one ``CUDA_VISIBLE_DEVICES`` leaves it (``gpu.fleet.task.gpu_for_worker``). Workers
are not daemonic processes, so they can spawn PinPoint's GPU worker process. Failures to get a cluster are one
line each (``FleetError``): an unreachable scheduler within ``CONNECT_TIMEOUT_S``, a missing Slurm, no GPU here.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys

import dask
from dask_jobqueue import SLURMCluster
from distributed import Client, LocalCluster

from gpu.core import paths
from gpu.core.errors import FleetError, WorkerUnavailable
from gpu.service.client import main_module_hidden
from gpu.service.client import visible_gpus as gpus_of_service

CONNECT_TIMEOUT_S = 10
WORKERS_TIMEOUT_S = 300
NOT_DAEMONIC = {"distributed.worker.daemon": False}


def visible_gpus(service: str) -> list[dict]:
    """The GPUs this machine shows, asked in a spawned process (this one never initialises CUDA)."""
    try:
        return gpus_of_service(service)
    except WorkerUnavailable as exc:  # no driver, no PyCUDA: one line, as every fleet failure
        raise FleetError(str(exc)) from None


def worker_environment(service: str) -> dict[str, str]:
    """What every fleet worker's process needs: PinPoint importable, the same service, not daemonic. An installed
    PinPoint is importable by every Python of its environment (pinpoint.pth); a checkout is put on PYTHONPATH."""
    environment = {"PINPOINT_WORKER_SERVICE": service, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    if paths.CHECKOUT:
        environment["PYTHONPATH"] = os.pathsep.join(p for p in (str(paths.ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return environment


@contextlib.contextmanager
def open_cluster(spec: str, service: str, *, nodes: int = 1, gpus_per_node: int | None = None,
                 partition: str | None = None, gres: bool = True, walltime: str = "01:00:00"):
    """A Dask ``Client`` on the cluster that ``spec`` names, closed (and a cluster we started, stopped) after."""
    if spec == "local":
        with _local(service) as client:
            yield client
    elif spec == "slurm":
        with _slurm(service, nodes, gpus_per_node, partition, gres, walltime) as client:
            yield client
    elif re.fullmatch(r"tcp://[^\s/:]+:\d{1,5}", spec):
        with _connect(spec) as client:
            yield client
    else:
        raise FleetError(f"unknown cluster '{spec[:80]}': local, slurm or tcp://HOST:PORT (a running Dask scheduler)")


@contextlib.contextmanager
def _local(service: str):
    gpus = visible_gpus(service)
    if not gpus:
        raise FleetError("no GPU is visible here (check the driver and CUDA_VISIBLE_DEVICES): a local fleet has "
                         "nothing to measure")
    visible = ",".join(str(g.get("uuid") or g["index"]) for g in gpus)
    env = {**worker_environment(service), "CUDA_VISIBLE_DEVICES": visible}
    with dask.config.set(NOT_DAEMONIC):
        # Spawned workers re-import the main module: under Streamlit or a test that is an app script, so it is
        # hidden while they start.
        with main_module_hidden():
            cluster = LocalCluster(n_workers=len(gpus), threads_per_worker=1, processes=True, resources={"GPU": 1},
                                   host="127.0.0.1", dashboard_address=None, env=env)
        with cluster, Client(cluster) as client:
            yield client


@contextlib.contextmanager
def _slurm(service: str, nodes: int, gpus_per_node: int | None, partition: str | None, gres: bool, walltime: str):
    if shutil.which("sbatch") is None:
        raise FleetError("Slurm is not installed here (no sbatch on PATH): --cluster slurm submits one job per node "
                         "through dask-jobqueue; use --cluster local, or a scheduler's tcp:// address")
    per_node = gpus_per_node or 1
    environment = worker_environment(service)
    prologue = [f"export {k}={_shell_word(v)}" for k, v in environment.items()]
    if paths.CHECKOUT:
        prologue.append(f"cd {_shell_word(str(paths.ROOT))}")
    try:
        cluster = SLURMCluster(
            cores=per_node, processes=per_node, memory=f"{4 * per_node}GB", queue=partition, walltime=walltime,
            job_extra_directives=[f"--gres=gpu:{per_node}"] if gres else [],
            worker_extra_args=["--resources", "GPU=1", "--nthreads", "1"], job_script_prologue=prologue,
            python=sys.executable,
            # One node: the scheduler listens on loopback; several: on this host's default address, for the nodes.
            scheduler_options={"dashboard_address": None, **({"host": "127.0.0.1"} if nodes == 1 else {})})
    except Exception as exc:
        raise FleetError(f"cannot start a Slurm cluster: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}") \
            from None
    try:
        with Client(cluster) as client:
            try:
                cluster.scale(jobs=nodes)
                client.wait_for_workers(nodes * per_node, timeout=WORKERS_TIMEOUT_S)
            except Exception as exc:
                raise FleetError(f"Slurm started {len(client.scheduler_info()['workers'])} of {nodes * per_node} "
                                 f"workers within {WORKERS_TIMEOUT_S} s ({type(exc).__name__}: "
                                 f"{' '.join(str(exc).split())[:200]}); see squeue and the job logs") from None
            yield client
    finally:
        cluster.close()


def _shell_word(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


@contextlib.contextmanager
def _connect(address: str):
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise FleetError(f"the Dask scheduler at {address} did not answer within {CONNECT_TIMEOUT_S} s "
                         f"({type(exc).__name__}); start it with `dask scheduler` and check the address") from None
    with client:
        yield client
