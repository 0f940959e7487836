"""Dot products: the seed's one-atomic-per-element kernel, done right, and the library's gpuarray.dot.

Kernel-only variants (CUDA events, L2 flushed before each sample, the stream held while the launch is queued,
except for gpuarray.dot): ``atomic_per_element`` (every thread atomically adds to one float), ``shared_tree``
(shared-memory tree per block, one atomic per block), ``warp_shuffle`` (shuffle reduction per block, one atomic
per block), ``grid_stride`` (a GPU-filling grid accumulating float4 loads in registers first), and
``gpuarray_dot`` (PyCUDA's library reduction). End-to-end variants time host data → GPU → result (two H2D
copies, the grid-stride kernel, the result back) from pageable or pinned host buffers (held when pinned).
Bytes: the two input vectors (8 bytes per element).

Correctness, twice per variant: on vectors of -1/0/1 every partial sum is an exact small integer, so the
result must equal the integer dot product exactly (a dropped or repeated element fails the job); on the
uniform [-1, 1) data that is timed, the relative error against a float64 NumPy dot is reported.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from gpu import stats, text
from gpu.errors import JobCancelled, ValidationError, VerificationError
from gpu.experiments import _kernels as k
from gpu.experiments.harness import SweepRows

NAME = "reduction"
KERNEL_VARIANTS = ("atomic_per_element", "shared_tree", "warp_shuffle", "grid_stride", "gpuarray_dot")
END_TO_END = ("end_to_end_pageable", "end_to_end_pinned")
UNHELD = ("gpuarray_dot", "end_to_end_pageable")  # timed without the stream hold (see run)
LABELS = {"atomic_per_element": "atomicAdd per element (seed)", "shared_tree": "shared-memory tree",
          "warp_shuffle": "warp shuffle", "grid_stride": "grid-stride + shuffle",
          "gpuarray_dot": "pycuda gpuarray.dot", "end_to_end_pageable": "end to end, pageable host",
          "end_to_end_pinned": "end to end, pinned host"}
KEY_COLUMNS = ["variant", "block_size", "elements"]
AXES = {"elements": "powers of two, 2^10 … 2^28", "block_size": "multiples of 32 up to 1024",
        "variant": KERNEL_VARIANTS + END_TO_END}


@dataclass(frozen=True)
class Params:
    sizes: list[int] = field(default_factory=lambda: [1 << 24])
    block_sizes: list[int] = field(default_factory=lambda: [256])
    variants: list[str] = field(default_factory=lambda: list(KERNEL_VARIANTS + END_TO_END))
    profile: str = "interactive"

    def as_dict(self) -> dict:
        return asdict(self)

    def points(self):
        for n in self.sizes:
            for block in self.block_sizes:
                for variant in self.variants:
                    yield variant, block, n


def parse_params(raw: dict) -> Params:
    unknown = set(raw) - set(Params.__dataclass_fields__)
    if unknown:
        raise ValidationError([f"unknown {text.plural('parameter', len(unknown))}: {', '.join(sorted(unknown))}"])
    try:
        return Params(sizes=sorted({int(n) for n in raw.get("sizes", [1 << 24])}),
                      block_sizes=sorted({int(b) for b in raw.get("block_sizes", [256])}),
                      variants=list(raw.get("variants", KERNEL_VARIANTS + END_TO_END)),
                      profile=str(raw.get("profile", "interactive")))
    except (TypeError, ValueError):
        raise ValidationError(["sizes and block sizes must be whole numbers"]) from None


def invalid_reasons(params: Params, limits) -> list[str]:
    reasons = []
    if not params.sizes:
        reasons.append("choose at least one vector size")
    if not params.variants:
        reasons.append("choose at least one variant")
    max_threads = getattr(limits, "max_threads_per_block", 1024) if limits else 1024
    reasons += k.block_size_reasons(params.block_sizes, max_threads)
    reasons += k.power_of_two_reasons(params.sizes, "vector size", 1 << 10, 1 << 28)
    known = KERNEL_VARIANTS + END_TO_END
    reasons += [f"unknown variant '{v}' (known: {', '.join(known)})" for v in params.variants if v not in known]
    if "shared_tree" in params.variants:
        reasons += [f"block size {b}: the shared-memory tree halves the block each step, so it needs a power "
                    "of two" for b in params.block_sizes if b > 0 and b & (b - 1)]
    try:
        stats.get_profile(params.profile)
    except ValueError as exc:
        reasons.append(str(exc))
    if params.sizes and not reasons:
        reasons += k.memory_reasons(2 * max(params.sizes) * 4 + 256 * 1024**2, limits, "these vectors")
    return reasons


def bytes_moved(elements: int) -> int:
    return 2 * elements * 4


def run(params: Params, gpu, progress, should_cancel) -> list[dict]:
    from pycuda import gpuarray

    from gpu.timing import KernelTimer

    reasons = invalid_reasons(params, gpu.limits())
    if reasons:
        raise ValidationError(reasons)
    cuda = gpu.cuda
    profile = stats.get_profile(params.profile)
    points = list(params.points())
    rows = SweepRows(progress)  # each row reaches the page as soon as it is measured
    fn = {name: gpu.kernel("reduction", f"dot_{name}") for name in
          ("atomic_per_element", "shared_tree", "warp_shuffle", "grid_stride")}
    rng = np.random.default_rng()
    with gpu.job_scope() as ledger:
        timer = KernelTimer(gpu, ledger)
        largest = max(params.sizes)
        a, b = ledger.device_buffer(largest * 4), ledger.device_buffer(largest * 4)
        out_f, out_d = ledger.device_buffer(4), ledger.device_buffer(8)
        done = 0
        for n in params.sizes:
            ternary = [rng.integers(-1, 2, size=n).astype(np.float32) for _ in range(2)]
            exact_int = float(np.dot(ternary[0].astype(np.int64), ternary[1].astype(np.int64)))
            uniform = [rng.uniform(-1, 1, size=n).astype(np.float32) for _ in range(2)]
            exact = float(np.dot(uniform[0].astype(np.float64), uniform[1].astype(np.float64)))
            a_view = gpuarray.GPUArray((n,), np.float32, gpudata=a)
            b_view = gpuarray.GPUArray((n,), np.float32, gpudata=b)
            hosts = {}
            for block in params.block_sizes:
                grid = k.grid_for(n, block)
                wave = (min(gpu.sm_count * (2048 // block), -(-n // 4 // block)), 1)
                held = {}

                def kernel(variant, s, block=block, grid=grid, wave=wave, n=n):
                    """Enqueue one complete dot product (result reset included); returns how to read it."""
                    if variant == "atomic_per_element":
                        cuda.memset_d32_async(out_f, 0, 1, s)
                        fn[variant](a, b, out_f, np.uint64(n), block=(block, 1, 1), grid=grid, stream=s)
                        return "float"
                    if variant == "gpuarray_dot":
                        held["result"] = gpuarray.dot(a_view, b_view, stream=s)
                        return "gpuarray"
                    cuda.memset_d32_async(out_d, 0, 2, s)
                    if variant == "shared_tree":
                        fn[variant](a, b, out_d, np.uint64(n), block=(block, 1, 1), grid=grid, shared=block * 8,
                                    stream=s)
                    elif variant == "warp_shuffle":
                        fn[variant](a, b, out_d, np.uint64(n), block=(block, 1, 1), grid=grid, stream=s)
                    else:
                        fn["grid_stride"](a, b, out_d, np.uint64(n // 4), block=(block, 1, 1), grid=wave, stream=s)
                    return "double"

                def result(kind) -> float:
                    cuda.Context.synchronize()
                    if kind == "gpuarray":
                        return float(held.pop("result").get())
                    value = np.zeros(1, dtype=np.float32 if kind == "float" else np.float64)
                    cuda.memcpy_dtoh(value, out_f if kind == "float" else out_d)
                    return float(value[0])

                for variant in params.variants:
                    if should_cancel():
                        raise JobCancelled()
                    progress(done, len(points), f"{LABELS[variant]} · {n:,} elements · block {block}")
                    label = f"{LABELS[variant]} ({n:,} elements, block {block})"
                    # gpuarray.dot frees its previous result (a free waits for the GPU) and a pageable copy
                    # stages through the host: neither can be queued behind a held stream.
                    hold = variant not in UNHELD
                    base = "grid_stride" if variant in END_TO_END else variant
                    cuda.memcpy_htod(a, ternary[0])
                    cuda.memcpy_htod(b, ternary[1])
                    got = result(kernel(base, None))
                    if got != exact_int:
                        raise VerificationError(f"{label}: on -1/0/1 data the dot product is exactly "
                                                f"{exact_int:.0f}, the kernel returned {got!r}")
                    cuda.memcpy_htod(a, uniform[0])
                    cuda.memcpy_htod(b, uniform[1])
                    if variant in END_TO_END:
                        mode = "pinned" if variant == "end_to_end_pinned" else "pageable"
                        if mode not in hosts:
                            pair = [ledger.host_buffer(n * 4, mode).view(np.float32) for _ in range(2)]
                            for dst, src in zip(pair, uniform, strict=True):
                                np.copyto(dst, src)
                            hosts[mode] = pair
                        ha, hb = hosts[mode]
                        last = np.zeros(1, dtype=np.float64)
                        last_host = ledger.host_buffer(8, "pinned").view(np.float64) if mode == "pinned" else last

                        def launch(s, ha=ha, hb=hb, last_host=last_host):
                            cuda.memcpy_htod_async(a, ha, s)
                            cuda.memcpy_htod_async(b, hb, s)
                            kernel("grid_stride", s)
                            cuda.memcpy_dtoh_async(last_host, out_d, s)

                        summary = timer.measure(launch, profile, hold)
                        value = float(last_host[0])
                        if abs(value - exact) > 1e-4 * max(abs(exact), 1.0):
                            raise VerificationError(f"{label}: result {value!r} differs from the float64 dot "
                                                    f"{exact!r} by more than 1e-4 relative: data was corrupted")
                    else:
                        kinds = []
                        summary = timer.measure(lambda s, v=variant: kinds.append(kernel(v, s)), profile, hold)
                        value = result(kinds[-1])
                    rel_error = abs(value - exact) / abs(exact) if exact else abs(value)
                    rows.append(k.row(variant, "end_to_end" if variant in END_TO_END else "kernel", bytes_moved(n),
                                      summary, profile, gpu.telemetry, timer.timer_name(hold), block_size=block,
                                      elements=n, param="none",
                                      param_value=0, rel_error=rel_error))
                    held.clear()
                    done += 1
            for pair in hosts.values():
                for array in pair:
                    if array.base is not None and hasattr(array.base, "base"):
                        ledger.free_host(array.base)
    progress(len(points), len(points), "done")
    return rows
