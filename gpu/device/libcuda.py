"""PinPoint's one ctypes binding to the CUDA driver (libcuda), for the driver calls PyCUDA does not wrap, and the
classification of CUDA errors by their CUresult code.

Every call checks its CUresult and raises ``gpu.core.errors.CudaError`` (code, call, the driver's description and
whether the error is sticky). ``driver()`` loads libcuda once per process, on first use: importing this module
loads nothing, so it imports on machines without a GPU. Calls that take a context (module loading, prefetch)
use the calling thread's current one, which in the worker is the GpuRuntime's.
"""

from __future__ import annotations

import ctypes
import sys
import threading

from gpu.core.errors import CudaError

LIBRARY = "libcuda.so.1"

CUDA_SUCCESS = 0
# CUresult codes after which CUDA documents the context as unusable: only a new process recovers (cuda.h).
CUDA_ERROR_ILLEGAL_ADDRESS = 700
CUDA_ERROR_LAUNCH_TIMEOUT = 702
CUDA_ERROR_CONTEXT_IS_DESTROYED = 709
CUDA_ERROR_ASSERT = 710
CUDA_ERROR_HARDWARE_STACK_ERROR = 714
CUDA_ERROR_ILLEGAL_INSTRUCTION = 715
CUDA_ERROR_MISALIGNED_ADDRESS = 716
CUDA_ERROR_INVALID_ADDRESS_SPACE = 717
CUDA_ERROR_INVALID_PC = 718
CUDA_ERROR_LAUNCH_FAILED = 719
STICKY_CODES = frozenset({
    CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_TIMEOUT, CUDA_ERROR_CONTEXT_IS_DESTROYED, CUDA_ERROR_ASSERT,
    CUDA_ERROR_HARDWARE_STACK_ERROR, CUDA_ERROR_ILLEGAL_INSTRUCTION, CUDA_ERROR_MISALIGNED_ADDRESS,
    CUDA_ERROR_INVALID_ADDRESS_SPACE, CUDA_ERROR_INVALID_PC, CUDA_ERROR_LAUNCH_FAILED,
})
# cuGetErrorString's descriptions of the sticky codes, for a process that cannot load libcuda (the worker asks the
# driver itself, which knows every code).
KNOWN_DESCRIPTIONS = {
    CUDA_ERROR_ILLEGAL_ADDRESS: "an illegal memory access was encountered",
    CUDA_ERROR_LAUNCH_TIMEOUT: "the launch timed out and was terminated",
    CUDA_ERROR_CONTEXT_IS_DESTROYED: "context is destroyed",
    CUDA_ERROR_ASSERT: "device-side assert triggered",
    CUDA_ERROR_HARDWARE_STACK_ERROR: "hardware stack error",
    CUDA_ERROR_ILLEGAL_INSTRUCTION: "an illegal instruction was encountered",
    CUDA_ERROR_MISALIGNED_ADDRESS: "misaligned address",
    CUDA_ERROR_INVALID_ADDRESS_SPACE: "operation not supported on global/shared address space",
    CUDA_ERROR_INVALID_PC: "invalid program counter",
    CUDA_ERROR_LAUNCH_FAILED: "unspecified launch failure",
}
_HIGHEST_CODE = 1000  # CUresult values lie below this (CUDA_ERROR_UNKNOWN = 999)

# cuFuncGetAttribute / cuFuncSetAttribute attributes (CUfunction_attribute, cuda.h).
FUNC_ATTRIBUTE = {"SHARED_SIZE_BYTES": 1, "NUM_REGS": 4, "MAX_DYNAMIC_SHARED_SIZE_BYTES": 8}
# CUmemLocationType (cuda.h): a device ordinal, or the host.
_MEM_LOCATION_DEVICE, _MEM_LOCATION_HOST = 1, 2


