"""The GPU worker process: the one place where PyCUDA runs.

Started with multiprocessing ``spawn`` (never fork after CUDA is initialised). Its main thread retains
the device's primary context, compiles every kernel once, then serves jobs from a queue one at a time,
so timings never overlap. Each job frees all it allocated before the next starts. After a job fails
with a CUDA error, a health-check kernel runs; if the error is one that poisons the context (illegal
address, launch failure, …) or the check fails, the worker reports the job as fatal and exits, and the
client starts a fresh process for the next job.

Messages to the client are the dataclasses of ``gpu.service.messages`` on the event queue: ``Hello`` or ``InitFailed``
once, then per job ``Progress`` and ``Row`` (one measured point, a complete schema row, sent as soon as it is
verified) until one ``Result`` (then ``Freed`` once its buffers are freed) or ``Failure``.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import time
import traceback
import uuid
from pathlib import Path

from gpu.core import devices, gpu_workers, schema
from gpu.core.errors import DeviceNotFound, JobCancelled, ValidationError, VerificationError
from gpu.device import libcuda
from gpu.device.context import visible_gpus
from gpu.device.device_set import DeviceSet
from gpu.device.driver_occupancy import driver_occupancy_table
from gpu.device.memory import warm_plan
from gpu.experiments import REGISTRY, get_experiment, in_point_order, sweep_of
from gpu.experiments.method import method_version
from gpu.experiments.request import Request
from gpu.service.client import SETTLE_ENV, WARM_UPS_ENV, load_service_class
from gpu.service.messages import Failure, Freed, Hello, InitFailed, Progress, Result, Row
from gpu.service.parent_watch import exit_with_parent

EXIT_AFTER_FATAL = 70
SETTLE_LIMIT_S = 30.0  # the longest it waits


def _rss_bytes() -> int:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class JobProgress:
    """A job's progress callback, ``progress(done, total, text)``, that can also send a finished row at once
    (``progress.row(row)``), so the page draws points as they are measured. ``conditions_now``: the service's latest
    witness reading (a live conditions strip), sent with each progress message."""

    def __init__(self, event_queue, job_id: int, conditions_now=None):
        self._events, self._job_id, self._now = event_queue, job_id, conditions_now

    def __call__(self, done, total, text="") -> None:
        try:
            now = dict(self._now()) if self._now is not None else {}
        except Exception:  # a strip's reading never fails a job
            now = {}
        self._events.put(Progress(self._job_id, int(done), int(total), str(text), now))

    def row(self, row: dict) -> None:
        self._events.put(Row(self._job_id, row))


class _RunRowProgress:
    """Passes progress on, and completes each streamed row with its run's id, experiment and provenance."""

    def __init__(self, progress, run_columns: dict):
        self._progress, self._run_columns = progress, run_columns
        if hasattr(progress, "row"):
            self.row = lambda row: progress.row({**run_columns, **row})

    def __call__(self, done, total, text="") -> None:
        self._progress(done, total, text)


