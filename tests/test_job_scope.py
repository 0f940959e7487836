"""A job's buffers are freed after its answer is sent, and always before the next job (no GPU: a recording stand-in
for pycuda.driver)."""

import threading

import pytest

from gpu.device.context import GpuRuntime
from gpu.device.memory import HostPool


class _Allocation:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def free(self):
        self.log.append(f"free {self.name}")


class _RecordingDriver:
    def __init__(self, log):
        self.log = log
        self.count = 0

    def mem_alloc(self, nbytes):
        self.count += 1
        return _Allocation(self.log, f"buffer{self.count}")


class _Context:
    def __init__(self, log):
        self.log = log

    def synchronize(self):
        self.log.append("synchronize")


def _runtime(log):
    """A GpuRuntime with only what job_scope needs (its constructor would open a CUDA context)."""
    runtime = GpuRuntime.__new__(GpuRuntime)
    runtime.cuda, runtime.context = _RecordingDriver(log), _Context(log)
    runtime._thread = threading.get_ident()
    runtime._released_after_reply = []
    runtime.host_pool = HostPool(runtime.cuda, 0)
    return runtime


def test_a_finished_job_frees_after_the_reply_and_before_the_next_job():
    log = []
    runtime = _runtime(log)
    with runtime.job_scope() as ledger:
        ledger.device_buffer(1024)
    assert log == ["synchronize"]  # held until the answer is sent
    runtime.release_after_reply()
    assert log == ["synchronize", "free buffer1"]
    runtime.release_after_reply()
    assert log.count("free buffer1") == 1  # freed once

    log.clear()
    with runtime.job_scope() as ledger:
        ledger.device_buffer(1024)
    with runtime.job_scope():  # a caller that never calls release_after_reply: the next job frees first
        log.append("second job runs")
    assert log.index("free buffer2") < log.index("second job runs")


def test_a_failed_job_frees_at_once():
    log = []
    runtime = _runtime(log)
    with pytest.raises(RuntimeError, match="kernel failed"):
        with runtime.job_scope() as ledger:
            ledger.device_buffer(1024)
            raise RuntimeError("kernel failed")
    assert log == ["synchronize", "free buffer1"]
    assert runtime._released_after_reply == []


def test_release_refuses_another_thread():
    runtime = _runtime([])
    errors = []
    worker = threading.Thread(target=lambda: errors.append(pytest.raises(RuntimeError, runtime.release_after_reply)))
    worker.start()
    worker.join()
    assert errors and "other than the one that owns its context" in str(errors[0].value)
