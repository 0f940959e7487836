"""A recording board, for tests only: stand-in runtimes over one stand-in ``pycuda.driver`` that writes every call a
sweep makes (allocations, copies, launches, events, context switches, frees) to one log, in order, with buffers named
by the order they were allocated (``buf3+256``) rather than by address. Its clock is a stand-in too: each copy or
launch advances it by a fixed cost of its bytes or steps, and events read it, so a sample's time and the sampling loop
are deterministic.

It models just enough memory for each sweep's checks to pass as they would on a GPU: bytes copied from the host, mapped
and managed host arrays, and the results of the kernels whose answers are checked (host_latency's ``pointer_chase``,
managed's ``checksum_u32``, peers' ``chain_fill``/``peer_chase``); PatternChecker's count kernel finds nothing wrong.

What it is for: running a sweep through the harness on a CPU and comparing what it did, call by call, and the rows it
returned, with another run (the same sweep before and after a refactoring). Nothing here is ever a measurement.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import itertools
import json

import numpy as np

from gpu.core.limits import Limits
from gpu.device.memory import AllocationLedger

COPY_MS, LAUNCH_MS, BYTES_PER_MS = 0.001, 0.003, 1e6  # a copy: 1 µs + bytes at 1 GB/ms


class _Mapped:
    """Page-locked or managed host memory as PyCUDA returns it: an array whose base names its device pointer."""

    def __init__(self, board, count, dtype):
        self.board, self.data = board, np.zeros(count, dtype)
        self.__array_interface__ = self.data.__array_interface__
        self.pointer = board.register(self.data.view(np.uint8), host=True)

    def get_device_pointer(self):
        return self.pointer

    def free(self):
        self.board.note("free_host", self.board.name(self.pointer))


class _Allocation(int):
    """A device allocation: usable as its address; ``free`` is logged."""

    board = None

    def free(self):
        self.board.note("free", self.board.name(int(self)))


class _Event:
    def __init__(self, board):
        self.board, self.at = board, None

    def record(self, stream=None):
        self.at = self.board.clock_ms
        self.board.note("event", stream)

    def synchronize(self):
        pass

    def time_till(self, other):
        return other.at - self.at


class _Stream:
    def __init__(self, number):
        self.number, self.handle = number, number

    def __repr__(self):
        return f"stream{self.number}"


class Driver:
    """The stand-in ``pycuda.driver`` of one board."""

    class host_alloc_flags:  # noqa: N801 (PyCUDA's names)
        WRITECOMBINED, DEVICEMAP = 1, 2

    class mem_attach_flags:  # noqa: N801
        GLOBAL = 1

    def __init__(self, board):
        self.board = board
        streams = itertools.count(1)

        class Context:
            @staticmethod
            def synchronize():
                board.note("synchronize")

        self.Context = Context
        self._streams = streams

    def Stream(self):  # noqa: N802 (PyCUDA's names)
        stream = _Stream(next(self._streams))
        self.board.note("stream", stream)
        return stream

    def Event(self):  # noqa: N802
        return _Event(self.board)

    def mem_alloc(self, nbytes):
        return self.board.allocate(int(nbytes))

    def pagelocked_empty(self, count, dtype, mem_flags=0):
        self.board.note("pin", int(count), np.dtype(dtype).name, int(mem_flags))
        return np.asarray(_Mapped(self.board, count, dtype))

    def managed_empty(self, count, dtype, mem_flags=0):
        self.board.note("managed", int(count), np.dtype(dtype).name)
        return np.asarray(_Mapped(self.board, count, dtype))

    def memcpy_htod(self, device, host):
        self.board.write(int(device), np.ascontiguousarray(host).view(np.uint8).ravel())
        self.board.note("htod", self.board.name(int(device)), host.nbytes)

    def memcpy_dtoh(self, host, device):
        host.view(np.uint8).ravel()[:] = self.board.read(int(device), host.nbytes)
        self.board.note("dtoh", self.board.name(int(device)), host.nbytes)

    def memcpy_htod_async(self, device, host, stream=None):
        self.board.copy("htod_async", host.nbytes, self.board.name(int(device)), stream)

    def memcpy_dtoh_async(self, host, device, stream=None):
        self.board.copy("dtoh_async", host.nbytes, self.board.name(int(device)), stream)

    def memcpy_dtod_async(self, dst, src, nbytes, stream=None):
        self.board.copy("dtod_async", int(nbytes), self.board.name(int(dst)), self.board.name(int(src)), stream)

    def memcpy_peer_async(self, dst, src, nbytes, dst_context, src_context, stream=None):
        self.board.copy("peer_async", int(nbytes), self.board.name(int(dst)), self.board.name(int(src)),
                        dst_context, src_context, stream)

    def memset_d32(self, pointer, value, count):
        self.board.write(int(pointer), np.full(int(count), value, np.uint32).view(np.uint8))
        self.board.note("memset_d32", self.board.name(int(pointer)), int(value), int(count))

    def memset_d32_async(self, pointer, value, count, stream=None):
        self.board.write(int(pointer), np.full(int(count), value, np.uint32).view(np.uint8))
        self.board.advance(4 * int(count) / BYTES_PER_MS)
        self.board.note("memset_d32_async", self.board.name(int(pointer)), int(value), int(count), stream)

    def memset_d8(self, pointer, value, nbytes):
        self.board.write(int(pointer), np.full(int(nbytes), value, np.uint8))
        self.board.note("memset_d8", self.board.name(int(pointer)), int(value), int(nbytes))


class Function:
    """A kernel: every launch logged with its grid, block and arguments; the checked kernels compute their answer."""

    def __init__(self, board, runtime, stem, name):
        self.board, self.runtime, self.stem, self.name = board, runtime, stem, name

    def prepare(self, signature):
        self.board.note("prepare", self.name, signature)

    def prepared_call(self, grid, block, *args):
        self._launch(grid, block, None, args)

    def prepared_async_call(self, grid, block, stream, *args):
        self._launch(grid, block, stream, args)

    def __call__(self, *args, block=None, grid=None, stream=None):
        self._launch(grid, block, stream, args)

    def _launch(self, grid, block, stream, args):
        board = self.board
        board.note("launch", self.name, tuple(grid or ()), tuple(block or ()), stream, *map(board.shown, args))
        model = getattr(self, "_" + self.name, None)
        board.advance(model(*args) if model else LAUNCH_MS)

    # --- the kernels whose work is modelled (their cost in ms, and the answers their sweeps check) ------------------
    def _copy_bytes(self, src, dst, nbytes):
        return COPY_MS + int(nbytes) / BYTES_PER_MS

    def _copy_bytes_passes(self, src, dst, nbytes, passes):
        return COPY_MS + int(nbytes) * int(passes) / BYTES_PER_MS

    def _pointer_chase(self, chain, start, steps, end):
        words = self.board.read(int(chain), None).view(np.uint64)
        index = int(start)
        for _ in range(int(steps)):
            index = int(words[index])
        self.board.write(int(end), np.array([index], np.uint64).view(np.uint8))
        return int(steps) * 0.001

    def _checksum_u32(self, source, vectors, total):
        words = self.board.read(int(source), 16 * int(vectors)).view(np.uint32)
        self.board.write(int(total), np.array([int(words.sum(dtype=np.uint64))], np.uint64).view(np.uint8))
        return 16 * int(vectors) / BYTES_PER_MS

    def _chain_fill(self, dst, nodes, stride_words):
        self.board.chains[int(dst)] = (int(nodes), 8 * int(stride_words))
        return LAUNCH_MS

    def _peer_chase(self, chain, steps, block, end_slot):
        nodes, stride = self.board.chains[int(chain)]
        self.board.write(int(end_slot), np.array([int(chain) + (int(steps) % nodes) * stride], np.uint64)
                         .view(np.uint8))
        return int(steps) * 0.0008


class _Context:
    def __init__(self, ordinal):
        self.ordinal = ordinal

    def enable_peer_access(self, other):
        pass

    def __repr__(self):
        return f"context{self.ordinal}"


class Telemetry:
    nvml = handle = None

    def sample(self, force=False):
        pass

    def start_point(self):
        pass

    def point_summary(self):
        return {}


class Runtime:
    """Just enough of ``GpuRuntime`` for the memory experiments' sweeps, on one board."""

    sm_count, l2_bytes = 4, 4 << 20
    attributes = {"MAX_THREADS_PER_MULTIPROCESSOR": 2048}

    def __init__(self, board, ordinal=0, stay_current=True):
        self.board, self.device_ordinal, self.cuda = board, ordinal, board.driver
        self.telemetry = Telemetry()
        self.facts = {"device_name": "recording board", "gpu_uuid": f"GPU-0000-{ordinal:08x}"}
        runtime = self

        class Device:
            @staticmethod
            def can_access_peer(other):
                return True

            @staticmethod
            def pci_bus_id():
                return f"0000:{runtime.device_ordinal:02x}:00.0"

        self.device, self.context = Device, _Context(ordinal)
        board.runtimes.append(self)

    def kernel(self, stem, name):
        return Function(self.board, self, stem, name)

    def limits(self):
        return Limits(64 << 30, 80 << 30, 16 << 30, 256 << 30, 1024, 32)

    @contextlib.contextmanager
    def activate(self):
        self.board.note("activate", self.device_ordinal)
        try:
            yield
        finally:
            self.board.note("deactivate", self.device_ordinal)

    @contextlib.contextmanager
    def job_scope(self):
        ledger = AllocationLedger(self.cuda)
        try:
            yield ledger
        finally:
            self.board.note("scope_closes", self.device_ordinal)
            ledger.free_all()

    def prefetch(self, pointer, nbytes, stream, to_device=True):
        self.board.note("prefetch", self.board.name(int(pointer)), int(nbytes), stream, to_device)
        self.board.advance(int(nbytes) / (BYTES_PER_MS / 2))

    def memory_pools(self):
        board = self.board

        class DevicePool:
            def allocate(self, nbytes):
                board.note("pool_allocate", int(nbytes))
                return board.allocate(int(nbytes))

            def stop_holding(self):
                board.note("pool_stop_holding", "device")

        class PinnedPool:
            def allocate(self, shape, dtype):
                board.note("pinned_pool_allocate", tuple(shape), np.dtype(dtype).name)
                return np.asarray(_Mapped(board, shape[0], dtype))

            def stop_holding(self):
                board.note("pool_stop_holding", "pinned")

        return DevicePool(), PinnedPool()


