"""How the worker measures the transfers experiment, declared in this package's ``__init__.py``
(its docstring says what is measured, how it is timed and how it is checked)."""

from __future__ import annotations

import time

import numpy as np

from gpu.core.units import format_bytes
from gpu.experiments.transfers import MODE_LABELS, bytes_moved
from gpu.sweeps import harness
from gpu.sweeps.timing_methods import BATCHED, HELD, SINGLE, StreamClock
from gpu.sweeps.verify import PatternChecker, check_pattern, write_pattern

BATCH_MS, MAX_BATCH = harness.BATCH_MS, harness.MAX_BATCH


class _TransferBench:
    """The device side of one sweep on a GpuRuntime: buffers, the check pattern and timed copies; all buffers
    come from the job's ledger.

    One device buffer and one host buffer per memory mode, each of the sweep's largest size, serve every size (a
    point copies their first ``size`` bytes), so a sweep allocates pinned memory once per mode, not once per size.
    The check pattern is written and checked by kernels on the GPU (``verify.PatternChecker``), except in pageable
    host memory, where the CPU writes and checks it (``verify.write_pattern``, ``check_pattern``): a copy across the
    link from or to pageable memory would cost more than the work (170 ms a GiB back up on an H200 host, against
    about 50 ms on the CPU). A 1 GiB point spends its time copying, not preparing. Before every copy the destination
    holds the pattern of another seed, which differs from the expected one in every word, so a word the copy did not
    write never passes. A host buffer's leading words hold one seed's pattern (``uniform``): a verified D2H copy
    leaves its own pattern there, which the H2D copy of the same size then sends back up, so no buffer is ever
    re-written between points (D2H points of a size are measured before its H2D points for that reason)."""


    def __init__(self, gpu, ledger, largest: int, seed: int, keep_hosts: bool):
        self.gpu = gpu
        self.cuda = gpu.cuda
        self.ledger = ledger
        self.largest = largest
        self.keep_hosts = keep_hosts
        self.clock = StreamClock(gpu, ledger)  # the harness's timing methods time the copies on its stream
        self.stream = self.clock.stream
        self.copy_kernel = gpu.functions["copy_vec4"]
        self.copy_kernel.prepare("PPQ")
        self.checker = PatternChecker(gpu, ledger)
        self.device = ledger.device_buffer(largest)
        self.hosts: dict[str, np.ndarray] = {}  # by buffer_of(mode)
        self.uniform: dict[str, tuple[int, int]] = {}  # by buffer: (words from the start holding one pattern, seed)
        self._base_seed = seed
        self._seeds = 0

    # --- the pattern, on the GPU ---------------------------------------------------------------------------------
    def next_seed(self) -> int:
        """A seed never used before in this sweep (odd steps of 2^32 / golden ratio: all distinct)."""
        self._seeds += 1
        return (self._base_seed + 0x9E3779B9 * self._seeds) & 0xFFFFFFFF

    def fill(self, count: int, seed: int) -> None:
        """The device buffer's first ``count`` words := the pattern of ``seed``."""
        self.checker.fill(int(self.device), count, seed)

    def check(self, count: int, seed: int, label: str) -> None:
        """Raise VerificationError unless the device buffer's first ``count`` words are the pattern of ``seed``."""
        self.checker.check(int(self.device), count, seed, label)

    def load_host(self, host: np.ndarray, seed: int, mode: str) -> None:
        """``host`` := the pattern of ``seed``: written by the CPU in pageable memory, else on the GPU and copied down
        (page-locked memory takes the copy at full speed; a write-combined buffer is slow for the CPU to touch)."""
        if self.buffer_of(mode) == "pageable":
            write_pattern(host, seed)
            return
        self.fill(host.size, seed)
        self.cuda.memcpy_dtoh(host, self.device)

    @staticmethod
    def buffer_of(mode: str) -> str:
        """The host buffer a mode copies through: pinned and mapped share one allocation. With unified addressing
        (every 64-bit CUDA platform) all page-locked memory is mapped into the device's address space, so a
        DEVICEMAP allocation is the same memory as a plain pinned one; "mapped" differs in how it is read (a
        kernel over PCIe), not in what is allocated. One pin of 1 GiB costs 0.4-0.7 s on an H200 host."""
        return "pinned" if mode in ("pinned", "mapped") else mode

    def host(self, mode: str) -> np.ndarray:
        """The mode's host buffer of the largest size. Its first ``uniform[buffer][0]`` words hold the pattern of
        ``uniform[buffer][1]``."""
        buffer = self.buffer_of(mode)
        if buffer not in self.hosts:
            # pooled: kept by the worker between sweeps (pinning 1 GiB takes 0.4-0.7 s, faulting in a fresh pageable
            # one 0.3-0.5 s); loaded with a pattern below, which also leaves every page of it written and resident
            array = self.ledger.host_buffer(self.largest, "mapped" if buffer == "pinned" else buffer, pooled=True)
            seed = self.next_seed()
            self.load_host(array, seed, mode)
            self.hosts[buffer] = array
            self.uniform[buffer] = (array.size, seed)
        return self.hosts[buffer]

    def host_seed(self, mode: str, count: int) -> int:
        """The seed whose pattern the mode's host buffer holds in its first ``count`` words, loading one when those
        words hold several (a device-to-host copy of a smaller size wrote part of them)."""
        buffer = self.buffer_of(mode)
        held, seed = self.uniform[buffer]
        if held < count:
            seed = self.next_seed()
            self.load_host(self.hosts[buffer][:count], seed, mode)
            self.uniform[buffer] = (count, seed)
        return seed

    def host_written(self, mode: str, count: int, seed: int) -> None:
        """A verified device-to-host copy left the pattern of ``seed`` in the buffer's first ``count`` words."""
        self.uniform[self.buffer_of(mode)] = (count, seed)

    def done_with(self, mode: str) -> None:
        """After a size's points of ``mode``: keep its buffer for the next size, unless the budget says not to."""
        buffer = self.buffer_of(mode)
        if not self.keep_hosts and buffer in self.hosts:
            self.release(self.hosts.pop(buffer))
            self.uniform.pop(buffer)

    # --- one copy --------------------------------------------------------------------------------------------------
    def issue(self, mode: str, direction: str, host: np.ndarray, host_ptr: int | None, nbytes: int) -> None:
        """Queue one copy (for mapped memory, the zero-copy kernel) on the bench's stream."""
        cuda, stream = self.cuda, self.stream
        if mode == "mapped":
            src, dst = (host_ptr, int(self.device)) if direction == "h2d" else (int(self.device), host_ptr)
            n_vec4 = nbytes // 16
            block = 256
            grid = max(1, min((n_vec4 + block - 1) // block, self.gpu.sm_count * 16))
            self.copy_kernel.prepared_async_call((grid, 1), (block, 1, 1), stream, src, dst, n_vec4)
        elif direction == "h2d":
            cuda.memcpy_htod_async(self.device, host, stream)
        else:
            cuda.memcpy_dtoh_async(host, self.device, stream)

    def copy_ms(self, mode: str, direction: str, host: np.ndarray, host_ptr: int | None, nbytes: int) -> float:
        return self.clock.once(lambda stream: self.issue(mode, direction, host, host_ptr, nbytes))

    def prepare(self, direction: str, count: int, seed: int) -> None:
        """Source holds the pattern of ``seed``; the destination that of another seed (every word differs)."""
        if direction == "h2d":
            self.fill(count, self.next_seed())
        else:
            self.fill(count, seed)
        self.cuda.Context.synchronize()

    def verify_host(self, host: np.ndarray, count: int, seed: int, label: str, mode: str) -> None:
        """A device → host copy is checked whole: its first ``count`` host words must be the pattern of ``seed``. In
        pageable memory the CPU compares them; page-locked words are copied back over another seed's pattern and
        compared on the GPU."""
        if self.buffer_of(mode) == "pageable":
            check_pattern(host[:count], seed, label)
            return
        self.fill(count, self.next_seed())
        self.cuda.memcpy_htod(self.device, host)
        self.check(count, seed, label)

    @staticmethod
    def mapped_pointer(mode: str, array: np.ndarray) -> int | None:
        return array.base.get_device_pointer() if mode == "mapped" else None

    def release(self, host) -> None:
        """Free a host buffer of the ledger's (a pooled one goes back to the pool; a fresh pageable one, not the
        ledger's, is NumPy's to free)."""
        self.ledger.free_host(host)


class TransfersSweep(harness.Sweep):
    """Sizes are measured coarse first (4 KiB, 1 GiB, 2 MiB, …: every mode at each), so the page shows the whole
    curve early; after a size's points of a mode its host buffer is kept for the next size when it fits."""

    def setup(self) -> None:
        params, limits = self.params, self.limits
        largest = max(params.sizes)
        buffers = {_TransferBench.buffer_of(m) for m in params.modes}
        pinned_buffers = buffers - {"pageable"}
        # Keep every mode's buffer for the whole sweep when that fits the pinned budget and host memory.
        keep = (len(pinned_buffers) * largest <= limits.pinned_budget_bytes
                and (not limits.host_available_bytes
                     or (len(buffers) + 1) * largest <= limits.host_available_bytes))
        self.bench = _TransferBench(self.gpu, self.ledger, largest, int(time.time_ns()) & 0xFFFFFFFF, keep)

    def order(self, grid_points):
        """Sizes coarse first, every mode at each; within a size, mode and timing, D2H first: it leaves a pattern in
        the host buffer that the H2D point then copies up."""
        rank = {size: i for i, size in enumerate(harness.coarse_first(self.params.sizes))}
        first: dict = {}
        for i, p in enumerate(grid_points):
            first.setdefault((p["bytes"], p["variant"], p["method"], p["include_alloc"]), i)
        return sorted(grid_points, key=lambda p: (rank[p["bytes"]], first[p["bytes"], p["variant"], p["method"],
                                                                         p["include_alloc"]], p["direction"] != "d2h"))

    def group_of(self, grid_point):
        return grid_point["bytes"], grid_point["variant"]

    def leave_group(self, group) -> None:
        """After a size's points of a mode: its host buffer is kept for the next size when it fits."""
        self.bench.done_with(group[1])

    def point(self, grid_point):
        size, mode, direction = grid_point["bytes"], grid_point["variant"], grid_point["direction"]
        alloc, method = grid_point["include_alloc"], grid_point["method"]
        return harness.Point(
            {"variant": mode, "direction": direction, "bytes": int(size), "include_alloc": bool(alloc)},
            f"{MODE_LABELS[mode]} {direction.upper()} {format_bytes(size)}"
            + (" incl. allocation" if alloc else "") + (" batched" if method == "batched" else ""),
            bytes_moved(size, mode, direction), grid_point["timer"],
            {"size": size, "mode": mode, "direction": direction, "alloc": alloc, "method": method})

    def measure(self, point):
        bench, state = self.bench, point.state
        size, mode, direction = state["size"], state["mode"], state["direction"]
        if state["alloc"]:
            return self._allocating(state)
        full = bench.host(mode)
        host, host_ptr = full[:size // 4], bench.mapped_pointer(mode, full)
        # H2D copies the pattern the host holds; D2H writes a new seed's pattern over it.
        seed = bench.host_seed(mode, size // 4) if direction == "h2d" else bench.next_seed()
        bench.prepare(direction, size // 4, seed)
        state.update(host=host, seed=seed)
        # Batched copies from pageable memory wait on the host, so they cannot be held; the others are.
        method = SINGLE if state["method"] == "single" else BATCHED if mode == "pageable" else HELD
        sample = bench.clock.sampler(method, lambda stream: bench.issue(mode, direction, host, host_ptr, size))
        if method != SINGLE:
            point.columns.update({"copies_per_sample": sample.copies})
        return sample

    def _allocating(self, state):
        """Samples that allocate a fresh host buffer each (host clock), then copy it (events); the previous
        sample's buffer is freed first. Its own clock: the allocation is host work, which no event can time."""
        bench, ledger = self.bench, self.ledger
        size, mode, direction = state["size"], state["mode"], state["direction"]
        count = size // 4
        last = state["last"] = {}
        seed = state["seed"] = bench.next_seed()

        def sample() -> float:
            if "host" in last:
                bench.release(last.pop("host"))
            started = time.perf_counter()
            fresh = ledger.host_buffer(size, mode)
            alloc_ms = (time.perf_counter() - started) * 1e3
            # Fresh memory holds anything: give the side that must change another seed's pattern.
            bench.load_host(fresh, seed if direction == "h2d" else bench.next_seed(), mode)
            bench.prepare(direction, count, seed)
            last["host"] = fresh
            return alloc_ms + bench.copy_ms(mode, direction, fresh, bench.mapped_pointer(mode, fresh), size)

        return sample

    def verify(self, point) -> None:
        bench, state = self.bench, point.state
        size, mode, direction, seed = state["size"], state["mode"], state["direction"], state["seed"]
        label = f"{MODE_LABELS[mode]} {direction.upper()} {format_bytes(size)}"
        host = state["last"]["host"] if state["alloc"] else state["host"]
        if direction == "h2d":
            bench.check(size // 4, seed, label)
        else:
            bench.verify_host(host, size // 4, seed, label, mode)
        if state["alloc"]:
            bench.release(state["last"].pop("host"))
        elif direction == "d2h":
            bench.host_written(mode, size // 4, seed)


run = harness.runner(TransfersSweep)


def pooled_host_buffers(params) -> list[tuple[int, str]]:
    """The host buffers a sweep of ``params`` keeps in the worker's pool between sweeps, each of the largest size:
    one for pinned and mapped copies (shared), one for write-combined ones and one for pageable ones. The app's
    worker pins the page-locked ones and faults in the pageable one when it starts (``LiveBackend.warm``)."""
    largest = max(params.sizes, default=0)
    kinds = dict.fromkeys(_TransferBench.buffer_of(m) for m in params.modes)
    # page-locked first: where the pool's capacity stops the warm-up early, a pin is the dearer miss
    return [(largest, "mapped" if kind == "pinned" else kind) for kind in sorted(kinds, key="pageable".__eq__)]
