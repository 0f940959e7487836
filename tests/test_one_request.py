"""One transfer size, followed from the page (and from the runner) to the copy: its parameters are parsed once and
checked once, where they are asked for; the worker gets the checked request, never parses it, and re-checks only the
memory free now, against limits it reads once. Counted through the real path: the page's measure flow (AppTest), the
live backend and its point cache, a pickled crossing, ``GpuService.handle`` and the sweep harness, on a stand-in
device (no GPU)."""

from __future__ import annotations

import collections
import concurrent.futures
import pickle

import pytest
from streamlit.testing.v1 import AppTest

from gpu.core.limits import Limits
from gpu.core.units import KiB
from gpu.experiments import axes, transfers
from gpu.service import worker
from gpu.service.backends import LiveBackend
from gpu.service.client import JobHandle
from gpu.sweeps import harness
from tests.test_harness import _device

GiB = 1024**3
LIMITS = Limits(free_device_bytes=80 * GiB, total_device_bytes=80 * GiB, pinned_budget_bytes=16 * GiB,
                host_available_bytes=64 * GiB, max_threads_per_block=1024, warp_size=32)
SIZE = 64 * KiB


class CopySweep(harness.Sweep):
    """The transfers declaration's grid, each point "copied" by a stand-in that records the size it was handed."""

    NAME, TITLE, AXES, KEY_COLUMNS = transfers.NAME, transfers.TITLE, transfers.AXES, transfers.KEY_COLUMNS
    memory_reasons = staticmethod(lambda params, limits: transfers.memory_reasons(params, limits))
    copied: list = []

    def point(self, grid_point):
        size, mode, direction, alloc, timer = grid_point.key(self.KEY_COLUMNS)
        return harness.Point({"variant": mode, "direction": direction, "include_alloc": alloc},
                             f"{mode} {size} B", size, timer, size)

    def measure(self, point):
        type(self).copied.append(point.state)
        return lambda: 0.01


class InProcessClient:
    """The worker client's interface, serving each job at once in this process, on the one thread that owns the
    stand-in device (as the worker's main thread owns its context): the payload is pickled and unpickled on the way,
    as the worker's job queue does, then handled by a real ``GpuService``."""

    def __init__(self, service, thread):
        self.service, self.thread = service, thread
        self.info = {"limits": LIMITS.as_dict(), "facts": {"device_name": "NVIDIA H100"}}
        self.gpu_indices = [0]

    def submit(self, kind, payload, session=None, owner=None):
        job = {"id": 1, "kind": kind, **pickle.loads(pickle.dumps(payload))}
        handle = JobHandle(id=1, kind=kind, session=session, payload=payload, owner=owner)
        handle.finish("done", result=self.thread.submit(self.service.handle, job, lambda *a: None,
                                                        lambda: False).result())
        return handle

    def jobs(self):
        return []  # each job is served as it is submitted: none waits

    def close(self):
        pass


