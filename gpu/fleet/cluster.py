"""The three ways to get a Dask cluster for a fleet, each with one worker per GPU holding the resource ``GPU=1``:

* ``local``: a ``distributed.LocalCluster`` on this machine, one worker process per visible GPU;
* ``slurm``: dask-jobqueue's ``SLURMCluster``, one Slurm job per node, one worker per GPU of the node;
* ``tcp://HOST:PORT``: a running scheduler (``dask scheduler``), its workers started by hand on each node.

Each worker's own GPU is the one ``CUDA_VISIBLE_DEVICES`` leaves it (``gpu.fleet.task.gpu_for_worker``). Workers
are not daemonic processes, so they can spawn PinPoint's GPU worker process. Failures to get a cluster are one
line each (``FleetError``): an unreachable scheduler within ``CONNECT_TIMEOUT_S``, a missing Slurm, no GPU here.

A ``tcp://`` address is checked before any connection (a host of DNS labels or an IP address, a port 1–65535, no
control character), then probed (``probe_scheduler``): a Dask scheduler sends its handshake as soon as a connection
is accepted, so whatever does not send a well-formed one within ``CONNECT_TIMEOUT_S`` (a silent port, a web server,
random bytes) is refused before Dask's own connect, which waits without a limit for a handshake and would read a
length of random bytes as a buffer to allocate.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import re
import shutil
import socket
import struct
import sys
import threading
import time

import dask
from dask_jobqueue import SLURMCluster
from distributed import Client, LocalCluster
from distributed.protocol.core import loads
from distributed.protocol.utils import unpack_frames

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


class _OneLine(logging.Filter):
    """Dask's own log records as one line each: a lost scheduler is the fleet's to report, without tracebacks."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = " ".join(record.getMessage().split())[:300], ()
        record.exc_info = record.exc_text = record.stack_info = None
        return True


def one_line_logs() -> None:
    """Every handler of Dask's loggers (``distributed`` and its children that have their own) writes one line per
    record."""
    loggers = [logging.getLogger("distributed"), *(logging.getLogger(name) for name in
                                                    list(logging.root.manager.loggerDict)
                                                    if name.startswith("distributed."))]
    for logger in loggers:
        for handler in logger.handlers:
            if not any(isinstance(f, _OneLine) for f in handler.filters):
                handler.addFilter(_OneLine())


def check_spec(spec: str) -> None:
    """FleetError in one line for a ``--cluster`` value that names no cluster, before anything starts."""
    if spec.startswith("tcp://"):
        scheduler_address(spec)
    elif spec not in ("local", "slurm"):
        raise FleetError(f"unknown cluster {shown(spec)}: local, slurm or tcp://HOST:PORT (a running Dask scheduler)")


@contextlib.contextmanager
def open_cluster(spec: str, service: str, *, nodes: int = 1, gpus_per_node: int | None = None,
                 partition: str | None = None, gres: bool = True, walltime: str = "01:00:00"):
    """A Dask ``Client`` on the cluster that ``spec`` names, closed (and a cluster we started, stopped) after."""
    one_line_logs()
    if spec == "local":
        with _local(service) as client:
            yield client
    elif spec == "slurm":
        with _slurm(service, nodes, gpus_per_node, partition, gres, walltime) as client:
            yield client
    else:
        check_spec(spec)
        with _connect(scheduler_address(spec)) as client:
            yield client


def shown(value: str, limit: int = 80) -> str:
    """An outside value in a one-line message: quoted, control characters and newlines escaped, long ones cut."""
    cut = f" … ({len(value):,} characters)" if len(value) > limit else ""
    return repr(value[:limit]) + cut


DNS_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
MAX_HANDSHAKE_BYTES = 1 << 16  # a Dask handshake is a few hundred bytes of msgpack