class GpuService:
    """Job handlers on top of a ``DeviceSet`` (built on the worker's main thread): one GPU, or several that a job
    measures together (the peers experiment). ``self.runtime`` is the set's first GPU, where one-GPU jobs run."""

    visible_gpus = staticmethod(visible_gpus)  # the GPUs to choose from, asked before a runtime exists

    def __init__(self, device: str | int | None = None, devices: list | None = None):
        """``device``: an index or a board UUID (``--device``, ``PINPOINT_DEVICE``); None: the first visible GPU.
        ``devices``: several of them (indices or UUIDs), held together, the first one's context current; it
        replaces ``device``."""
        self.gpus = visible_gpus()
        wanted = list(devices) if devices else [device]
        ordinals = [self._choose(spec) for spec in wanted]
        self.devices = DeviceSet(ordinals)
        self.runtime = self.devices.first
        self.warmed = self._warm_up()
        # A fleet's worker (``gpu.fleet.task`` sets this) answers only once its warm-ups' background work is done.
        self.settled = self.settle() if os.environ.get(SETTLE_ENV) == "1" else {}
        if os.environ.get(SETTLE_ENV) == "1":
            # A fleet's worker imports pandas now: its first job's frame would (0.3 s of that GPU's first run), and a
            # fleet's worker starts before any run is submitted. The app's worker keeps its quick start.
            import pandas  # noqa: F401
        self.methods  # noqa: B018 (hashed now, once the sweeps are imported and the kernels compiled)

    @functools.cached_property
    def methods(self) -> dict[str, str]:
        """Each experiment's method version (``gpu.experiments.method``), hashed once per worker: the sources this
        worker measures with, recorded with every run it measures."""
        return {entry.name: method_version(entry) for entry in REGISTRY}

    def _warm_up(self) -> dict:
        """Each sweep that declares ``warm_up(gpu)`` builds, as the worker starts, what its first job would
        otherwise build while a person waits: a kernel PyCUDA compiles on first use, host data started on a thread.
        Seconds each took, or why it failed: a failed warm-up costs only its own experiment's first job the time.
        ``PINPOINT_WARM_UPS`` (``WARM_UPS_ENV``) names the experiments to warm up (a fleet's worker: its suite's);
        unset, every one. The daemon threads a warm-up leaves running (host data built in the background) are kept in
        ``warm_threads``, for ``settle`` to wait for."""
        warmed = {}
        self.warm_threads: list[threading.Thread] = []
        listed = os.environ.get(WARM_UPS_ENV)  # a fleet's worker warms up only what its suite measures
        wanted = None if listed is None else {name.strip() for name in listed.split(",") if name.strip()}
        for entry in REGISTRY:
            if wanted is not None and entry.module.NAME not in wanted:
                continue
            sweep = entry.sweep_module()
            if hasattr(sweep, "warm_up"):
                started = time.perf_counter()
                before = set(threading.enumerate())
                try:
                    sweep.warm_up(self.runtime)
                    warmed[entry.module.NAME] = round(time.perf_counter() - started, 3)
                except Exception as exc:  # the experiment's own job meets it again, and says so
                    warmed[entry.module.NAME] = f"failed: {type(exc).__name__}: {exc}"
                self.warm_threads += [t for t in threading.enumerate() if t not in before and t.daemon]
        return warmed

    def settle(self, limit_s: float = SETTLE_LIMIT_S) -> dict:
        """Wait (at most ``limit_s`` in all) for the background work the warm-ups started: a fleet's first run then
        measures on a host that is not building another experiment's data on several cores beside it (the Transfers
        sweep's pageable copies run on the host's memory). Seconds waited, and threads still running after the limit."""
        started = time.perf_counter()
        threads = getattr(self, "warm_threads", [])
        for thread in threads:
            thread.join(max(0.0, limit_s - (time.perf_counter() - started)))
        self.warm_threads = [t for t in threads if t.is_alive()]
        running = [t.name for t in self.warm_threads]
        return {"waited_s": round(time.perf_counter() - started, 3), "still_running": running}

    def _choose(self, spec) -> int:
        return devices.choose(spec, self.gpus)

    def hello(self) -> dict:
        """The first GPU's facts and limits (as one-GPU callers read them), every visible GPU (``gpus``), and the
        set this worker holds: its ordinals (``gpu_indices``) and each GPU's index, UUID, name and limits
        (``devices``), with the peer access and link of every ordered pair (``links``); ``warmed``: what the
        sweeps' warm-ups took; ``settled``: how long the worker waited for their background work (a fleet's)."""
        return {"facts": self.runtime.facts, "limits": self.runtime.limits().as_dict(), "pid": os.getpid(),
                "occupancy_device": self.runtime.occupancy_limits().as_dict(), "gpus": self.gpus,
                "gpu_index": self.runtime.device_ordinal, "gpu_indices": self.devices.ordinals,
                "devices": self.devices.devices(), "warmed": self.warmed, "settled": self.settled,
                "links": [{"source": a, "destination": b, "peer_access": self.devices.can_peer(a, b),
                           "link": self.devices.link(a, b)} for a, b in self.devices.pairs()]}

    def handle(self, job: dict, progress, should_cancel):
        kind = job["kind"]
        if kind == "experiment":
            # Parsed and checked where it was asked for; the sweep re-checks only the memory free now.
            request = checked(job)
            module = get_experiment(request.experiment)
            params = getattr(module, "with_devices", lambda p, _: p)(request.params, self.devices.ordinals)
            provenance = {**self.runtime.provenance(),  # the timestamp says when the run started
                          "method_version": self.methods.get(module.NAME)}
            point = {"run_id": uuid.uuid4().hex[:12], "experiment": module.NAME}
            measure = sweep_of(module.NAME)
            rows = measure(params, self.devices, _RunRowProgress(progress, {**provenance, **point}), should_cancel)
            frame = schema.make_frame([{**point, **row} for row in rows], provenance)
            return in_point_order(frame, module, params)  # measured story-first, returned in point order
        if kind == "warm_host_pool":
            sweeps = [(entry, entry.sweep_module()) for entry in REGISTRY]
            wanted = [buffer for entry, sweep in sweeps if hasattr(sweep, "pooled_host_buffers")
                      for buffer in sweep.pooled_host_buffers(entry.module.parse_params({}))]
            # Only where the pinned budget and the host's memory leave room for a job's own beside them.
            limits = self.runtime.limits()
            self.runtime.warm_host_pool(warm_plan(wanted, self.runtime.host_pool.capacity_bytes,
                                                  limits.pinned_budget_bytes, limits.host_available_bytes))
            return {"pooled_bytes": self.runtime.host_pool.held_bytes}
        if kind == "health":
            return self.runtime.health_check()
        if kind == "memory":
            free, total = self.runtime.cuda.mem_get_info()
            return {"free_device_bytes": int(free), "total_device_bytes": int(total), "rss_bytes": _rss_bytes(),
                    "host_pool": self.runtime.host_pool.counts()}
        if kind == "limits":
            return self.runtime.limits().as_dict()
        if kind == "occupancy_driver":
            return driver_occupancy_table(self.runtime)
        if kind == "fault":
            return self.runtime.fault()
        raise ValidationError([f"unknown job kind '{kind}'"])

    def after_error(self, exc: BaseException) -> bool:
        """True when the context is still usable after ``exc``: not after a sticky CUDA error (by its CUresult), nor
        when the health check then fails (which also catches a sticky error whose code could not be known)."""
        if libcuda.is_sticky(exc):
            return False
        try:
            for ordinal in self.devices.ordinals:  # every GPU of the set: a peer job touches them all
                with self.devices.activate(ordinal):
                    self.devices[ordinal].health_check()
            return True
        except Exception:
            return False

    def conditions_now(self) -> dict:
        """The first GPU's latest witness reading (``gpu.device.witness.Witness.now``), with its ordinal."""
        reading = self.runtime.telemetry.now()
        return {"gpu": self.runtime.device_ordinal, **reading} if reading else {}

    def after_reply(self) -> None:
        """Once a job's answer is on its way: free what the job allocated (on every GPU of the set)."""
        self.devices.release_after_reply()

    def close(self) -> None:
        self.devices.close()