class Board:
    """One log, one clock and one memory for every stand-in runtime made on it."""

    def __init__(self):
        self.log: list[tuple] = []
        self.clock_ms = 0.0
        self.driver = Driver(self)
        self.runtimes: list[Runtime] = []
        self.starts: list[int] = []  # allocation bases, sorted
        self.buffers: dict[int, tuple[int, np.ndarray | None, int]] = {}  # base -> (number, bytes or None, size)
        self.chains: dict[int, tuple[int, int]] = {}
        self.next_address = 1 << 32
        self.numbers = itertools.count(1)

    # --- memory ---------------------------------------------------------------------------------------------------
    def allocate(self, nbytes: int) -> _Allocation:
        base = self.next_address
        self.next_address += (nbytes + 0xFFFF) // 0x10000 * 0x10000 + 0x10000
        allocation = _Allocation(base)
        allocation.board = self
        number = next(self.numbers)
        self._add(base, (number, None, nbytes))
        self.note("alloc", f"buf{number}", nbytes)
        return allocation

    def register(self, array: np.ndarray, host: bool) -> int:
        base = self.next_address
        self.next_address += (array.nbytes + 0xFFFF) // 0x10000 * 0x10000 + 0x10000
        self._add(base, (next(self.numbers), array, array.nbytes))
        return base

    def _add(self, base, entry):
        bisect.insort(self.starts, base)
        self.buffers[base] = entry

    def _find(self, pointer: int):
        at = bisect.bisect_right(self.starts, pointer) - 1
        if at < 0:
            return None, 0
        base = self.starts[at]
        number, data, size = self.buffers[base]
        return (base if pointer - base <= size else None), pointer - base

    def name(self, pointer: int) -> str:
        base, offset = self._find(int(pointer))
        if base is None:
            return f"0x{int(pointer):x}"
        return f"buf{self.buffers[base][0]}" + (f"+{offset}" if offset else "")

    def _bytes(self, base: int) -> np.ndarray:
        number, data, size = self.buffers[base]
        if data is None:
            data = np.zeros(size, np.uint8)
            self.buffers[base] = (number, data, size)
        return data

    def write(self, pointer: int, data: np.ndarray) -> None:
        base, offset = self._find(pointer)
        if base is not None:
            self._bytes(base)[offset:offset + data.nbytes] = data

    def read(self, pointer: int, nbytes: int | None) -> np.ndarray:
        base, offset = self._find(pointer)
        if base is None:
            return np.zeros(nbytes or 0, np.uint8)
        data = self._bytes(base)
        return data[offset:] if nbytes is None else data[offset:offset + nbytes].copy()

    # --- the log and the clock --------------------------------------------------------------------------------------
    def shown(self, value):
        """A launch argument as the log writes it: a pointer by its buffer, a number by its value."""
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, int) and value >= 1 << 32:
            return self.name(value)
        return value

    def note(self, *entry) -> None:
        self.log.append(tuple(str(v) if isinstance(v, (_Stream, _Context)) else v for v in entry))

    def advance(self, ms: float) -> None:
        self.clock_ms += ms

    def copy(self, kind: str, nbytes: int, *where) -> None:
        self.note(kind, nbytes, *where)
        self.advance(COPY_MS + nbytes / BYTES_PER_MS)