class _MemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class LibCuda:
    """libcuda's entry points that PinPoint calls, each raising ``CudaError`` on a CUresult other than success."""

    def __init__(self, library: str = LIBRARY):
        self.lib = ctypes.CDLL(library)
        self.lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        self._prefetch_v2 = getattr(self.lib, "cuMemPrefetchAsync_v2", None)
        if self._prefetch_v2 is not None:
            self._prefetch_v2.argtypes = [ctypes.c_uint64, ctypes.c_size_t, _MemLocation, ctypes.c_uint,
                                          ctypes.c_void_p]
        else:
            self.lib.cuMemPrefetchAsync.argtypes = [ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        self._codes_by_description: dict[str, int] | None = None

    # --- errors ---------------------------------------------------------------------------------------------
    def error_string(self, code: int) -> str:
        """The driver's description of ``code`` (cuGetErrorString), or '' for a code it does not know."""
        text = ctypes.c_char_p()
        if self.lib.cuGetErrorString(int(code), ctypes.byref(text)) != CUDA_SUCCESS or not text.value:
            return ""
        return text.value.decode(errors="replace")

    def codes_by_description(self) -> dict[str, int]:
        """Every description the driver gives, with its code (worked out once)."""
        if self._codes_by_description is None:
            table = {}
            for code in range(1, _HIGHEST_CODE):
                description = self.error_string(code)
                if description:
                    table.setdefault(description, code)
            self._codes_by_description = table
        return self._codes_by_description

    def check(self, code: int, call: str) -> None:
        if code != CUDA_SUCCESS:
            raise CudaError(code, call, self.error_string(code), sticky=code in STICKY_CODES)

    # --- memory -----------------------------------------------------------------------------------------------
    def mem_prefetch_async(self, pointer: int, nbytes: int, device_ordinal: int | None, stream_handle: int) -> None:
        """cuMemPrefetchAsync of managed memory to a device (``device_ordinal``) or to the host (None).

        CUDA 13's signature takes a CUmemLocation (the ``_v2`` symbol); older drivers have only the legacy one,
        which takes a device ordinal (-1 for the host)."""
        handle = ctypes.c_void_p(stream_handle)
        if self._prefetch_v2 is not None:
            location = _MemLocation(_MEM_LOCATION_DEVICE, device_ordinal) if device_ordinal is not None \
                else _MemLocation(_MEM_LOCATION_HOST, 0)
            code = self._prefetch_v2(ctypes.c_uint64(int(pointer)), ctypes.c_size_t(nbytes), location, 0, handle)
        else:
            code = self.lib.cuMemPrefetchAsync(ctypes.c_uint64(int(pointer)), ctypes.c_size_t(nbytes),
                                               device_ordinal if device_ordinal is not None else -1, handle)
        self.check(code, "cuMemPrefetchAsync")

    # --- devices -----------------------------------------------------------------------------------------------
    def device_uuid(self, ordinal: int) -> str:
        """The board's UUID in NVML's form (``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``), from cuDeviceGetUuid:
        it names the board whether or not NVML is installed, and CUDA_VISIBLE_DEVICES takes it."""
        device = ctypes.c_int()
        self.check(self.lib.cuDeviceGet(ctypes.byref(device), ctypes.c_int(ordinal)), "cuDeviceGet")
        raw = (ctypes.c_ubyte * 16)()
        get_uuid = getattr(self.lib, "cuDeviceGetUuid_v2", None) or self.lib.cuDeviceGetUuid
        self.check(get_uuid(raw, device), "cuDeviceGetUuid")
        text = bytes(raw).hex()
        return f"GPU-{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"

    # --- modules, functions and occupancy ---------------------------------------------------------------------
    def module_load_data(self, image: bytes) -> ctypes.c_void_p:
        """A CUmodule from a cubin, in the current context; ``module_unload`` it when done."""
        module = ctypes.c_void_p()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")
        return module

    def module_unload(self, module: ctypes.c_void_p) -> None:
        self.check(self.lib.cuModuleUnload(module), "cuModuleUnload")

    def module_get_function(self, module: ctypes.c_void_p, name: str) -> ctypes.c_void_p:
        function = ctypes.c_void_p()
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(function), module, name.encode()), "cuModuleGetFunction")
        return function

    def func_get_attribute(self, function: ctypes.c_void_p, attribute: str) -> int:
        value = ctypes.c_int()
        self.check(self.lib.cuFuncGetAttribute(ctypes.byref(value), FUNC_ATTRIBUTE[attribute], function),
                   "cuFuncGetAttribute")
        return value.value

    def func_set_attribute(self, function: ctypes.c_void_p, attribute: str, value: int) -> None:
        self.check(self.lib.cuFuncSetAttribute(function, FUNC_ATTRIBUTE[attribute], ctypes.c_int(value)),
                   "cuFuncSetAttribute")

    def occupancy_max_active_blocks(self, function: ctypes.c_void_p, block_size: int,
                                    dynamic_shared: int) -> tuple[int, int | None]:
        """cuOccupancyMaxActiveBlocksPerMultiprocessor as (CUresult, blocks per SM or None): a refusal is an answer
        to record here, not an error."""
        blocks = ctypes.c_int(-1)
        code = self.lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(blocks), function, ctypes.c_int(block_size), ctypes.c_size_t(dynamic_shared))
        return int(code), (blocks.value if code == CUDA_SUCCESS else None)


