"""The allocation ledger: every device, pinned, mapped and managed buffer of one job, freed together.

It allocates through the ``pycuda.driver`` module it is given, so it imports no PyCUDA itself (tests give it a
recording stand-in).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

PAGE_LOCKED = ("pinned", "pinned_wc", "mapped")

# What the worker's pool keeps by default (PINPOINT_HOST_POOL_BYTES overrides it): the Transfers defaults' three
# 1 GiB buffers (pinned-and-mapped, write-combined, pageable) and the Streams defaults' six of 256 MiB (a pinned
# input and output, a pageable input and output, the bidirectional copies' output pattern and read-back).
DEFAULT_POOL_BYTES = 3 * 1024**3 + 6 * 256 * 1024**2


class HostPool:
    """Host buffers kept between jobs, at most ``capacity_bytes`` of them. Pinning is the slow part of a page-locked
    buffer (0.4-0.7 s per GiB on an H200 host, and two pins in parallel threads take as long as in turn), and the
    first touch of each 4 KiB page the slow part of a fresh pageable one (262,144 page faults in 1 GiB, 0.3-0.5 s),
    so a sweep that asks for a pooled buffer (``AllocationLedger.host_buffer(…, pooled=True)``) gets one of the same
    kind and size that an earlier job gave back, and gives it back when it ends. Its contents are whatever the last
    job left: a borrower writes what it needs before it relies on it.

    Every idle buffer counts against the capacity: page-locked ones (``locked_bytes``, which the runtime also takes
    off the pinned budget it offers a job) and pageable NumPy arrays, which are not page-locked but are the worker's
    resident memory all the same (the kernel counts them as used, so ``limits.host_available_bytes`` already leaves
    them out)."""

    def __init__(self, cuda, capacity_bytes: int):
        self.cuda = cuda
        self.capacity_bytes = max(0, int(capacity_bytes))
        self.idle: list[tuple[str, np.ndarray]] = []
        self.lent = self.missed = 0  # requests it answered with an idle buffer, and those it had none for

    @property
    def held_bytes(self) -> int:
        return sum(array.nbytes for _, array in self.idle)

    @property
    def locked_bytes(self) -> int:
        """The idle buffers' page-locked bytes (pageable ones left out)."""
        return sum(array.nbytes for kind, array in self.idle if kind in PAGE_LOCKED)

    def take(self, nbytes: int, mode: str) -> np.ndarray | None:
        for i, (kind, array) in enumerate(self.idle):
            if kind == mode and array.nbytes == nbytes:
                self.lent += 1
                return self.idle.pop(i)[1]
        self.missed += 1
        return None

    def counts(self) -> dict:
        """What it holds and how often it was asked (the worker's ``memory`` job reports them)."""
        return {"held_bytes": self.held_bytes, "locked_bytes": self.locked_bytes, "lent": self.lent,
                "missed": self.missed}

    def give(self, array: np.ndarray, mode: str) -> bool:
        """Keep ``array`` for a later job when it fits the capacity (True), else leave it to be freed (False)."""
        if self.held_bytes + array.nbytes > self.capacity_bytes:
            return False
        self.idle.append((mode, array))
        return True

    def free_all(self) -> None:
        while self.idle:
            release(*self.idle.pop())


def release(mode: str, array: np.ndarray) -> None:
    """Free a host buffer now: a page-locked one through the driver; a pageable one is NumPy's, freed when the last
    reference to it goes."""
    if mode in PAGE_LOCKED:
        array.base.free()


def write_every_page(array: np.ndarray, slice_bytes: int = 64 * 1024**2) -> None:
    """Zero a contiguous ``array`` so that every page of it is resident (a fresh pageable array's pages are mapped
    only at their first touch), in slices on several threads: NumPy lets the GIL go while it writes, and the kernel
    faults pages in for several threads at once."""
    flat = array.reshape(-1).view(np.uint8)

    def zero(lo: int) -> None:
        flat[lo:lo + slice_bytes] = 0

    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as threads:
        list(threads.map(zero, range(0, flat.size, slice_bytes)))


