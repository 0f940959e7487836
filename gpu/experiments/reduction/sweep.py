"""How the worker measures the reduction experiment, declared in this package's ``__init__.py``
(its docstring says what is measured, how it is timed and how it is checked)."""

from __future__ import annotations

import math

import numpy as np

from gpu.core.errors import VerificationError
from gpu.device.timing import KernelTimer
from gpu.experiments.reduction import END_TO_END, LABELS, UNHELD, bytes_moved
from gpu.experiments.reduction import inputs as formula
from gpu.sweeps import _kernels as k
from gpu.sweeps import harness

TERNARY_PAIR, UNIFORM_PAIR = 0, 1  # the generator kernel's ``pair``: vectors 0 and 1 (-1/0/1), 2 and 3 (uniform)
FILL_BLOCK = 256
# The reference kernels' shape: REFERENCE_BLOCK threads a block, each summing REFERENCE_PER_THREAD elements of its
# block's chunk (the float64 sum's error bound in reduction_inputs.cu counts both); one sum a block, added on the host.
REFERENCE_BLOCK, REFERENCE_PER_THREAD = 256, 64
REFERENCE_CHUNK = REFERENCE_BLOCK * REFERENCE_PER_THREAD


class ReductionSweep(harness.Sweep):
    """Each size: a seed, the -1/0/1 and uniform vectors it makes on the GPU (checked against the formula on the host)
    and their exact dot products (reference kernels); each block size: every variant, first checked exactly on the
    -1/0/1 data, then timed on the uniform data (its relative error a column). Host buffers of the end-to-end
    variants live for one size, filled from the device's uniform vectors."""

    RESTART_TELEMETRY = False

    def __init__(self, params, gpu, profile):
        super().__init__(params, gpu, profile)
        self.gpuarray = gpu.gpuarray
        self.fn = {name: gpu.kernel("reduction", f"dot_{name}") for name in
                   ("atomic_per_element", "shared_tree", "warp_shuffle", "grid_stride")}
        self.fill_pair = gpu.kernel("reduction_inputs", "reduction_fill_pair")
        self.reference = {pair: gpu.kernel("reduction_inputs", f"reduction_reference_{name}")
                          for pair, name in ((TERNARY_PAIR, "ternary"), (UNIFORM_PAIR, "uniform"))}

    def setup(self) -> None:
        ledger, largest = self.ledger, max(self.params.sizes)
        # A kernel's own clock (gpu.device.timing.KernelTimer: events around one launch, the stream held while it is
        # queued), not one of the harness's copy methods: a sample is one cold dot product (end to end: with its
        # copies), never a batch.
        self.timer = KernelTimer(self.gpu, ledger)
        self.a, self.b = ledger.device_buffer(largest * 4), ledger.device_buffer(largest * 4)
        self.out_f, self.out_d = ledger.device_buffer(4), ledger.device_buffer(8)
        self.block_sums = ledger.device_buffer(-(-largest // REFERENCE_CHUNK) * 8)

    def group_of(self, grid_point):
        return grid_point["elements"]

    def enter_group(self, n) -> None:
        """A size's seed, its vectors' exact dot products (each pair made on the GPU, checked against the formula,
        summed by its reference kernel), views of the device buffers for gpuarray.dot, and (filled at their first
        point) the end-to-end variants' host buffers."""
        seed = self.draw_seed()
        exact_int = self.reference_sum(n, seed, TERNARY_PAIR)
        exact = self.reference_sum(n, seed, UNIFORM_PAIR)
        views = tuple(self.gpuarray.GPUArray((n,), np.float32, gpudata=buffer) for buffer in (self.a, self.b))
        self.size = {"n": n, "seed": seed, "exact_int": exact_int, "exact": exact, "views": views, "hosts": {}}
        self.block_group = None

    def draw_seed(self) -> int:
        return formula.draw_seed()

    def fill(self, n: int, seed: int, pair: int) -> None:
        """The vectors of ``pair`` (-1/0/1 or uniform) under ``seed`` into the device buffers, one kernel writing at
        memory bandwidth (health_time.py --parts reduction times it)."""
        self.fill_pair(self.a, self.b, np.uint64(n), np.uint64(seed), np.uint32(pair), block=(FILL_BLOCK, 1, 1),
                       grid=k.grid_for(n, FILL_BLOCK))
        self.cuda.Context.synchronize()  # written before any stream reads them (the timer's streams may not wait)

    def cross_check(self, n: int, seed: int, pair: int) -> None:
        """The device's elements of ``pair`` against the formula computed on the host, bit for bit, at the elements
        ``inputs.checked_runs`` names (the first and last few thousand and runs spread between them): a generator that
        wrote anything else fails here, before its data is summed or timed."""
        runs, index = formula.checked_runs(n), formula.checked_indices(n)
        for vector, buffer in zip((2 * pair, 2 * pair + 1), (self.a, self.b), strict=True):
            got, at = np.empty(index.size, np.float32), 0
            for start, count in runs:
                self.cuda.memcpy_dtoh(got[at:at + count], int(buffer) + 4 * start)
                at += count
            wrong = formula.first_difference(seed, vector, index, got)
            if wrong:
                raise VerificationError(f"the dot products' input vectors ({n:,} elements, seed {seed:#x}) are "
                                        f"not what their formula gives: {wrong}")

    def reference_sum(self, n: int, seed: int, pair: int) -> int | float:
        """``pair`` made on the GPU and checked, then its exact dot product: the integer dot of the -1/0/1 pair (an
        int, exact), or the float64 dot of the uniform pair (its error bound in reduction_inputs.cu), each block's sum
        from the reference kernel, added here in a fixed order."""
        self.fill(n, seed, pair)
        self.cross_check(n, seed, pair)
        blocks = -(-n // REFERENCE_CHUNK)
        item = np.int64 if pair == TERNARY_PAIR else np.float64
        self.reference[pair](self.a, self.b, self.block_sums, np.uint64(n), np.uint32(REFERENCE_PER_THREAD),
                             block=(REFERENCE_BLOCK, 1, 1), grid=(blocks, 1), shared=REFERENCE_BLOCK * 8)
        sums = np.empty(blocks, item)
        self.cuda.memcpy_dtoh(sums, self.block_sums)
        if pair == TERNARY_PAIR:
            return int(sums.sum(dtype=np.int64))  # at most 2^28 in magnitude: exact
        return math.fsum(sums.tolist())  # the blocks' sums added correctly rounded

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
             "direction": "device", "block_size": block, "elements": n,
             "rel_error": None},
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
        # The generator writes both pairs again (a millisecond at 2^28), so each variant sums data made afresh from
        # the seed: the same vectors the references were computed from.
        self.fill(n, group["seed"], TERNARY_PAIR)
        got = self.result(group, self.kernel(group, base, None))
        if got != group["exact_int"]:
            raise VerificationError(f"{label}: on -1/0/1 data the dot product is exactly "
                                    f"{group['exact_int']:.0f}, the kernel returned {got!r} "
                                    f"(inputs' seed {group['seed']:#x})")
        self.fill(n, group["seed"], UNIFORM_PAIR)
        if variant in END_TO_END:
            mode = "pinned" if variant == "end_to_end_pinned" else "pageable"
            hosts = group["hosts"]
            if mode not in hosts:
                pair = [self.ledger.host_buffer(n * 4, mode).view(np.float32) for _ in range(2)]
                for dst, src in zip(pair, (a, b), strict=True):
                    cuda.memcpy_dtoh(dst, src)  # the device's uniform vectors, just made
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
                                    f"{exact!r} by more than 1e-4 relative: data was corrupted (inputs' seed "
                                    f"{state['group']['seed']:#x})")
        point.columns["rel_error"] = abs(value - exact) / abs(exact) if exact else abs(value)


run = harness.runner(ReductionSweep)


def warm_up(gpu) -> None:
    """Build ``gpuarray.dot``'s kernel as the worker starts: PyCUDA compiles its two-stage reduction on first use
    (nvcc, or its compiler cache, then a module load: 0.2–0.3 s from the cache on an H200's host), which a first
    Measure of the dot products, or of the Roofline suite, would otherwise wait for."""
    ones = gpu.gpuarray.to_gpu(np.ones(4096, np.float32))  # to_gpu, not zeros: zeros would compile a fill kernel
    value = float(gpu.gpuarray.dot(ones, ones).get())
    if value != 4096.0:
        raise VerificationError(f"warming up gpuarray.dot: 4096 ones dotted with themselves gave {value!r}")
