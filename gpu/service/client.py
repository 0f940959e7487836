"""The app's side of the GPU worker: submit jobs, follow their progress, cancel, survive a dead worker.

One ``WorkerClient`` is one worker process on one device set (a GPU, a pair, all of a node's) and serves every
browser session (the app caches one per set with ``st.cache_resource``), so everything here is thread-safe. Its jobs
run strictly one after another, in turn by owner (``locks.Turns``: the signed-in person whose job it served longest
ago goes first, so one person's sweeps cannot starve another's). A person has at most one queued job: their new job
replaces the one still queued; a session's new job also cancels its previous one (pending jobs are dropped, a running
one stops at its next sweep point). A queued job says whose job it waits behind, as the person asking may know it
(``jobs.JobHandle.queue_text``); only an admin cancels another person's job (``cancel_as``). Before a job measures, the
client takes the lock of every GPU in its set from the process's ``GpuLocks``, which serves each GPU's waiters in
turn by owner too: a job on GPUs 0,1 and a job on GPU 1 never measure at once, while jobs on GPU 0 and on GPU 1 do.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import importlib
import itertools
import multiprocessing as mp
import queue
import sys
import threading
import time
import types
from contextlib import contextmanager

from gpu.core.access import Actor, require
from gpu.core.errors import DeviceNotFound, PinPointError, ValidationError, WorkerError, WorkerUnavailable
from gpu.service.host_locks import GpuBusy, HostClaim, LockFolderUnusable, clean, process_purpose
from gpu.service.jobs import JobHandle
from gpu.service.locks import GPU_LOCKS, GpuClaim, GpuLocks, Turns
from gpu.service.messages import Failure, Freed, Hello, InitFailed, Progress, Result, Row
from gpu.service.parent_watch import exit_with_parent

DEFAULT_SERVICE = "gpu.service.worker:GpuService"
FREED_TIMEOUT_S = 60.0  # the longest a finished job's GPUs wait for its worker to free its buffers
WORKER_MODULE = "gpu.service.worker"  # it loads the device layer: imported only in the worker's own process
# "1" in a worker's environment (a fleet's, ``gpu.fleet.task``): it waits for its warm-ups' background work (host data
# built on a thread) before its hello, so no run measures beside it.
SETTLE_ENV = "PINPOINT_SETTLE_WARM_UPS"
# The experiments whose warm-ups a worker runs as it starts, comma-separated (a fleet's worker: its suite's; unset:
# every experiment's, as the app's worker).
WARM_UPS_ENV = "PINPOINT_WARM_UPS"


def serve_in_worker(*args) -> None:
    """The worker process' entry point, ``gpu.service.worker.serve``, imported there and never in the app's process
    (the spawned child imports this module, then the worker's)."""
    importlib.import_module(WORKER_MODULE).serve(*args)


def load_service_class(spec: str):
    """The service class that ``module:Class`` names (GpuService, or a test's stand-in), imported by name: the app's
    process names it, the worker's process loads it."""
    module_name, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module_name), attr)


_MAIN_SWAP = threading.Lock()


@contextmanager
def main_module_hidden():
    """Start spawned children without re-running the parent's ``__main__``.

    ``spawn`` re-imports the parent's main module in the child. Under Streamlit that module is the app
    script itself (Streamlit installs it as ``__main__``), so the worker would run app.py and die.
    The worker needs nothing from ``__main__``: show ``Process.start`` an empty one.
    """
    with _MAIN_SWAP:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = main


def visible_gpus(service: str = DEFAULT_SERVICE, timeout_s: float = 120.0) -> list[dict]:
    """The GPUs that ``service``'s workers would see here (index, model, board UUID, host), asked in a spawned process:
    this one never initialises CUDA. WorkerUnavailable, in one line, where they cannot be listed (no driver)."""
    with main_module_hidden(), concurrent.futures.ProcessPoolExecutor(
            1, mp_context=mp.get_context("spawn"), initializer=exit_with_parent) as pool:
        try:
            return pool.submit(_list_gpus, service).result(timeout=timeout_s)
        except PinPointError:
            raise
        except Exception as exc:  # no driver, no PyCUDA, a probe that hung
            raise WorkerUnavailable(f"cannot list this machine's GPUs: {type(exc).__name__}: {exc}") from None