def checked(job: dict) -> Request:
    """An experiment job's request, as its client checked it: a ``Request``, never plain values to parse."""
    request = job.get("request")
    if not isinstance(request, Request):
        raise ValidationError([f"an experiment job carries a checked request, not {type(request).__name__}"])
    return request


def load_service(spec: str, options: dict):
    return load_service_class(spec)(**(options or {}))


def serve(job_queue, event_queue, cancel_value, service_spec: str, service_options: dict) -> None:
    """Process entry point: build the service, announce it, serve jobs until a None arrives."""
    exit_with_parent()  # a killed app, runner or Dask worker never leaves this process holding the GPU
    marked = gpu_workers.mark()  # another PinPoint worker's witness reads this process as one waiting its turn
    atexit.register(gpu_workers.unmark, marked)
    try:
        service = load_service(service_spec, service_options)
        event_queue.put(Hello(service.hello()))
    except DeviceNotFound as exc:  # the chosen GPU is not here: the message lists those that are
        event_queue.put(InitFailed(str(exc), kind="device"))
        return
    except BaseException as exc:  # no device, no driver, compile failure: say why and leave
        event_queue.put(InitFailed(f"{type(exc).__name__}: {exc}"))
        return
    while True:
        job = job_queue.get()
        if job is None:
            break
        job_id = job["id"]

        progress = JobProgress(event_queue, job_id, getattr(service, "conditions_now", None))

        def should_cancel(_id=job_id) -> bool:
            return cancel_value.value == _id

        try:
            event_queue.put(Result(job_id, service.handle(job, progress, should_cancel)))
            getattr(service, "after_reply", lambda: None)()  # the page draws while buffers are freed
            event_queue.put(Freed(job_id))  # now another worker's job may measure on these GPUs
            continue
        except JobCancelled:
            event_queue.put(Failure(job_id, "cancelled", "cancelled: a newer request replaced this job"))
            continue
        except ValidationError as exc:
            event_queue.put(Failure(job_id, "validation", str(exc), exc.reasons))
            continue
        except VerificationError as exc:
            failure, kind, message = exc, "verification", f"wrong result, so no figure is reported: {exc}"
        except Exception as exc:
            failure, message = exc, f"{type(exc).__name__}: {exc}"
            kind = "cuda" if libcuda.is_cuda_error(exc) else "internal"
            traceback.print_exc()
        usable = service.after_error(failure)
        event_queue.put(Failure(job_id, kind, message, fatal=not usable))
        if not usable:
            # The context is gone for good: leave without touching CUDA again; the client restarts us.
            event_queue.close()
            event_queue.join_thread()
            os._exit(EXIT_AFTER_FATAL)
    service.close()
