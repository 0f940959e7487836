"""The worker's pool of host buffers kept between jobs: pageable arrays beside page-locked ones, what the app's worker
puts in it at its start (Transfers' and Streams' declared buffers), and Streams' buffers taken from it (no GPU: a
stand-in for pycuda.driver)."""

import threading

import numpy as np

from gpu.core.limits import Limits
from gpu.core.units import GiB, MiB
from gpu.device.context import GpuRuntime
from gpu.device.memory import (
    DEFAULT_POOL_BYTES,
    PAGE_LOCKED,
    AllocationLedger,
    HostPool,
    warm_plan,
    write_every_page,
)
from gpu.experiments import REGISTRY, streams, transfers
from gpu.experiments.streams import sweep as streams_sweep
from gpu.experiments.transfers import sweep as transfers_sweep


class _PageLocked:
    """Page-locked memory as PyCUDA returns it: an array whose base is freed through the driver."""

    def __init__(self, count, dtype, freed):
        self.data, self.freed = np.zeros(count, dtype), freed
        self.__array_interface__ = self.data.__array_interface__

    def free(self):
        self.freed.append(self.data.nbytes)


class _Driver:
    class host_alloc_flags:  # noqa: N801 (PyCUDA's name)
        WRITECOMBINED, DEVICEMAP = 1, 2

    def __init__(self):
        self.pinned, self.freed = [], []

    def pagelocked_empty(self, count, dtype, mem_flags=0):
        self.pinned.append(count * np.dtype(dtype).itemsize)
        return np.asarray(_PageLocked(count, dtype, self.freed))


def test_a_pooled_pageable_array_goes_back_to_the_pool_and_the_next_job_gets_the_same_one():
    driver = _Driver()
    pool = HostPool(driver, capacity_bytes=4 * MiB)
    ledger = AllocationLedger(driver, pool)
    pageable = ledger.host_buffer(MiB, "pageable", pooled=True)
    pinned = ledger.host_buffer(MiB, "pinned", pooled=True)
    assert pageable.dtype == np.uint32 and pageable.nbytes == MiB and pageable.base is None  # NumPy's own
    ledger.free_all()
    assert pool.held_bytes == 2 * MiB and pool.locked_bytes == MiB  # pageable is held, but not page-locked
    again = AllocationLedger(driver, pool)
    assert again.host_buffer(MiB, "pageable", pooled=True) is pageable
    assert again.host_buffer(MiB, "pinned", pooled=True) is pinned
    assert again.host_buffer(2 * MiB, "pageable", pooled=True) is not pageable  # kind and size must both match
    assert driver.pinned == [MiB]  # nothing pinned again
    again.free_all()
    assert pool.held_bytes == 4 * MiB
    assert pool.counts() == {"held_bytes": 4 * MiB, "locked_bytes": MiB, "lent": 2, "missed": 3}


def test_the_pool_keeps_pageable_arrays_within_its_capacity_and_frees_all_kinds():
    driver = _Driver()
    pool = HostPool(driver, capacity_bytes=2 * MiB)
    ledger = AllocationLedger(driver, pool)
    first = ledger.host_buffer(MiB, "pageable", pooled=True)
    ledger.host_buffer(MiB, "pinned_wc", pooled=True)
    ledger.host_buffer(MiB, "pageable", pooled=True)
    ledger.free_all()  # in the order taken: the first two fit, the third is dropped
    assert [kind for kind, _ in pool.idle] == ["pageable", "pinned_wc"] and pool.idle[0][1] is first
    assert driver.freed == []
    pool.free_all()
    assert pool.held_bytes == 0 and driver.freed == [MiB]  # the page-locked one through the driver


def test_a_failed_job_drops_its_pooled_pageable_arrays_and_frees_its_page_locked_ones():
    driver = _Driver()
    pool = HostPool(driver, capacity_bytes=4 * MiB)
    ledger = AllocationLedger(driver, pool)
    pageable = ledger.host_buffer(MiB, "pageable", pooled=True)
    ledger.host_buffer(MiB, "mapped", pooled=True)
    ledger.free_host(pageable)  # given back at once, mid-job
    assert pool.take(MiB, "pageable") is pageable
    ledger.free_all(keep_pooled=False)
    assert pool.held_bytes == 0 and driver.freed == [MiB]


