"""How the worker measures the reduction experiment, declared in this package's ``__init__.py``
(its docstring says what is measured, how it is timed and how it is checked)."""

from __future__ import annotations

import math
import threading

import numpy as np

from gpu.core.errors import VerificationError
from gpu.device.timing import KernelTimer
from gpu.experiments.reduction import END_TO_END, LABELS, UNHELD, bytes_moved
from gpu.sweeps import _kernels as k
from gpu.sweeps import harness
from gpu.sweeps.verify import verify_pool


class ReductionSweep(harness.Sweep):
    """Each size: the -1/0/1 and uniform vectors; each block size: every variant, first checked exactly on the
    -1/0/1 data, then timed on the uniform data (its relative error a column). Host buffers of the end-to-end
    variants live for one size."""

    RESTART_TELEMETRY = False

    def __init__(self, params, gpu, profile):
        super().__init__(params, gpu, profile)
        self.gpuarray = gpu.gpuarray
        self.fn = {name: gpu.kernel("reduction", f"dot_{name}") for name in
                   ("atomic_per_element", "shared_tree", "warp_shuffle", "grid_stride")}

    def setup(self) -> None:
        ledger, largest = self.ledger, max(self.params.sizes)
        # A kernel's own clock (gpu.device.timing.KernelTimer: events around one launch, the stream held while it is
        # queued), not one of the harness's copy methods: a sample is one cold dot product (end to end: with its
        # copies), never a batch.
        self.timer = KernelTimer(self.gpu, ledger)
        self.a, self.b = ledger.device_buffer(largest * 4), ledger.device_buffer(largest * 4)
        self.out_f, self.out_d = ledger.device_buffer(4), ledger.device_buffer(8)

    def group_of(self, grid_point):
        return grid_point["elements"]

    def enter_group(self, n) -> None:
        """A size's vectors and their exact dot products, views of the device buffers for gpuarray.dot, and (filled
        at their first point) the end-to-end variants' host buffers."""
        ternary, exact_int, uniform, exact = dot_inputs(n)
        views = tuple(self.gpuarray.GPUArray((n,), np.float32, gpudata=buffer) for buffer in (self.a, self.b))
        self.size = {"n": n, "ternary": ternary, "exact_int": exact_int, "uniform": uniform, "exact": exact,
                     "views": views, "hosts": {}}
        self.block_group = None

    def leave_group(self, n) -> None:
        self._release_result()
        for pair in self.size["hosts"].values():
            for array in pair:
                if array.base is not None and hasattr(array.base, "base"):
                    self.ledger.free_host(array.base)

    def _release_result(self) -> None:
        """Drop a gpuarray.dot result the last point kept (its device memory freed now, not at the next dot)."""
        if self.block_group is not None:
            self.block_group["held"].clear()

    def point(self, grid_point) -> harness.Point:
        variant, block, n = grid_point["variant"], grid_point["block_size"], grid_point["elements"]
        self._release_result()
        if self.block_group is None or self.block_group["block"] != block:  # what a block size's variants share
            self.block_group = {**self.size, "block": block, "grid": k.grid_for(n, block),
                          "wave": (min(self.gpu.sm_count * (2048 // block), -(-n // 4 // block)), 1), "held": {}}
        # gpuarray.dot frees its previous result (a free waits for the GPU) and a pageable copy stages through the
        # host: neither can be queued behind a held stream.
        hold = variant not in UNHELD
        return harness.Point(
            {"variant": variant, "group": "end_to_end" if variant in END_TO_END else "kernel",
             "direction": "device", "block_size": block, "elements": n, "param": "none",
             "param_value": 0, "rel_error": None},
            f"{LABELS[variant]} · {n:,} elements · block {block}", bytes_moved(n),
            self.timer.timer_name(hold), {"variant": variant, "hold": hold, "group": self.block_group})

    def kernel(self, group, variant, s) -> str:
        """Enqueue one complete dot product (result reset included); returns how to read it."""
        cuda, fn, a, b, n, block = self.cuda, self.fn, self.a, self.b, group["n"], group["block"]
        if variant == "atomic_per_element":
            cuda.memset_d32_async(self.out_f, 0, 1, s)
            fn[variant](a, b, self.out_f, np.uint64(n), block=(block, 1, 1), grid=group["grid"], stream=s)
            return "float"
        if variant == "gpuarray_dot":
            group["held"]["result"] = self.gpuarray.dot(*group["views"], stream=s)
            return "gpuarray"
        cuda.memset_d32_async(self.out_d, 0, 2, s)
        if variant == "shared_tree":
            fn[variant](a, b, self.out_d, np.uint64(n), block=(block, 1, 1), grid=group["grid"], shared=block * 8,
                        stream=s)
        elif variant == "warp_shuffle":
            fn[variant](a, b, self.out_d, np.uint64(n), block=(block, 1, 1), grid=group["grid"], stream=s)
        else:
            fn["grid_stride"](a, b, self.out_d, np.uint64(n // 4), block=(block, 1, 1), grid=group["wave"],
                              stream=s)
        return "double"

    def result(self, group, kind) -> float:
        self.cuda.Context.synchronize()
        if kind == "gpuarray":
            return float(group["held"].pop("result").get())
        value = np.zeros(1, dtype=np.float32 if kind == "float" else np.float64)
        self.cuda.memcpy_dtoh(value, self.out_f if kind == "float" else self.out_d)
        return float(value[0])

    def measure(self, point):
        state = point.state
        variant, hold, group = state["variant"], state["hold"], state["group"]
        cuda, a, b, n, timer = self.cuda, self.a, self.b, group["n"], self.timer
        state["label"] = label = f"{LABELS[variant]} ({n:,} elements, block {group['block']})"
        base = "grid_stride" if variant in END_TO_END else variant
        ternary, uniform = group["ternary"], group["uniform"]
        cuda.memcpy_htod(a, ternary[0])
        cuda.memcpy_htod(b, ternary[1])
        got = self.result(group, self.kernel(group, base, None))
        if got != group["exact_int"]:
            raise VerificationError(f"{label}: on -1/0/1 data the dot product is exactly "
                                    f"{group['exact_int']:.0f}, the kernel returned {got!r}")
        cuda.memcpy_htod(a, uniform[0])
        cuda.memcpy_htod(b, uniform[1])
        if variant in END_TO_END:
            mode = "pinned" if variant == "end_to_end_pinned" else "pageable"
            hosts = group["hosts"]
            if mode not in hosts:
                pair = [self.ledger.host_buffer(n * 4, mode).view(np.float32) for _ in range(2)]
                for dst, src in zip(pair, uniform, strict=True):
                    np.copyto(dst, src)
                hosts[mode] = pair
            ha, hb = hosts[mode]
            last = np.zeros(1, dtype=np.float64)
            last_host = self.ledger.host_buffer(8, "pinned").view(np.float64) if mode == "pinned" else last

            def launch(s):
                cuda.memcpy_htod_async(a, ha, s)
                cuda.memcpy_htod_async(b, hb, s)
                self.kernel(group, "grid_stride", s)
                cuda.memcpy_dtoh_async(last_host, self.out_d, s)

            state["value"] = lambda: float(last_host[0])
            return lambda: timer.once(launch, hold)
        kinds = []
        state["value"] = lambda: self.result(group, kinds[-1])
        return lambda: timer.once(lambda s: kinds.append(self.kernel(group, variant, s)), hold)

    def verify(self, point) -> None:
        state = point.state
        exact, value = state["group"]["exact"], state["value"]()
        if state["variant"] in END_TO_END and abs(value - exact) > 1e-4 * max(abs(exact), 1.0):
            raise VerificationError(f"{state['label']}: result {value!r} differs from the float64 dot "
                                    f"{exact!r} by more than 1e-4 relative: data was corrupted")
        point.columns["rel_error"] = abs(value - exact) / abs(exact) if exact else abs(value)


run = harness.runner(ReductionSweep)

INPUT_SLICE = 1 << 18  # values drawn and summed per slice: a slice's float64 products (2 MiB) stay in cache
_scratch = threading.local()  # each pool thread's float64 products, reused (a fresh 2 MiB buffer is paged in anew)


def dot_inputs(n: int, seed=None) -> tuple[list[np.ndarray], int, list[np.ndarray], float]:
    """The vectors of one size and their exact dot products: two of -1/0/1 (float32) and their integer dot, two
    uniform in [-1, 1) (float32) and their dot in float64. Drawn in slices on the verify pool, each slice from its own
    generator spawned from ``seed`` (the same ``n`` and ``seed`` give the same vectors), and summed there slice by
    slice: at 2^28 values, drawing whole vectors and their float64 copies on one core took most of a health suite's
    reduction run (9–17 s).

    The -1/0/1 values are drawn as int8 and their dot summed in int64, exactly; the uniform ones as float32 x in
    [0, 1), then 2x − 1, which is exact in float32; their products are exact in float64 and summed pairwise there,
    slice by slice, the slices' sums added with ``math.fsum``."""
    ternary = [np.empty(n, np.float32) for _ in range(2)]
    uniform = [np.empty(n, np.float32) for _ in range(2)]
    starts = range(0, n, INPUT_SLICE)
    generators = np.random.SeedSequence(seed).spawn(len(starts))

    def fill(index: int) -> tuple[int, float]:
        lo = starts[index]
        hi = min(lo + INPUT_SLICE, n)
        rng = np.random.default_rng(generators[index])
        small = [rng.integers(-1, 2, size=hi - lo, dtype=np.int8) for _ in range(2)]
        for vector, values in zip(ternary, small, strict=True):
            np.copyto(vector[lo:hi], values)
        exact_int = int(np.multiply(small[0], small[1]).sum(dtype=np.int64))
        for vector in uniform:
            part = vector[lo:hi]
            rng.random(out=part, dtype=np.float32)
            np.multiply(part, np.float32(2), out=part)
            np.subtract(part, np.float32(1), out=part)
        products = getattr(_scratch, "products", None)
        if products is None or products.size < hi - lo:
            products = _scratch.products = np.empty(INPUT_SLICE, np.float64)
        products = products[:hi - lo]
        np.multiply(uniform[0][lo:hi], uniform[1][lo:hi], out=products, dtype=np.float64)
        return exact_int, float(products.sum())

    sums = list(verify_pool().map(fill, range(len(starts))))
    return ternary, sum(s[0] for s in sums), uniform, math.fsum(s[1] for s in sums)


def warm_up(gpu) -> None:
    """Build ``gpuarray.dot``'s kernel as the worker starts: PyCUDA compiles its two-stage reduction on first use
    (nvcc, or its compiler cache, then a module load: 0.2–0.3 s from the cache on an H200's host), which a first
    Measure of the dot products, or of the Roofline suite, would otherwise wait for."""
    ones = gpu.gpuarray.to_gpu(np.ones(4096, np.float32))  # to_gpu, not zeros: zeros would compile a fill kernel
    value = float(gpu.gpuarray.dot(ones, ones).get())
    if value != 4096.0:
        raise VerificationError(f"warming up gpuarray.dot: 4096 ones dotted with themselves gave {value!r}")