@pytest.fixture
def counted(monkeypatch):
    """A live backend over an in-process ``GpuService`` whose device is a stand-in; ``counts`` says how often the
    transfer sizes were parsed, checked, re-checked for memory, converted and the device's limits read."""
    counts = collections.Counter()

    def counting(name, function):
        def wrapped(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(transfers, "parse_params", counting("parsed", transfers.parse_params))
    monkeypatch.setattr(transfers, "invalid_reasons", counting("checked", transfers.invalid_reasons))
    monkeypatch.setattr(transfers, "memory_reasons", counting("memory re-checked", transfers.memory_reasons))
    convert = axes.Axis.convert

    def counted_convert(axis, raw):
        counts["converted"] += axis.name == "sizes"
        return convert(axis, raw)

    monkeypatch.setattr(axes.Axis, "convert", counted_convert)
    service, thread = stand_in_service(monkeypatch, counting("limits read", lambda: LIMITS))
    CopySweep.copied = []
    yield LiveBackend(InProcessClient(service, thread)), counts
    thread.shutdown()


def stand_in_service(monkeypatch, limits):
    """A real ``GpuService`` over a stand-in device (no CUDA) whose limits are read by ``limits()``, its sweep the
    ``CopySweep``, and the one thread that owns the device (as the worker's main thread owns its context)."""
    thread = concurrent.futures.ThreadPoolExecutor(1)
    gpu = thread.submit(_device, []).result()
    gpu.limits = limits
    gpu.device_ordinal = 0
    gpu.provenance = lambda: {"device_name": "NVIDIA H100", "gpu_index": 0, "timestamp": "2026-11-25T00:00:00+00:00",
                              "git_commit": "test", "backend": "live"}
    service = worker.GpuService.__new__(worker.GpuService)  # its constructor would open a CUDA context
    service.runtime, service.devices = gpu, harness.device_set(gpu)
    monkeypatch.setattr(worker, "sweep_of", lambda name: harness.runner(CopySweep))
    return service, thread


def _page(backend):
    """The Transfers page's measure flow for two sizes (4 KiB, 64 KiB), as the page calls it."""
    import streamlit as st

    from pages._ui import measure

    st.session_state["save_to_store"] = False
    measure.section_frame(backend, "transfers", {"sizes": [4096, 65536], "modes": ["pinned"], "directions": ["h2d"]},
                          "transfers")


def test_a_transfer_size_from_the_page_to_the_copy_is_parsed_once_and_checked_once(counted):
    backend, counts = counted
    at = AppTest.from_function(_page, args=(backend,), default_timeout=30).run()
    # Each view checks the settings it shows (to name what is wrong before Measure): once.
    assert not at.exception and (counts["parsed"], counts["checked"]) == (1, 1) and not CopySweep.copied
    counts.clear()
    at.button(key="transfers_measure").click().run()
    assert not at.exception, at.exception
    assert CopySweep.copied and SIZE in CopySweep.copied and all(type(s) is int for s in CopySweep.copied)
    # The rerun that serves the click builds its request once; the worker neither parses nor fully re-checks it.
    assert counts["parsed"] == 1 and counts["checked"] == 1 and counts["converted"] == 1
    # The memory check: once inside the page's check, once in the worker against limits read once.
    assert counts["memory re-checked"] == 2 and counts["limits read"] == 1


def test_a_transfer_size_from_the_runner_to_the_copy_is_parsed_once_and_checked_once(counted, monkeypatch):
    from gpu import bench

    backend, counts = counted
    monkeypatch.setattr(bench, "open_runner_backend", lambda experiment, args: backend)
    assert bench.main(["transfers", "--sizes", "4KiB,64KiB", "--modes", "pinned", "--directions", "h2d"]) == 0
    assert sorted(CopySweep.copied) == [4 * KiB, SIZE]
    assert counts["parsed"] == 1 and counts["checked"] == 1 and counts["converted"] == 1
    assert counts["memory re-checked"] == 2 and counts["limits read"] == 1


def test_the_worker_refuses_plain_values_it_would_have_to_parse(counted):
    backend, counts = counted
    from gpu.core.errors import ValidationError

    with pytest.raises(ValidationError, match="checked request"):
        backend.client.submit("experiment", {"experiment": "transfers", "params": {"sizes": [SIZE]}})
    assert counts["parsed"] == 0


def test_the_worker_refuses_a_request_whose_memory_is_gone_since_it_was_checked(counted):
    backend, counts = counted
    from gpu.core.errors import ValidationError

    request = backend.request("transfers", {"sizes": [8 * GiB], "modes": ["pageable"]})
    gpu = backend.client.service.runtime
    gpu.limits = lambda: Limits(**{**LIMITS.as_dict(), "free_device_bytes": 4 * GiB})  # another job took the rest
    with pytest.raises(ValidationError, match="does not fit in device memory"):
        backend.submit(request)
    assert CopySweep.copied == [] and counts["parsed"] == 1


def _page_saving(backend):
    """``_page`` with the measurement kept in the runs store, as the app does by default."""
    import streamlit as st

    from pages._ui import measure

    st.session_state["save_to_store"] = True
    measure.section_frame(backend, "transfers", {"sizes": [4096, 65536], "modes": ["pinned"], "directions": ["h2d"]},
                          "transfers")


def test_the_page_and_the_runner_store_each_run_with_the_parameters_it_was_measured_with(counted, monkeypatch,
                                                                                         tmp_path):
    import json

    import streamlit as st

    from gpu import bench
    from gpu.results.persistence.store import RunStore

    monkeypatch.setenv("PINPOINT_DB_URL", f"sqlite:///{tmp_path}/runs.sqlite")
    st.cache_resource.clear()
    backend, counts = counted
    at = AppTest.from_function(_page_saving, args=(backend,), default_timeout=30).run()
    at.button(key="transfers_measure").click().run()
    assert not at.exception, at.exception
    monkeypatch.setattr(bench, "open_runner_backend", lambda experiment, args: backend)
    assert bench.main(["transfers", "--sizes", "4KiB", "--modes", "pinned", "--directions", "h2d"]) == 0
    store = RunStore()
    listed = store.runs().set_index("source")
    asked = store.run_params(list(listed["run_id"])).set_index("run_id")
    page = json.loads(asked.loc[listed.loc["live", "run_id"], "params"])
    runner = json.loads(asked.loc[listed.loc["runner", "run_id"], "params"])
    assert page["sizes"] == [4096, 65536] and page["modes"] == ["pinned"] and runner["sizes"] == [4096]
    assert counts["parsed"] == 3  # the page's view and its click, the runner's request: none more to store them
    st.cache_resource.clear()
