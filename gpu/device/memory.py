"""The allocation ledger: every device, pinned, mapped and managed buffer of one job, freed together.

It allocates through the ``pycuda.driver`` module it is given, so it imports no PyCUDA itself (tests give it a
recording stand-in).
"""

from __future__ import annotations

import numpy as np


class AllocationLedger:
    """Every device, pinned and mapped buffer of one job; ``free_all`` releases them on this thread."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.device: list = []
        self.host: list = []
        self.managed: list = []

    def device_buffer(self, nbytes: int):
        allocation = self.cuda.mem_alloc(nbytes)
        self.device.append(allocation)
        return allocation

    def host_buffer(self, nbytes: int, mode: str) -> np.ndarray:
        """A uint32 host array: 'pageable' (NumPy), 'pinned', 'pinned_wc' (write-combined) or 'mapped'."""
        count = nbytes // 4
        if mode == "pageable":
            return np.empty(count, dtype=np.uint32)
        flags = {"pinned": 0, "pinned_wc": self.cuda.host_alloc_flags.WRITECOMBINED,
                 "mapped": self.cuda.host_alloc_flags.DEVICEMAP}[mode]
        array = self.cuda.pagelocked_empty(count, np.uint32, mem_flags=flags)
        self.host.append(array)
        return array

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

    def free_all(self) -> None:
        while self.managed:
            self.managed.pop().base.free()
        while self.host:
            self.host.pop().base.free()
        while self.device:
            self.device.pop().free()
