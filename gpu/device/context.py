"""The CUDA side of the worker: one context, compiled kernels, device facts and per-job allocation scopes.

Only the worker process (``gpu.service.worker``) and the in-process benchmark script build a ``GpuRuntime``.
It must be created, used and closed on one thread: PyCUDA ties every object to the thread's
context stack, and objects freed elsewhere leak. PyCUDA is imported when a runtime is built, never at import
time, so this module imports on machines without a GPU.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import threading
from contextlib import contextmanager

import numpy as np

from gpu.core import paths, schema
from gpu.core.errors import VerificationError
from gpu.core.limits import Limits
from gpu.core.occupancy import DeviceLimits, KernelResources
from gpu.device import cubins, libcuda
from gpu.device.limits import git_commit, host_memory_available
from gpu.device.memory import DEFAULT_POOL_BYTES, AllocationLedger, HostPool, write_every_page
from gpu.device.telemetry import Telemetry

INCLUDE_DIR = paths.KERNELS  # the shared kernels, which an experiment's own may #include
KERNEL_OPTIONS = ("-O3", f"-I{INCLUDE_DIR}")  # every kernel's nvcc options (a module may add its own)


def visible_gpus() -> list[dict]:
    """Every GPU this process sees (after CUDA_VISIBLE_DEVICES): index, model, board UUID and PCI bus. Initialises
    the driver but makes no context, so the worker can choose its device before it retains one."""
    import pycuda.driver as cuda

    cuda.init()
    found = []
    for index in range(cuda.Device.count()):
        device = cuda.Device(index)
        found.append({"index": index, "name": device.name(), "uuid": libcuda.driver().device_uuid(index),
                      "pci_bus_id": device.pci_bus_id(), "host": socket.gethostname()})
    return found


class GpuRuntime:
    """Owns the primary context of one device on the calling thread, and the compiled kernels. ``stay_current``:
    leave the context current when built (a lone runtime, or a device set's first); False pops it once the kernels
    are compiled (a set's other devices, made current by ``activate``)."""

    def __init__(self, device_ordinal: int = 0, stay_current: bool = True):
        import pycuda
        import pycuda.driver as cuda

        self.cuda = cuda
        cuda.init()
        self.device = cuda.Device(device_ordinal)
        self.device_ordinal = device_ordinal
        self.context = self.device.retain_primary_context()
        self.context.push()
        self._thread = threading.get_ident()
        self._released_after_reply: list[AllocationLedger] = []
        # Host buffers kept between jobs (the Transfers and Streams sweeps' large ones: pinning them, or faulting in
        # a fresh pageable one, is most of what a sweep spends outside its samples). PINPOINT_HOST_POOL_BYTES=0 turns
        # it off.
        self.host_pool = HostPool(self.cuda, int(os.environ.get("PINPOINT_HOST_POOL_BYTES", DEFAULT_POOL_BYTES)))
        self.pycuda_version = pycuda.VERSION_TEXT
        attrs = self.device.get_attributes()
        a = cuda.device_attribute
        self.attributes = {getattr(k, "name", str(k)).split(".")[-1]: int(v) for k, v in attrs.items()}
        self.l2_bytes = int(attrs[a.L2_CACHE_SIZE])
        self.sm_count = attrs[a.MULTIPROCESSOR_COUNT]
        self.max_threads_per_block = attrs[a.MAX_THREADS_PER_BLOCK]
        self.warp_size = attrs[a.WARP_SIZE]
        self.compute_capability = self.device.compute_capability()
        self.telemetry = Telemetry(self.device.pci_bus_id())
        self.facts = self._device_facts(attrs, a)
        self.modules = {}
        self.cubins: dict[str, bytes] = {}
        self.functions = {}
        self._compile_kernels()
        if not stay_current:
            cuda.Context.pop()

    @contextmanager
    def activate(self):
        """This device's context current for the body of a ``with`` (pushed, then popped), on the owning thread."""
        self._check_thread()
        self.context.push()
        try:
            yield self
        finally:
            self.cuda.Context.pop()

    # --- set-up ---------------------------------------------------------------------------------
    def _compile_kernels(self) -> None:
        """Compile every kernel source once (the shared gpu/kernels/*.cu and each experiment package's own, see
        ``paths.kernel_sources``), for this device's exact architecture (``gpu.device.cubins``: built at once on a
        first start, read from its cache after)."""
        sources = {stem: path.read_text() for stem, path in paths.kernel_sources().items()}
        for stem, cubin in cubins.build(sources, self.arch, KERNEL_OPTIONS).items():
            self.cubins[stem] = cubin
            self.modules[stem] = self.cuda.module_from_buffer(cubin)
        self.functions = {
            "copy_vec4": self.modules["transfers"].get_function("copy_vec4"),
            "health_fill": self.modules["health"].get_function("health_fill"),
            "fault_illegal_address": self.modules["health"].get_function("fault_illegal_address"),
        }

    @property
    def arch(self) -> str:
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    def module(self, stem: str, options: tuple[str, ...] = ()):
        """The kernel source ``<stem>.cu`` (``paths.kernel_sources``) compiled with extra nvcc ``options`` (e.g.
        -DEXTRA_REGS=64), once each."""
        key = " ".join((stem, *options))
        if key not in self.modules:
            source = paths.kernel_sources()[stem].read_text()
            cubin = cubins.build({stem: source}, self.arch, (*KERNEL_OPTIONS, *options))[stem]
            self.cubins[key] = cubin
            self.modules[key] = self.cuda.module_from_buffer(cubin)
        return self.modules[key]

    def kernel(self, stem: str, name: str, options: tuple[str, ...] = ()):
        return self.module(stem, options).get_function(name)

    @property
    def gpuarray(self):
        """PyCUDA's gpuarray module (its dot product is one of the reductions): experiments reach PyCUDA only
        through the runtime they are given."""
        from pycuda import gpuarray

        return gpuarray

    def memory_pools(self) -> tuple:
        """A new pair of PyCUDA memory pools (device, page-locked host), for the pools experiment."""
        from pycuda.tools import DeviceMemoryPool, PageLockedMemoryPool

        return DeviceMemoryPool(), PageLockedMemoryPool()

    def prefetch(self, pointer: int, nbytes: int, stream, to_device: bool = True) -> None:
        """cuMemPrefetchAsync of managed memory to this device (or to the host), which PyCUDA does not wrap."""
        libcuda.driver().mem_prefetch_async(pointer, nbytes, self.device_ordinal if to_device else None,
                                            stream.handle if stream is not None else 0)

    def occupancy_limits(self) -> DeviceLimits:
        return DeviceLimits.from_attributes(self.device.name(), self.compute_capability, self.attributes)

    def kernel_resources(self, function) -> KernelResources:
        fa = self.cuda.function_attribute
        return KernelResources(int(function.get_attribute(fa.NUM_REGS)),
                               int(function.get_attribute(fa.SHARED_SIZE_BYTES)),
                               int(function.get_attribute(fa.MAX_DYNAMIC_SHARED_SIZE_BYTES)))

    def _device_facts(self, attrs, a) -> dict:
        cuda = self.cuda
        nvml = self.telemetry.static_facts()
        mem_clock_mhz = attrs[a.MEMORY_CLOCK_RATE] / 1000  # attribute is in kHz
        bus_width = attrs[a.GLOBAL_MEMORY_BUS_WIDTH]
        driver_api = cuda.get_driver_version()
        built = cuda.get_version()
        return {
            "device_name": self.device.name(),
            "compute_capability": "{}.{}".format(*self.compute_capability),
            "sm_count": int(self.sm_count),
            "memory_total_bytes": int(self.device.total_memory()),
            "driver_version": nvml["driver_version"] or f"CUDA {driver_api // 1000}.{driver_api % 1000 // 10}",
            "cuda_version": f"driver API {driver_api // 1000}.{driver_api % 1000 // 10}; "
                            f"PyCUDA built for {built[0]}.{built[1]}",
            "pycuda_version": self.pycuda_version,
            "pcie_gen": nvml["pcie_gen"],
            "pcie_width": nvml["pcie_width"],
            "pcie_gbps_theoretical": schema.pcie_gbps_per_direction(nvml["pcie_gen"], nvml["pcie_width"]),
            "hbm_gbps_theoretical": schema.hbm_gbps(mem_clock_mhz, bus_width),
            "sm_clock_max_mhz": nvml["sm_clock_max_mhz"],
            "mem_clock_max_mhz": nvml["mem_clock_max_mhz"] or mem_clock_mhz,
            "host": socket.gethostname(),
            "l2_bytes": int(attrs[a.L2_CACHE_SIZE]),
            "async_engine_count": int(attrs[a.ASYNC_ENGINE_COUNT]),
            "gpu_uuid": nvml["gpu_uuid"] or libcuda.driver().device_uuid(self.device_ordinal),
        }

    # --- per job ----------------------------------------------------------------------------------
    def provenance(self) -> dict:
        return {**self.facts, "gpu_index": self.device_ordinal,
                "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "git_commit": git_commit(),
                "backend": "live"}

    def limits(self) -> Limits:
        free, total = self.cuda.mem_get_info()
        host_available = host_memory_available()
        default_budget = min(16 * 1024**3, host_available // 2) if host_available else 4 * 1024**3
        budget = int(os.environ.get("PINPOINT_PINNED_BUDGET_BYTES", default_budget))
        # The pool's idle page-locked buffers are pinned memory too: a job gets the budget less what the pool holds
        # of them (a pooled sweep takes its buffers back from it). Its pageable ones are not page-locked.
        budget = max(0, budget - self.host_pool.locked_bytes)
        return Limits(int(free), int(total), budget, host_available, int(self.max_threads_per_block),
                      int(self.warp_size))

    def warm_host_pool(self, buffers: list[tuple[int, str]]) -> None:
        """Put ``buffers`` ((bytes, mode) each) into the pool now, while nobody waits (the app's worker, at its
        start: the Transfers and Streams pages' first Measure then pins nothing and faults in no page): page-locked
        ones pinned, pageable ones written to the last page, so that every page is resident. Stops at the pool's
        capacity."""
        self._check_thread()
        pool = self.host_pool
        with self.job_scope() as ledger:
            for nbytes, mode in buffers:
                # What the pool will hold when the ledger gives back: its idle buffers and those taken so far (one
                # of its own that matches costs nothing more).
                lent = sum(array.nbytes for _, array in ledger.pooled)
                idle = any(kind == mode and array.nbytes == nbytes for kind, array in pool.idle)
                if not idle and pool.held_bytes + lent + nbytes > pool.capacity_bytes:
                    break
                array = ledger.host_buffer(nbytes, mode, pooled=True)
                if mode == "pageable":
                    write_every_page(array)
        self.release_after_reply()

    @contextmanager
    def job_scope(self):
        """Allocations of one job, all freed (after a synchronize) when it ends, even on error.

        After a job that succeeded the freeing waits for ``release_after_reply`` (the worker calls it once the
        answer is sent, since freeing 3 GiB of pinned memory takes about 0.3 s); a job that fails frees at once.
        Either way nothing of it is held when the next job starts."""
        self._check_thread()
        self.release_after_reply()
        ledger = AllocationLedger(self.cuda, self.host_pool)
        succeeded = False
        try:
            yield ledger
            succeeded = True
        finally:
            try:
                self.context.synchronize()
            finally:
                if succeeded:
                    self._released_after_reply.append(ledger)
                else:
                    ledger.free_all(keep_pooled=False)

    def release_after_reply(self) -> None:
        """Free the buffers of finished jobs (see ``job_scope``)."""
        self._check_thread()
        while self._released_after_reply:
            self._released_after_reply.pop().free_all()

    def health_check(self) -> dict:
        """Run a trivial kernel and check every element it wrote."""
        n = 1 << 16
        with self.job_scope() as ledger:
            out = ledger.device_buffer(n * 4)
            self.functions["health_fill"](out, np.uint32(n), block=(256, 1, 1), grid=((n + 255) // 256, 1))
            host = np.empty(n, dtype=np.uint32)
            self.cuda.memcpy_dtoh(host, out)
        expected = np.arange(n, dtype=np.uint32) * np.uint32(3) + np.uint32(1)
        if not np.array_equal(host, expected):
            wrong = int(np.count_nonzero(host != expected))
            raise VerificationError(f"health check: the kernel wrote {wrong:,} of {n:,} words wrong, so this context "
                                    "cannot be trusted")
        free, total = self.cuda.mem_get_info()
        return {"ok": True, "free_device_bytes": int(free), "total_device_bytes": int(total)}

    def fault(self) -> None:
        """Deliberately fault (illegal address); the caller's process must then be replaced."""
        with self.job_scope() as ledger:
            out = ledger.device_buffer(1024)
            self.functions["fault_illegal_address"](out, block=(32, 1, 1), grid=(1, 1))
            self.context.synchronize()

    def close(self, pop: bool = True) -> None:
        """Free what the runtime holds (its context current); ``pop`` its context last (a set's other devices are
        closed inside ``activate``, which pops)."""
        self._check_thread()
        self.release_after_reply()
        self.telemetry.witness.close()
        self.host_pool.free_all()
        self.functions.clear()
        self.modules.clear()
        if pop:
            self.context.pop()

    def _check_thread(self) -> None:
        if threading.get_ident() != self._thread:
            raise RuntimeError("GpuRuntime used from a thread other than the one that owns its context")