_driver: LibCuda | None = None
_driver_lock = threading.Lock()


def driver() -> LibCuda:
    """This process's libcuda (loaded on first use; OSError where there is no driver)."""
    global _driver
    with _driver_lock:
        if _driver is None:
            _driver = LibCuda()
        return _driver


def _codes_by_description() -> dict[str, int]:
    try:
        return driver().codes_by_description()
    except OSError:  # no driver here (CPU-only tests): the sticky codes' known descriptions still classify
        return {description: code for code, description in KNOWN_DESCRIPTIONS.items()}


def is_pycuda_error(exc: BaseException) -> bool:
    """True for PyCUDA's driver errors (pycuda.driver.Error and its subclasses). Never imports PyCUDA: a process
    that has not imported it cannot have raised one."""
    driver_module = sys.modules.get("pycuda.driver")
    error_class = getattr(driver_module, "Error", None)
    return isinstance(error_class, type) and isinstance(exc, error_class)


def is_cuda_error(exc: BaseException) -> bool:
    return isinstance(exc, CudaError) or is_pycuda_error(exc)


def result_code(exc: BaseException) -> int | None:
    """The CUresult behind ``exc``, or None when it is no CUDA error or its code cannot be known.

    A ``CudaError`` carries its code. PyCUDA drops the code: it raises its errors with the message alone
    (``PyErr_SetString(…, err.what())`` in its ``translate_cuda_error``), and that message is
    ``"<call> failed: <cuGetErrorString(code)>[ - <detail>]"`` (``pycuda::error::make_message``). So for a PyCUDA
    error, and only for one, the code is recovered from the message, by matching its description against the
    driver's own descriptions of every code. This text match is the one fallback left, because PyCUDA offers
    nothing better (its exception classes group unrelated codes: LaunchError holds both the sticky launch failure
    and the harmless out-of-resources)."""
    if isinstance(exc, CudaError):
        return exc.code
    if not is_pycuda_error(exc):
        return None
    _, separator, rest = str(exc).partition(" failed: ")
    if not separator:
        return None
    rest = rest.strip()
    table = _codes_by_description()
    for description in sorted(table, key=len, reverse=True):  # longest first: one may begin another
        if rest == description or rest.startswith(description + " - "):
            return table[description]
    return None


def is_sticky(exc: BaseException) -> bool:
    """True when ``exc`` is a CUDA error that leaves the context unusable (its code is in ``STICKY_CODES``)."""
    return result_code(exc) in STICKY_CODES