# --- a run, as the comparisons read it ------------------------------------------------------------------------------
PROFILE = "interactive/min_time_s=0.000001,max_noise=1"  # stops at the fifth sample: the stand-in clocks repeat


class _HostClock:
    """A stand-in for ``time.perf_counter`` and ``time.time_ns`` while a board runs: a host clock that advances 1 µs a
    reading (so a host-timed sample is the same every time) and a fixed wall clock (so seeds drawn from it repeat)."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        self.now += 1e-6
        return self.now

    @staticmethod
    def time_ns():
        return 1_700_000_000_123_456_789


def run_on_board(run, params, gpus: int = 1, profile: str = PROFILE):
    """``run(params, gpu, progress, should_cancel)`` (an experiment's ``run``) on a new board of ``gpus`` stand-in
    GPUs, under ``profile``, host clocks stood in for while it runs: (the rows, the log, progress lines written into
    it as ``("progress", done, total, text)``)."""
    import dataclasses
    import time

    from gpu.device.device_set import DeviceSet

    board = Board()
    if gpus == 1:
        gpu = Runtime(board)
    else:
        gpu = DeviceSet(range(gpus), runtime_class=lambda ordinal, stay_current: Runtime(board, ordinal))
    clock, real = _HostClock(), (time.perf_counter, time.time_ns)
    time.perf_counter, time.time_ns = clock.perf_counter, clock.time_ns
    try:
        rows = run(dataclasses.replace(params, profile=profile), gpu,
                   lambda done, total, text="": board.note("progress", done, total, text), lambda: False)
    finally:
        time.perf_counter, time.time_ns = real
    return rows, board.log


def plain(value):
    """JSON's view of a value (tuples as lists, NumPy scalars as numbers), so a fresh run compares with a stored one."""
    return json.loads(json.dumps(value, default=lambda v: v.item() if hasattr(v, "item") else str(v)))


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(plain(value), sort_keys=True).encode()).hexdigest()[:16]


