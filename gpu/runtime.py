"""The CUDA side of the worker: one context, compiled kernels, tracked allocations, device facts.

Only the worker process (``gpu.worker``) and the in-process benchmark script build a ``GpuRuntime``.
It must be created, used and closed on one thread: PyCUDA ties every object to the thread's
context stack, and objects freed elsewhere leak.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import socket
import statistics
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from gpu import schema

KERNEL_DIR = Path(__file__).with_name("kernels")
REPO_ROOT = Path(__file__).resolve().parent.parent

# Clock-event reasons that mean the GPU slowed itself down (NVML nvmlClocksEventReason*):
# SW power cap, HW slowdown, SW thermal, HW thermal, HW power brake. Idle and app-clock settings are not.
_SLOWDOWN_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80

# CUDA errors after which the context is unusable and only a new process recovers.
STICKY_ERROR_MARKERS = (
    "illegal memory access", "illegal address", "unspecified launch failure", "launch failed",
    "misaligned address", "illegal instruction", "device-side assert", "hardware stack error",
    "invalid program counter", "exception on sm", "context is destroyed", "launch timeout",
)


def is_sticky_cuda_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(marker in text for marker in STICKY_ERROR_MARKERS)


def git_commit() -> str:
    """The commit measured; PINPOINT_GIT_COMMIT names it where the tree travels without .git."""
    if os.environ.get("PINPOINT_GIT_COMMIT"):
        return os.environ["PINPOINT_GIT_COMMIT"]
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha + ("+dirty" if dirty else "")) if sha else "unknown"


def host_memory_available() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass(frozen=True)
class Limits:
    """What a job may ask for on this device, read just before it runs."""

    free_device_bytes: int
    total_device_bytes: int
    pinned_budget_bytes: int
    host_available_bytes: int
    max_threads_per_block: int
    warp_size: int

    def as_dict(self) -> dict:
        return asdict(self)


class Telemetry:
    """NVML readings for one device: SM clock and slowdown reasons, sampled during measurements."""

    def __init__(self, pci_bus_id: str):
        self.nvml = None
        self.handle = None
        self.readings: list[tuple[float, int]] = []
        self._last = 0.0
        try:
            import pynvml

            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
            self.nvml = pynvml
        except Exception:  # no NVML: telemetry columns stay empty rather than failing a measurement
            self.nvml = None

    def _call(self, name, *args, default=None):
        if self.nvml is None:
            return default
        try:
            return getattr(self.nvml, name)(self.handle, *args)
        except Exception:
            return default

    def static_facts(self) -> dict:
        nv = self.nvml
        facts = {"driver_version": None, "pcie_gen": None, "pcie_width": None, "sm_clock_max_mhz": None,
                 "mem_clock_max_mhz": None}
        if nv is None:
            return facts
        try:
            version = nv.nvmlSystemGetDriverVersion()
            facts["driver_version"] = version.decode() if isinstance(version, bytes) else version
        except Exception:
            pass
        facts["pcie_gen"] = self._call("nvmlDeviceGetMaxPcieLinkGeneration")
        facts["pcie_width"] = self._call("nvmlDeviceGetMaxPcieLinkWidth")
        facts["pcie_gen_current"] = self._call("nvmlDeviceGetCurrPcieLinkGeneration")
        facts["pcie_width_current"] = self._call("nvmlDeviceGetCurrPcieLinkWidth")
        facts["sm_clock_max_mhz"] = self._call("nvmlDeviceGetMaxClockInfo", nv.NVML_CLOCK_SM)
        facts["mem_clock_max_mhz"] = self._call("nvmlDeviceGetMaxClockInfo", nv.NVML_CLOCK_MEM)
        return facts

    def start_point(self) -> None:
        self.readings = []
        self._last = 0.0
        self.sample(force=True)

    def sample(self, force: bool = False) -> None:
        """Read the clock at most every 50 ms, so sampling never becomes the workload."""
        if self.nvml is None:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.05:
            return
        self._last = now
        clock = self._call("nvmlDeviceGetClockInfo", self.nvml.NVML_CLOCK_SM, default=0)
        reasons = self._call("nvmlDeviceGetCurrentClocksEventReasons", default=None)
        if reasons is None:
            reasons = self._call("nvmlDeviceGetCurrentClocksThrottleReasons", default=0)
        self.readings.append((float(clock), int(reasons)))

    def point_summary(self) -> dict:
        self.sample(force=True)
        if not self.readings:
            return {"sm_clock_mhz": math.nan, "throttled": None}
        return {
            "sm_clock_mhz": statistics.median(c for c, _ in self.readings),
            "throttled": any(r & _SLOWDOWN_MASK for _, r in self.readings),
        }


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


class GpuRuntime:
    """Owns the primary context of one device on the calling thread, and the compiled kernels."""

    def __init__(self, device_ordinal: int = 0):
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

    # --- set-up ---------------------------------------------------------------------------------
    def _compile_kernels(self) -> None:
        """Compile every gpu/kernels/*.cu once, for this device's exact architecture."""
        for source_path in sorted(KERNEL_DIR.glob("*.cu")):
            self.module(source_path.stem)
        self.functions = {
            "copy_vec4": self.modules["transfers"].get_function("copy_vec4"),
            "health_fill": self.modules["health"].get_function("health_fill"),
            "fault_illegal_address": self.modules["health"].get_function("fault_illegal_address"),
        }

    def module(self, stem: str, options: tuple[str, ...] = ()):
        """gpu/kernels/<stem>.cu compiled with extra nvcc ``options`` (e.g. -DEXTRA_REGS=64), once each."""
        from pycuda.compiler import compile as nvcc_compile

        key = " ".join((stem, *options))
        if key not in self.modules:
            major, minor = self.compute_capability
            cubin = nvcc_compile((KERNEL_DIR / f"{stem}.cu").read_text(), arch=f"sm_{major}{minor}",
                                 no_extern_c=True, options=["-O3", f"-I{KERNEL_DIR}", *options])
            self.cubins[key] = cubin
            self.modules[key] = self.cuda.module_from_buffer(cubin)
        return self.modules[key]

    def kernel(self, stem: str, name: str, options: tuple[str, ...] = ()):
        return self.module(stem, options).get_function(name)

    def prefetch(self, pointer: int, nbytes: int, stream, to_device: bool = True) -> None:
        """cuMemPrefetchAsync of managed memory to this device (or to the host), which PyCUDA does not wrap.

        CUDA 13's signature takes a CUmemLocation (the ``_v2`` symbol); older drivers have only the
        legacy one, which takes a device ordinal (-1 for the host)."""
        import ctypes

        if not hasattr(self, "_libcuda"):
            self._libcuda = ctypes.CDLL("libcuda.so.1")
        lib = self._libcuda
        handle = ctypes.c_void_p(stream.handle if stream is not None else 0)
        v2 = getattr(lib, "cuMemPrefetchAsync_v2", None)
        if v2 is not None:
            class CUmemLocation(ctypes.Structure):
                _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]

            location = CUmemLocation(1, self.device_ordinal) if to_device else CUmemLocation(2, 0)
            v2.argtypes = [ctypes.c_uint64, ctypes.c_size_t, CUmemLocation, ctypes.c_uint, ctypes.c_void_p]
            code = v2(ctypes.c_uint64(int(pointer)), ctypes.c_size_t(nbytes), location, 0, handle)
        else:
            lib.cuMemPrefetchAsync.argtypes = [ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
            code = lib.cuMemPrefetchAsync(ctypes.c_uint64(int(pointer)), ctypes.c_size_t(nbytes),
                                          self.device_ordinal if to_device else -1, handle)
        if code != 0:
            raise RuntimeError(f"cuMemPrefetchAsync failed with CUresult {code}")

    def occupancy_limits(self):
        from gpu.occupancy import DeviceLimits

        return DeviceLimits.from_attributes(self.device.name(), self.compute_capability, self.attributes)

    def kernel_resources(self, function):
        from gpu.occupancy import KernelResources

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
        }

    # --- per job ----------------------------------------------------------------------------------
    def provenance(self) -> dict:
        return {**self.facts, "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "git_commit": git_commit(), "backend": "live"}

    def limits(self) -> Limits:
        free, total = self.cuda.mem_get_info()
        host_available = host_memory_available()
        default_budget = min(16 * 1024**3, host_available // 2) if host_available else 4 * 1024**3
        budget = int(os.environ.get("PINPOINT_PINNED_BUDGET_BYTES", default_budget))
        return Limits(int(free), int(total), budget, host_available, int(self.max_threads_per_block),
                      int(self.warp_size))

    @contextmanager
    def job_scope(self):
        """Allocations of one job, all freed (after a synchronize) when it ends, even on error.

        After a job that succeeded the freeing waits for ``release_after_reply`` (the worker calls it once the
        answer is sent, since freeing 3 GiB of pinned memory takes about 0.3 s); a job that fails frees at once.
        Either way nothing of it is held when the next job starts."""
        self._check_thread()
        self.release_after_reply()
        ledger = AllocationLedger(self.cuda)
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
                    ledger.free_all()

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
            raise RuntimeError("health check kernel wrote wrong values")
        free, total = self.cuda.mem_get_info()
        return {"ok": True, "free_device_bytes": int(free), "total_device_bytes": int(total)}

    def fault(self) -> None:
        """Deliberately fault (illegal address); the caller's process must then be replaced."""
        with self.job_scope() as ledger:
            out = ledger.device_buffer(1024)
            self.functions["fault_illegal_address"](out, block=(32, 1, 1), grid=(1, 1))
            self.context.synchronize()

    def close(self) -> None:
        self._check_thread()
        self.release_after_reply()
        self.functions.clear()
        self.modules.clear()
        self.context.pop()

    def _check_thread(self) -> None:
        if threading.get_ident() != self._thread:
            raise RuntimeError("GpuRuntime used from a thread other than the one that owns its context")


# Driver API pieces PyCUDA does not wrap (cuda.h values).
_CU_FUNC_ATTRIBUTE = {"SHARED_SIZE_BYTES": 1, "NUM_REGS": 4, "MAX_DYNAMIC_SHARED_SIZE_BYTES": 8}
OCCUPANCY_REGISTER_CAPS = (0, 16, 24, 32, 48, 64, 72, 96, 128, 168, 255)  # 0: no cap
OCCUPANCY_DYNAMIC_SHARED = (0, 1, 1000, 4096, 12288, 30000, 48 * 1024, 70000, 100 * 1024, 150000, 200 * 1024)


def driver_occupancy_table(gpu: GpuRuntime) -> dict:
    """Ask the driver (cuOccupancyMaxActiveBlocksPerMultiprocessor, through libcuda with ctypes, on the very
    cubins PinPoint runs) for blocks per SM over block sizes × register counts × shared memory."""
    import ctypes

    lib = ctypes.CDLL("libcuda.so.1")

    def check(code, what):
        if code != 0:
            raise RuntimeError(f"{what} failed with CUresult {code}")

    limits = gpu.occupancy_limits()
    kernels = [("occupancy", "occ_registers", (f"-maxrregcount={cap}",) if cap else ()) for cap in
               OCCUPANCY_REGISTER_CAPS]
    kernels += [("coalescing", "transpose_padded", ()), ("coalescing", "copy_f32", ()),
                ("reduction", "dot_warp_shuffle", ()), ("occupancy", "occ_chase", ("-DEXTRA_REGS=128",))]
    answers = []
    for stem, name, options in kernels:
        gpu.module(stem, options)
        key = " ".join((stem, *options))
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        check(lib.cuModuleLoadData(ctypes.byref(module), gpu.cubins[key]), "cuModuleLoadData")
        try:
            check(lib.cuModuleGetFunction(ctypes.byref(function), module, name.encode()), "cuModuleGetFunction")
            value = ctypes.c_int()
            attrs = {}
            for attr, code in _CU_FUNC_ATTRIBUTE.items():
                check(lib.cuFuncGetAttribute(ctypes.byref(value), code, function), "cuFuncGetAttribute")
                attrs[attr] = value.value
            max_dynamic = limits.shared_per_block_optin - attrs["SHARED_SIZE_BYTES"]
            check(lib.cuFuncSetAttribute(function, _CU_FUNC_ATTRIBUTE["MAX_DYNAMIC_SHARED_SIZE_BYTES"],
                                         ctypes.c_int(max_dynamic)), "cuFuncSetAttribute")
            for dynamic in (*OCCUPANCY_DYNAMIC_SHARED, max_dynamic, max_dynamic + 1):
                for block in range(32, limits.max_threads_per_block + 1, 32):
                    blocks = ctypes.c_int(-1)
                    code = lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                        ctypes.byref(blocks), function, ctypes.c_int(block), ctypes.c_size_t(dynamic))
                    answers.append({"kernel": f"{name} {' '.join(options)}".strip(), "registers": attrs["NUM_REGS"],
                                    "static_shared": attrs["SHARED_SIZE_BYTES"], "max_dynamic_shared": max_dynamic,
                                    "block_size": block, "dynamic_shared": dynamic, "cu_result": code,
                                    "blocks_per_sm": blocks.value if code == 0 else None})
        finally:
            lib.cuModuleUnload(module)
    return {"device": limits.as_dict(), "attributes": gpu.attributes, "driver_version": gpu.facts["driver_version"],
            "recorded": gpu.provenance()["timestamp"], "answers": answers}
