"""One error hierarchy, CUDA errors classified by CUresult code, and the worker's messages (no GPU needed)."""

import contextlib
import pickle
import queue
import sys
import types

import pytest

from gpu.core import errors
from gpu.core.errors import CudaError, PinPointError
from gpu.core.schema import SchemaError
from gpu.core.units import SizeError
from gpu.device import libcuda
from gpu.results.exchange.imports import ImportProblem
from gpu.results.persistence.store import StoreError
from gpu.service import worker
from gpu.service.client import JobHandle
from gpu.service.messages import Failure, Freed, Hello, InitFailed, Progress, Result, Row


def test_every_pinpoint_error_has_one_root_and_keeps_its_builtin_base():
    value_errors = [errors.ValidationError, SizeError, SchemaError, ImportProblem]
    runtime_errors = [errors.VerificationError, errors.WorkerError, errors.WorkerUnavailable, CudaError, StoreError]
    for cls in [*value_errors, *runtime_errors, errors.JobCancelled]:
        assert issubclass(cls, PinPointError), cls
    assert all(issubclass(cls, ValueError) for cls in value_errors)
    assert all(issubclass(cls, RuntimeError) for cls in runtime_errors)
    roots = {cls for name in dir(errors) if isinstance(cls := getattr(errors, name), type)
             and issubclass(cls, Exception) and not issubclass(cls, PinPointError)}
    assert roots == set()


@pytest.fixture
def fake_pycuda(monkeypatch):
    """A stand-in for pycuda.driver's exception classes, as the worker process has them loaded."""
    driver = types.ModuleType("pycuda.driver")

    class Error(Exception):
        pass

    class LogicError(Error):
        pass

    class LaunchError(Error):
        pass

    driver.Error, driver.LogicError, driver.LaunchError = Error, LogicError, LaunchError
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    return driver


@pytest.mark.parametrize(("message", "code"), [
    ("cuCtxSynchronize failed: an illegal memory access was encountered", 700),
    ("cuMemcpyDtoH failed: unspecified launch failure", 719),
    ("cuCtxSynchronize failed: misaligned address", 716),
    ("context::detach failed: device-side assert triggered - cannot detach", 710),
])
def test_a_pycuda_error_is_classified_by_the_code_behind_its_message(fake_pycuda, message, code):
    exc = fake_pycuda.LogicError(message)
    assert libcuda.result_code(exc) == code
    assert libcuda.is_sticky(exc) and libcuda.is_cuda_error(exc)


def test_harmless_cuda_errors_and_other_errors_are_not_sticky(fake_pycuda):
    assert not libcuda.is_sticky(fake_pycuda.LaunchError("cuLaunchKernel failed: too many resources requested "
                                                         "for launch"))
    assert libcuda.is_cuda_error(fake_pycuda.LaunchError("cuLaunchKernel failed: launch out of resources"))
    # The same text from something that is not a CUDA error carries no CUresult.
    plain = RuntimeError("cuCtxSynchronize failed: an illegal memory access was encountered")
    assert libcuda.result_code(plain) is None and not libcuda.is_sticky(plain) and not libcuda.is_cuda_error(plain)
    assert not libcuda.is_sticky(fake_pycuda.Error("no 'failed:' here: an illegal memory access was encountered"))


def test_without_pycuda_loaded_nothing_is_a_pycuda_error(monkeypatch):
    monkeypatch.delitem(sys.modules, "pycuda.driver", raising=False)
    assert not libcuda.is_pycuda_error(RuntimeError("cuCtxSynchronize failed: an illegal memory access was "
                                                    "encountered"))


def test_a_cuda_error_carries_its_code_and_stickiness():
    exc = CudaError(700, "cuMemPrefetchAsync", "an illegal memory access was encountered", sticky=True)
    assert libcuda.result_code(exc) == 700 and libcuda.is_sticky(exc) and exc.sticky
    assert str(exc) == "cuMemPrefetchAsync failed: an illegal memory access was encountered (CUresult 700)"
    assert libcuda.result_code(CudaError(2, "cuMemAlloc")) == 2 and not libcuda.is_sticky(CudaError(2, "cuMemAlloc"))
    assert libcuda.STICKY_CODES == set(libcuda.KNOWN_DESCRIPTIONS)