def warm_plan(wanted: list[tuple[int, str]], capacity_bytes: int, pinned_budget_bytes: int,
              host_available_bytes: int) -> list[tuple[int, str]]:
    """The buffers of ``wanted`` ((bytes, mode) each, in order) that a worker puts in its pool at its start: none
    unless the page-locked ones leave half the pinned budget to a job's own pinned memory, and all of them half the
    host's available memory (where it is known); then those that fit the pool's capacity, in order."""
    locked = sum(nbytes for nbytes, mode in wanted if mode in PAGE_LOCKED)
    total = sum(nbytes for nbytes, _ in wanted)
    if locked > pinned_budget_bytes // 2 or (host_available_bytes and total > host_available_bytes // 2):
        return []
    plan, held = [], 0
    for nbytes, mode in wanted:
        if held + nbytes > capacity_bytes:
            break
        plan.append((nbytes, mode))
        held += nbytes
    return plan


class AllocationLedger:
    """Every device, pinned and mapped buffer of one job, and its pooled pageable ones; ``free_all`` releases them
    on this thread (pooled host buffers go back to the ``pool`` instead)."""

    def __init__(self, cuda, pool: HostPool | None = None):
        self.cuda = cuda
        self.pool = pool
        self.device: list = []
        self.host: list = []
        self.managed: list = []
        self.pooled: list[tuple[str, np.ndarray]] = []

    def device_buffer(self, nbytes: int):
        allocation = self.cuda.mem_alloc(nbytes)
        self.device.append(allocation)
        return allocation

    def host_buffer(self, nbytes: int, mode: str, pooled: bool = False) -> np.ndarray:
        """A uint32 host array: 'pageable' (NumPy), 'pinned', 'pinned_wc' (write-combined) or 'mapped'. ``pooled``:
        taken from, and at the job's end given back to, the runtime's ``HostPool`` (what it holds is the last
        borrower's: write before relying on it)."""
        count = nbytes // 4
        if pooled and self.pool is not None:
            array = self.pool.take(nbytes, mode)
            if array is None:
                array = self._new(count, mode)
            self.pooled.append((mode, array))
            return array
        if mode == "pageable":
            return np.empty(count, dtype=np.uint32)
        array = self._pin(count, mode)
        self.host.append(array)
        return array

    def _new(self, count: int, mode: str) -> np.ndarray:
        return np.empty(count, dtype=np.uint32) if mode == "pageable" else self._pin(count, mode)

    def _pin(self, count: int, mode: str) -> np.ndarray:
        flags = {"pinned": 0, "pinned_wc": self.cuda.host_alloc_flags.WRITECOMBINED,
                 "mapped": self.cuda.host_alloc_flags.DEVICEMAP}[mode]
        return self.cuda.pagelocked_empty(count, np.uint32, mem_flags=flags)

    def managed_buffer(self, nbytes: int) -> np.ndarray:
        """A uint32 array in managed (unified) memory, attached globally: host and device may touch it."""
        array = self.cuda.managed_empty(nbytes // 4, np.uint32, mem_flags=self.cuda.mem_attach_flags.GLOBAL)
        self.managed.append(array)
        return array

    def free_host(self, array: np.ndarray) -> None:
        for i, held in enumerate(self.host):
            if held is array:
                self.host.pop(i).base.free()
                return
        for i, (mode, held) in enumerate(self.pooled):
            if held is array:
                self.pooled.pop(i)
                if not self.pool.give(array, mode):
                    release(mode, array)
                return

    def free_managed(self, array: np.ndarray) -> None:
        for i, held in enumerate(self.managed):
            if held is array:
                self.managed.pop(i).base.free()
                return

    def free_device(self, allocation) -> None:
        for i, held in enumerate(self.device):
            if held is allocation:
                self.device.pop(i).free()
                return

    def free_all(self, keep_pooled: bool = True) -> None:
        """Free everything; pooled host buffers go back to the pool (``keep_pooled``: after a failed job they are
        freed too, as the context they belong to may be gone)."""
        while self.managed:
            self.managed.pop().base.free()
        while self.host:
            self.host.pop().base.free()
        while self.pooled:
            mode, array = self.pooled.pop(0)  # in the order they were taken: the first ones are kept first
            if not (keep_pooled and self.pool.give(array, mode)):
                release(mode, array)
        while self.device:
            self.device.pop().free()