def scheduler_address(spec: str) -> tuple[str, int]:
    """(host, port) of ``tcp://HOST:PORT`` (HOST: DNS labels, an IPv4 address or a bracketed IPv6 one); FleetError
    naming the value otherwise, before anything is resolved or connected."""
    found = re.fullmatch(r"tcp://(\[[^\[\]/]*\]|[^\[\]/:]+):([0-9]{1,5})", spec)
    usage = "give tcp://HOST:PORT, HOST a host name or an IP address, PORT 1–65535 (a running Dask scheduler)"
    if found is None:
        raise FleetError(f"cluster address {shown(spec)} is not tcp://HOST:PORT: {usage}")
    host, port = found.group(1), int(found.group(2))
    if not 1 <= port <= 65535:
        raise FleetError(f"cluster address {shown(spec)}: port {port} is not 1–65535")
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise FleetError(f"cluster address {shown(spec)}: {shown(host)} is not an IPv6 address") from None
        return host[1:-1], port
    with contextlib.suppress(ValueError):
        ipaddress.IPv4Address(host)
        return host, port
    labels = host.removesuffix(".").split(".")
    if len(host) > 253 or not all(DNS_LABEL.fullmatch(label) for label in labels):
        raise FleetError(f"cluster address {shown(spec)}: host {shown(host, 40)} is not a host name (letters, digits "
                         "and hyphens, labels of at most 63 characters, 253 in all) or an IP address")
    return host, port


def probe_scheduler(host: str, port: int, timeout: float = 10.0) -> str | None:
    """None when a Dask scheduler answers at (host, port) within ``timeout`` seconds (name resolution included);
    otherwise why not, in words. The probe reads the handshake the scheduler sends on accepting a connection: an
    8-byte length, then that many bytes of frames whose message is a dict naming the peer's compression and Python."""
    outcome: list[str | None] = []

    def probe() -> None:
        deadline = time.monotonic() + timeout
        try:
            with socket.create_connection((host, port), timeout=timeout) as sock:
                head = _read(sock, 8, deadline)
                (length,) = struct.unpack("<Q", head)
                if not 16 <= length <= MAX_HANDSHAKE_BYTES:
                    outcome.append(f"it answered with bytes that are not a Dask handshake (a length of {length:,})")
                    return
                outcome.append(None if _is_handshake(_read(sock, length, deadline)) else
                               "it answered with bytes that are not a Dask handshake")
        except TimeoutError:
            outcome.append(f"nothing answered as a Dask scheduler within {timeout:.0f} s")
        except socket.gaierror as exc:
            outcome.append(f"the host is not known here ({exc.strerror or exc})")
        except EOFError:
            outcome.append("it closed the connection without a Dask handshake")
        except OSError as exc:
            outcome.append(f"it cannot be reached ({exc.strerror or type(exc).__name__})")

    thread = threading.Thread(target=probe, daemon=True, name="pinpoint-scheduler-probe")
    thread.start()
    thread.join(timeout + 1)  # name resolution has no timeout of its own: the probe is waited for no longer
    return outcome[0] if outcome else f"nothing answered as a Dask scheduler within {timeout:.0f} s"


def _read(sock: socket.socket, count: int, deadline: float) -> bytes:
    data = b""
    while len(data) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _is_handshake(data: bytes) -> bool:
    try:
        message = loads(unpack_frames(data), deserialize=False)
    except Exception:  # bytes of anything else: not a handshake
        return False
    return isinstance(message, dict) and {"compression", "python"} <= set(message)


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
def _connect(location: tuple[str, int]):
    host, port = location
    address = f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"
    problem = probe_scheduler(host, port, CONNECT_TIMEOUT_S)
    if problem is None:
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT_S)
        except Exception as exc:  # it answered the probe, then not Dask's connect: still one line
            problem = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    if problem is not None:
        raise FleetError(f"no Dask scheduler at {address}: {problem}; start it with `dask scheduler` and check the "
                         "address") from None
    try:
        yield client
    finally:
        close_client(client)


def close_client(client: Client) -> None:
    """Close ``client`` without waiting on a scheduler that is gone (its close would retry for a while)."""
    with contextlib.suppress(Exception):
        client.close(timeout=CONNECT_TIMEOUT_S)