def test_the_pinned_budget_a_job_is_offered_leaves_out_only_the_pools_page_locked_buffers(monkeypatch):
    monkeypatch.setenv("PINPOINT_PINNED_BUDGET_BYTES", str(16 * GiB))
    runtime = _runtime(HostPool(None, 8 * GiB))

    class _Cuda:
        @staticmethod
        def mem_get_info():
            return 64 * GiB, 80 * GiB

    runtime.cuda = _Cuda()
    runtime.max_threads_per_block, runtime.warp_size = 1024, 32
    runtime.host_pool.idle = [("pageable", _sized(GiB)), ("mapped", _sized(2 * GiB))]
    assert runtime.limits().pinned_budget_bytes == 14 * GiB


def _sized(nbytes):
    """A stand-in idle buffer: only its size is read."""
    class Sized:
        pass

    sized = Sized()
    sized.nbytes = nbytes
    return sized


def _runtime(pool):
    """A GpuRuntime with only what job_scope and warm_host_pool need (its constructor would open a CUDA context)."""
    runtime = GpuRuntime.__new__(GpuRuntime)

    class _Context:
        @staticmethod
        def synchronize():
            pass

    runtime.cuda, runtime.context, runtime.host_pool = pool.cuda, _Context(), pool
    runtime._thread = threading.get_ident()
    runtime._released_after_reply = []
    return runtime