def _every_error_class() -> list[type]:
    found, todo = [], [PinPointError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_pinpoint_error_crosses_processes_pickled_whole():
    """An error raised in another process (a Dask worker's fleet run, a spawned process's check) comes back pickled.
    CudaError failed to unpickle (a multiprocessing pool's result handler then dies and its caller waits for ever),
    ValidationError came back with its reasons split into characters, and WorkerError without ``fatal``."""
    made = {errors.ValidationError: errors.ValidationError(["size 3 is not a power of two", "block 7 is odd"]),
            CudaError: CudaError(700, "cuMemcpyDtoH", "an illegal memory access was encountered", sticky=True),
            errors.WorkerError: errors.WorkerError("the worker stopped", fatal=True)}
    for cls in _every_error_class():
        exc = made.get(cls) or cls(f"{cls.__name__}: one line for the person")
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is cls and str(back) == str(exc), cls
        assert {k: v for k, v in vars(back).items()} == {k: v for k, v in vars(exc).items()}, cls
    assert pickle.loads(pickle.dumps(made[errors.ValidationError])).reasons == ["size 3 is not a power of two",
                                                                                  "block 7 is odd"]
    assert pickle.loads(pickle.dumps(made[errors.WorkerError])).fatal is True
    assert libcuda.is_sticky(pickle.loads(pickle.dumps(made[CudaError])))


class _Runtime:
    def __init__(self, healthy: bool):
        self.healthy, self.checks = healthy, 0

    def health_check(self):
        self.checks += 1
        if not self.healthy:
            raise RuntimeError("health check kernel wrote wrong values")
        return {"ok": True}


class _OneGpuSet:
    """A device set of one runtime, as the worker holds it (``DeviceSet``): ordinals, activate, by ordinal."""

    def __init__(self, runtime):
        self.ordinals, self._runtime = [0], runtime

    def activate(self, ordinal):
        return contextlib.nullcontext()

    def __getitem__(self, ordinal):
        return self._runtime


def _service(healthy: bool) -> worker.GpuService:
    service = worker.GpuService.__new__(worker.GpuService)  # its constructor would open a CUDA context
    service.runtime = _Runtime(healthy)
    service.devices = _OneGpuSet(service.runtime)
    return service


def test_the_worker_gives_up_its_context_after_a_sticky_error_without_touching_it(fake_pycuda):
    service = _service(healthy=True)
    assert not service.after_error(fake_pycuda.LogicError("cuCtxSynchronize failed: an illegal memory access was "
                                                          "encountered"))
    assert service.runtime.checks == 0
    assert service.after_error(fake_pycuda.LaunchError("cuLaunchKernel failed: launch out of resources"))
    assert service.runtime.checks == 1
    # A code that cannot be known still ends the worker when the health check fails.
    assert not _service(healthy=False).after_error(RuntimeError("something unforeseen"))


class RaisingService:
    """Raises what the job names, to watch ``serve`` turn it into a message (in this process)."""

    def __init__(self):
        self.closed = False

    def hello(self):
        return {"pid": 0}

    def handle(self, job, progress, should_cancel):
        progress(1, 2, "half")
        progress.row({"point": 1})
        if job["kind"] == "ok":
            return {"answer": 42}
        if job["kind"] == "cuda":
            raise sys.modules["pycuda.driver"].LaunchError("cuLaunchKernel failed: launch out of resources")
        if job["kind"] == "cancel":
            raise errors.JobCancelled()
        if job["kind"] == "invalid":
            raise errors.ValidationError(["too big", "too small"])
        if job["kind"] == "wrong":
            raise errors.VerificationError("byte 4 differs")
        raise KeyError(job["kind"])

    def after_error(self, exc):
        return True

    def close(self):
        pass


def test_the_worker_sends_dataclass_messages(fake_pycuda):
    jobs, events = queue.Queue(), queue.Queue()
    for i, kind in enumerate(["ok", "cuda", "cancel", "invalid", "wrong", "other"], start=1):
        jobs.put({"id": i, "kind": kind})
    jobs.put(None)
    worker.serve(jobs, events, types.SimpleNamespace(value=0), "tests.test_errors:RaisingService", {})
    messages = []
    while not events.empty():
        messages.append(events.get())
    assert messages[0] == Hello({"pid": 0})
    assert messages[1:5] == [Progress(1, 1, 2, "half"), Row(1, {"point": 1}), Result(1, {"answer": 42}), Freed(1)]
    assert not any(isinstance(m, Freed) and m.job_id != 1 for m in messages)  # only after an answer
    failures = {m.job_id: m for m in messages if isinstance(m, Failure)}
    assert (failures[2].kind, failures[2].fatal) == ("cuda", False)
    assert failures[3].kind == "cancelled"
    assert (failures[4].kind, failures[4].reasons) == ("validation", ["too big", "too small"])
    assert failures[5].kind == "verification" and "byte 4 differs" in failures[5].message
    assert failures[6].kind == "internal"
    for message in messages:
        assert pickle.loads(pickle.dumps(message)) == message  # they cross the process boundary


def test_a_worker_that_cannot_start_says_so_in_a_message():
    events = queue.Queue()
    worker.serve(queue.Queue(), events, types.SimpleNamespace(value=0), "tests.test_errors:Missing", {})
    message = events.get_nowait()
    assert isinstance(message, InitFailed) and "AttributeError" in message.message


def test_a_job_handle_finishes_through_its_public_method():
    handle = JobHandle(id=1, kind="replay", session=None, payload={})
    with pytest.raises(ValueError):
        handle.finish("running")
    assert not handle.finished
    handle.finish("done", result=3)
    assert handle.finished and handle.outcome() == 3


def test_the_error_tree_in_the_docstring_names_every_class():
    import inspect

    from gpu.core import errors

    classes = {name for name, value in vars(errors).items() if inspect.isclass(value)
               and issubclass(value, errors.PinPointError) and value is not errors.PinPointError}
    listed = {line.split()[1] for line in errors.__doc__.splitlines() if line.strip().startswith(("├──", "└──", "│"))
              and len(line.split()) > 1 and line.split()[1][:1].isupper()}
    listed |= {line.split()[2] for line in errors.__doc__.splitlines() if line.strip().startswith("│")
               and len(line.split()) > 2}
    assert classes <= listed, classes - listed