def summary(rows: list[dict], log: list[tuple]) -> dict:
    """A run in brief: its progress lines, then for the calls before the first point, each point's and those after
    the last (``segments``) their count and digest, and each row's digest, in order."""
    segments, current, lines = [], [], []
    for entry in log:
        if entry[0] == "progress":
            segments.append([len(current), _digest(current)])
            current = []
            lines.append(entry[3])
        else:
            current.append(entry)
    segments.append([len(current), _digest(current)])
    return {"lines": lines, "segments": segments, "rows": [_digest(row) for row in rows]}


def differences(stored: dict, fresh: dict) -> list[str]:
    """Where ``fresh`` departs from ``stored`` (two ``summary``s), in words: the first differing progress line, call
    segment and row, each named by its point."""
    found = []
    if stored["lines"] != fresh["lines"]:
        at = next((i for i, (a, b) in enumerate(zip(stored["lines"], fresh["lines"], strict=False)) if a != b),
                  min(len(stored["lines"]), len(fresh["lines"])))
        found.append(f"progress line {at}: {stored['lines'][at:at + 1]} before, {fresh['lines'][at:at + 1]} now")
        return found
    names = ["before the first point", *stored["lines"]]
    for i, (a, b) in enumerate(zip(stored["segments"], fresh["segments"], strict=False)):
        if a != b:
            found.append(f"calls of {names[i] if i < len(names) else 'after the last point'}: {a[0]} before, "
                         f"{b[0]} now")
            break
    if len(stored["rows"]) != len(fresh["rows"]):
        found.append(f"{len(stored['rows'])} rows before, {len(fresh['rows'])} now")
    else:
        wrong = [i for i, (a, b) in enumerate(zip(stored["rows"], fresh["rows"], strict=True)) if a != b]
        if wrong:
            found.append(f"{len(wrong)} rows differ, the first row {wrong[0]}")
    return found