def test_warming_the_pool_writes_every_word_of_a_pageable_buffer_and_pins_the_page_locked_ones():
    driver = _Driver()
    pool = HostPool(driver, capacity_bytes=3 * MiB)
    stale = np.full(MiB // 4, 0xDEADBEEF, np.uint32)  # what a last job could have left
    pool.give(stale, "pageable")
    runtime = _runtime(pool)
    runtime.warm_host_pool([(MiB, "pinned"), (MiB, "pageable"), (MiB, "pageable"), (MiB, "pinned_wc")])
    assert [(kind, array.nbytes) for kind, array in pool.idle] == [("pinned", MiB), ("pageable", MiB),
                                                                      ("pageable", MiB)]  # stopped at the capacity
    assert any(array is stale for _, array in pool.idle) and not stale.any()  # every page written
    assert driver.pinned == [MiB]


def test_every_page_is_written_slice_by_slice_on_several_threads():
    array = np.full(10 * 1024 + 3, 0xDEADBEEF, np.uint32)  # a last slice shorter than the others
    write_every_page(array, slice_bytes=4096)
    assert not array.any()


def test_the_warm_plan_needs_half_the_pinned_budget_and_half_the_hosts_memory():
    wanted = [(GiB, "mapped"), (GiB, "pinned_wc"), (GiB, "pageable")]
    assert warm_plan(wanted, 8 * GiB, 4 * GiB, 6 * GiB) == wanted
    assert warm_plan(wanted, 8 * GiB, 4 * GiB - 1, 64 * GiB) == []  # 2 GiB page-locked: over half the budget
    assert warm_plan(wanted, 8 * GiB, 64 * GiB, 6 * GiB - 1) == []  # 3 GiB in all: over half the host's memory
    assert warm_plan(wanted, 8 * GiB, 64 * GiB, 0) == wanted  # host memory unknown: the budget alone decides
    assert warm_plan(wanted, 2 * GiB, 64 * GiB, 64 * GiB) == wanted[:2]  # then what fits the capacity, in order


def test_streams_declares_its_pinned_pair_its_pageable_pair_and_the_bidirectional_buffers():
    declared = streams_sweep.pooled_host_buffers(streams.parse_params({}))
    size = streams.DEFAULT_SIZE
    assert declared == [(size, "pinned")] * 2 + [(size, "pageable")] * 4
    assert streams_sweep.pooled_host_buffers(streams.parse_params({"host_memory": ["pageable"], "size_bytes": MiB,
                                                                   "bidirectional": False})) == [(MiB, "pageable")] * 2
    # pageable alone measures its bidirectional copies: their output pattern and read-back too
    assert streams_sweep.pooled_host_buffers(streams.parse_params({"host_memory": ["pageable"]})) == [
        (size, "pageable")] * 4


def test_transfers_declares_a_pageable_buffer_beside_its_page_locked_ones():
    declared = transfers_sweep.pooled_host_buffers(transfers.parse_params({}))
    largest = max(transfers.parse_params({}).sizes)
    assert declared == [(largest, "mapped"), (largest, "pinned_wc"), (largest, "pageable")]


class _WarmingRuntime:
    """What the worker's warm_host_pool job asks of its runtime: limits, the pool, and the warm-up it records."""

    def __init__(self, pinned_budget, host_available):
        self.host_pool = HostPool(None, DEFAULT_POOL_BYTES)
        self._limits = Limits(64 * GiB, 80 * GiB, pinned_budget, host_available, 1024, 32)
        self.warmed = None

    def limits(self):
        return self._limits

    def warm_host_pool(self, buffers):
        self.warmed = buffers


def _warm(runtime):
    from gpu.service.worker import GpuService

    service = GpuService.__new__(GpuService)
    service.runtime = runtime
    service.handle({"kind": "warm_host_pool"}, None, lambda: False)
    return runtime.warmed


def test_the_apps_worker_warms_every_declared_buffer_within_the_default_capacity():
    declared = [buffer for entry in REGISTRY if hasattr(entry.sweep_module(), "pooled_host_buffers")
                for buffer in entry.sweep_module().pooled_host_buffers(entry.module.parse_params({}))]
    # an H200 host: 16 GiB of pinned budget, a terabyte free
    warmed = _warm(_WarmingRuntime(16 * GiB, 1024 * GiB))
    assert warmed == declared
    assert (256 * MiB, "pinned") in warmed and (GiB, "pageable") in warmed and (256 * MiB, "pageable") in warmed
    assert sum(nbytes for nbytes, _ in warmed) <= DEFAULT_POOL_BYTES
    locked = sum(nbytes for nbytes, mode in warmed if mode in PAGE_LOCKED)
    assert locked == 2 * GiB + 2 * 256 * MiB
    # a host whose pinned budget is under twice those: nothing is warmed, every job pins its own
    assert _warm(_WarmingRuntime(2 * locked - 1, 1024 * GiB)) == []


def _streams_bench(ledger, size):
    """A Streams job's host side: ``_Streams`` without its device buffers, streams and kernels."""
    bench = streams_sweep._Streams.__new__(streams_sweep._Streams)
    bench.ledger, bench.size, bench.n, bench.hosts, bench.both_ways = ledger, size, size // 4, {}, None
    return bench


def test_a_second_streams_job_takes_its_host_buffers_from_the_pool_and_writes_its_inputs_again():
    driver, size = _Driver(), MiB
    pool = HostPool(driver, capacity_bytes=6 * size)
    first_inputs = np.arange(size // 4, dtype=np.float32)
    ledger = AllocationLedger(driver, pool)
    bench = _streams_bench(ledger, size)
    first = [*bench.host_pair("pinned", first_inputs), *bench.host_pair("pageable", first_inputs),
             *bench.both_ways_buffers(first_inputs)]
    assert bench.host_pair("pinned", first_inputs)[0] is first[0]  # one pair a job
    ledger.free_all()
    assert pool.held_bytes == 6 * size and pool.locked_bytes == 2 * size and driver.pinned == [size, size]

    inputs = first_inputs[::-1].copy()  # the next job's inputs differ
    ledger = AllocationLedger(driver, pool)
    bench = _streams_bench(ledger, size)
    pinned_in, pinned_out = bench.host_pair("pinned", inputs)
    pageable_in, _ = bench.host_pair("pageable", inputs)
    out_pattern, readback = bench.both_ways_buffers(inputs)
    assert driver.pinned == [size, size]  # nothing pinned again
    again = [pinned_in, pinned_out, pageable_in, bench.hosts["pageable"][1], out_pattern, readback]
    assert sorted(id(a.base if a.base is not None else a) for a in again) == sorted(
        id(a.base if a.base is not None else a) for a in first)  # the first job's six buffers
    assert pinned_in.dtype == np.float32 and np.array_equal(pinned_in, inputs) and np.array_equal(pageable_in, inputs)
    assert np.array_equal(out_pattern, inputs + np.float32(1.0))  # not the first job's pattern