def _list_gpus(service: str) -> list[dict]:
    return list(load_service_class(service).visible_gpus())


def _owner(handle: JobHandle) -> str | None:
    return handle.owner


class WorkerClient:
    """A worker process on one device set (``service_options``: ``{"device": …}`` or ``{"devices": [0, 1]}``, as
    the service takes them) and the queue of its jobs. ``locks``: the GPU lock table shared with the process's other
    clients (the process's own by default). ``purpose``: what its jobs measure for, as other processes waiting for
    its GPUs read it (default: the process's, ``host_locks.process_purpose``); ``wait_s``: how long a job waits for a
    GPU that another process measures on before it is refused (``GpuBusy``; None: no limit)."""

    def __init__(self, service: str = DEFAULT_SERVICE, service_options: dict | None = None,
                 start_timeout: float = 180.0, locks: GpuLocks | None = None, purpose: str | None = None,
                 wait_s: float | None = None):
        self._context = mp.get_context("spawn")
        self._service = service
        self._options = service_options or {}
        self._start_timeout = start_timeout
        self._gpu_locks = locks if locks is not None else GPU_LOCKS
        self.purpose, self.wait_s = purpose, wait_s
        self._lock = threading.Condition()
        self._pending: list[JobHandle] = []  # in the order they came; served in ``self._turns``' order
        self._turns = Turns()
        self._running: JobHandle | None = None
        self._ids = itertools.count(1)
        self._process = None
        self._closed = False
        self._cancel_reason = ""  # why the running job was cancelled, when someone else cancelled it
        self.info: dict = {}
        self.restarts = 0
        self._start_worker()
        self._dispatcher = threading.Thread(target=self._dispatch_loop, name="pinpoint-dispatch", daemon=True)
        self._dispatcher.start()
        atexit.register(self.close)

    # --- worker process -------------------------------------------------------------------------
    def _start_worker(self) -> None:
        self._jobs = self._context.Queue()
        self._events = self._context.Queue()
        self._cancel = self._context.Value("q", 0)
        self._process = self._context.Process(
            target=serve_in_worker, args=(self._jobs, self._events, self._cancel, self._service, self._options),
            name="pinpoint-gpu-worker", daemon=True)
        with main_module_hidden():
            self._process.start()
        deadline = time.monotonic() + self._start_timeout
        while True:
            try:
                message = self._events.get(timeout=0.2)
            except queue.Empty:
                if not self._process.is_alive():
                    raise WorkerUnavailable(f"the GPU worker exited during start-up "
                                            f"(exit code {self._process.exitcode})") from None
                if time.monotonic() > deadline:
                    self._process.terminate()
                    limit = f"{self._start_timeout:.0f} s"
                    raise WorkerUnavailable(f"the GPU worker did not start within {limit}") from None
                continue
            if isinstance(message, Hello):
                self.info = message.info
                return
            if isinstance(message, InitFailed):
                self._process.join(5)
                raise (DeviceNotFound if message.kind == "device" else WorkerUnavailable)(message.message)

    @property
    def worker_pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def gpu_indices(self) -> list[int]:
        """The ordinals of the GPUs this worker holds, as its hello reported them ([] where it names none)."""
        if "gpu_indices" in self.info:
            return [int(i) for i in self.info["gpu_indices"]]
        return [int(self.info["gpu_index"])] if self.info.get("gpu_index") is not None else []

    def gpu_claim(self, owner: str | None = None) -> GpuClaim:
        """A claim on this worker's GPUs for ``owner``'s job, each GPU named by its board UUID where the hello lists
        it (two workers that name the same board by different spellings still share its lock)."""
        uuids = {int(g["index"]): g.get("uuid") for g in self.info.get("gpus", []) if "index" in g}
        indices = self.gpu_indices
        return GpuClaim(tuple(str(uuids.get(i) or f"index {i}") for i in indices), tuple(indices), owner)

    def _worker_alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    # --- public API -----------------------------------------------------------------------------
    def submit(self, kind: str, payload: dict | None = None, session: str | None = None,
               owner: str | None = None) -> JobHandle:
        """Queue a job; ``owner``: whose it is (the signed-in person), for their turn and their one queued job."""
        handle = JobHandle(id=next(self._ids), kind=kind, session=session, payload=payload or {}, owner=owner)
        with self._lock:
            if self._closed:
                raise WorkerUnavailable("the GPU worker has been shut down")
            if session is not None:
                self._cancel_session_locked(session)
            if owner is not None:  # one queued job a person: the new one replaces theirs still waiting
                for queued in [h for h in self._pending if h.owner == owner]:
                    self._cancel_locked(queued)
            self._pending.append(handle)
            self._number_queue_locked()
            self._lock.notify_all()
        return handle

    def run(self, kind: str, payload: dict | None = None, session: str | None = None):
        """Submit and wait; returns the result or raises the job's error."""
        return self.submit(kind, payload, session).outcome()

    def cancel(self, handle: JobHandle) -> None:
        with self._lock:
            self._cancel_locked(handle)

    def cancel_as(self, actor: Actor, handle: JobHandle) -> None:
        """``actor`` cancels ``handle``: their own job, or anyone's when their role may (an admin); AccessRefused, in
        one line, otherwise, and the job goes on."""
        if handle.owner is None or handle.owner != actor.who:
            require(actor, "cancel_any")
        with self._lock:
            self._cancel_locked(handle, f"cancelled by {actor.who}" if handle.owner != actor.who else "")

    def jobs(self) -> list[JobHandle]:
        """The job measuring (or waiting for its GPUs), then the queued ones in the order they will be served."""
        with self._lock:
            return ([self._running] if self._running is not None else []) + self._turns.order(self._pending, _owner)

    def queued_ahead(self, handle: JobHandle) -> int:
        with self._lock:
            order = self._turns.order(self._pending, _owner)
            if handle in order:
                return order.index(handle) + (1 if self._running else 0)
            return handle.queued_ahead if handle is self._running and handle.state == "queued" else 0

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for handle in self._pending:
                handle.finish("cancelled", error=WorkerError("the GPU worker shut down"))
            self._pending.clear()
            if self._running is not None:
                self._cancel.value = self._running.id
            self._lock.notify_all()
        if self._process is not None and self._process.is_alive():
            self._jobs.put(None)
            self._process.join(10)
            if self._process.is_alive():
                self._process.terminate()
                self._process.join(5)

    # --- internals --------------------------------------------------------------------------------
    def _cancel_session_locked(self, session: str) -> None:
        for handle in [h for h in self._pending if h.session == session]:
            self._cancel_locked(handle)
        if self._running is not None and self._running.session == session:
            self._cancel_locked(self._running)

    def _cancel_locked(self, handle: JobHandle, why: str = "") -> None:
        if handle in self._pending:
            self._pending.remove(handle)
            handle.finish("cancelled", error=WorkerError(why or "cancelled: a newer request replaced this job"))
            self._number_queue_locked()
        elif handle is self._running:
            self._cancel.value = handle.id
            self._cancel_reason = why

    def _number_queue_locked(self) -> None:
        """Each queued job's place in the turns, and the owner of the job it waits behind (the one measuring, else
        the one served before it)."""
        order = self._turns.order(self._pending, _owner)
        running = self._running
        for position, waiting in enumerate(order):
            waiting.queued_ahead = position + (1 if running else 0)
            ahead = running if position == 0 else order[position - 1]
            waiting.ahead_owner = ahead.owner if ahead is not None else None

    def _dispatch_loop(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._lock.wait()
                if self._closed:
                    return
                handle = self._turns.order(self._pending, _owner)[0]  # whose turn it is
                self._pending.remove(handle)
                self._turns.served(handle.owner)
                self._running, self._cancel_reason = handle, ""
                self._number_queue_locked()
            try:
                self._run_one(handle)
            except Exception as exc:  # never let the dispatcher die: fail this job, keep serving
                handle.finish("failed", error=WorkerError(f"internal error: {exc}"))
            finally:
                with self._lock:
                    self._running = None

    def _ensure_worker(self) -> None:
        if self._worker_alive():
            return
        self.restarts += 1
        self._start_worker()

    def _run_one(self, handle: JobHandle) -> None:
        """Run ``handle`` once every GPU of this worker's set is free; its GPUs are given back however it ends."""
        claim = self.gpu_claim(handle.owner)

        def waiting(what: str, ahead: int) -> None:
            handle.waiting, handle.queued_ahead = what, ahead
            handle.ahead_owner = claim.behind.owner if what and claim.behind is not None else None

        def cancelled() -> bool:
            return self._cancel.value == handle.id or self._closed

        def cancel() -> None:
            why = "the GPU worker shut down" if self._closed else \
                self._cancel_reason or "cancelled: a newer request replaced this job"
            handle.finish("cancelled", error=WorkerError(why))

        if not self._gpu_locks.acquire(claim, cancelled, waiting):
            cancel()
            return
        try:
            # Then the same GPUs, in the same order, across the machine's processes (the runner, a fleet, the tests).
            host = HostClaim(claim.keys, claim.indices, self.job_purpose(handle))
            try:
                if not host.acquire(cancelled, lambda what: waiting(what, 0), self.wait_s):
                    cancel()
                    return
            except (GpuBusy, LockFolderUnusable) as exc:
                handle.finish("failed", error=exc)
                return
            try:
                self._measure(handle)
            finally:
                host.release()
        finally:
            self._gpu_locks.release(claim)

    def job_purpose(self, handle: JobHandle) -> str:
        """What ``handle`` measures for, as another process waiting for its GPUs reads it: "the app (owner ada@…)"."""
        purpose = self.purpose or process_purpose()
        return f"{purpose} (owner {clean(handle.owner, 40)})" if handle.owner else purpose

    def _await_freed(self, job_id: int) -> None:
        """Keep a finished job's GPUs until its worker has freed what the job allocated (the page draws meanwhile),
        so the next job on them, in any worker, starts on a quiet GPU."""
        deadline = time.monotonic() + FREED_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                message = self._events.get(timeout=0.2)
            except queue.Empty:
                if not self._worker_alive():
                    return
                continue
            if isinstance(message, Freed) and message.job_id == job_id:
                return

    def _measure(self, handle: JobHandle) -> None:
        try:
            self._ensure_worker()
        except WorkerUnavailable as exc:
            handle.finish("failed", error=WorkerError(f"the GPU worker could not be restarted: {exc}", fatal=True))
            return
        handle.state = "running"
        handle.queued_ahead = 0
        self._jobs.put({"id": handle.id, "kind": handle.kind, **handle.payload})
        while True:
            try:
                message = self._events.get(timeout=0.2)
            except queue.Empty:
                if not self._worker_alive():
                    code = self._process.exitcode
                    handle.finish("failed", error=WorkerError(
                        f"the GPU worker died during this job (exit code {code}); a fresh one starts for the "
                        "next job", fatal=True))
                    return
                continue
            if getattr(message, "job_id", None) != handle.id:
                continue  # a late message from a job already given up on
            if isinstance(message, Progress):
                handle.done, handle.total, handle.text = message.done, message.total, message.text
                handle.conditions_now = message.conditions_now
            elif isinstance(message, Row):
                handle.rows.append(message.row)
            elif isinstance(message, Result):
                handle.finish("done", result=message.payload)
                self._await_freed(handle.id)
                return
            elif isinstance(message, Failure):
                if message.fatal:
                    self._process.join(10)  # it exits by itself; the next job starts a new one
                if message.kind == "validation":
                    handle.finish("failed", error=ValidationError(message.reasons or [message.message]))
                elif message.kind == "cancelled":  # by the person's newer job, or by an admin (who is named)
                    handle.finish("cancelled", error=WorkerError(self._cancel_reason or message.message))
                else:
                    handle.finish("failed", error=WorkerError(message.message, fatal=message.fatal))
                return
