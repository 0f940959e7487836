"""Dot products: the seed's one-atomic-per-element kernel, done right, and the library's gpuarray.dot.

Kernel-only variants (CUDA events, L2 flushed before each sample, the stream held while the launch is queued,
except for gpuarray.dot): ``atomic_per_element`` (every thread atomically adds to one float), ``shared_tree``
(shared-memory tree per block, one atomic per block), ``warp_shuffle`` (shuffle reduction per block, one atomic
per block), ``grid_stride`` (a GPU-filling grid accumulating float4 loads in registers first), and
``gpuarray_dot`` (PyCUDA's library reduction). End-to-end variants time host data → GPU → result (two H2D
copies, the grid-stride kernel, the result back) from pageable or pinned host buffers (held when pinned).
Bytes: the two input vectors (8 bytes per element).

Inputs: each size draws a 64-bit seed, and a generator kernel (``reduction_inputs.cu``) writes both pairs of
vectors on the GPU from a counter-based hash of (seed, vector, index) (splitmix64's output for that counter;
``inputs.py`` is the same formula in NumPy): -1/0/1 values, and uniform values of [-1, 1) on a grid of 2^-23,
exact in float32. The host computes the formula for the first and last few thousand elements of each vector and
runs spread between them, and compares them bit for bit with the device's, so a wrong generator fails the job.
Their exact dot products come from reference kernels of their own, sharing no code with the measured ones: the
-1/0/1 pair's integer dot in 64-bit integers (exact), the uniform pair's in float64 (every product exact, the
sums' error bound stated in the kernel: far below a float32 kernel's error), each block's sum added on the host in
a fixed order. The end-to-end variants' host buffers are copied from the device's uniform vectors.

Correctness, twice per variant: on vectors of -1/0/1 every partial sum is an exact small integer, so the
result must equal the integer dot product exactly (a dropped or repeated element fails the job); on the
uniform [-1, 1) data that is timed, the relative error against the float64 reference dot is reported (the
end-to-end variants fail beyond 1e-4). A failure names the seed, which makes the same vectors again.
"""

from __future__ import annotations

from gpu.experiments import _kernels as k
from gpu.experiments import axes
from gpu.experiments.grid import Coordinate, Grid
from gpu.experiments.page import PageEntry

NAME = "reduction"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "reduction", 3, "pages/reductions.py"
PAGE_ENTRY = PageEntry(PAGE, "Reductions: dot product", "reductions", ":material/functions:",
                        "Reductions: a dot product, five ways", place=3)
HELP = "dot-product variants vs gpuarray.dot, kernel-only and end to end"
KERNEL_VARIANTS = ("atomic_per_element", "shared_tree", "warp_shuffle", "grid_stride", "gpuarray_dot")
END_TO_END = ("end_to_end_pageable", "end_to_end_pinned")
LIBRARY = "gpuarray_dot"  # the library reduction our kernels are compared with
UNHELD = ("gpuarray_dot", "end_to_end_pageable")  # timed without the stream hold (see run)
LABELS = {"atomic_per_element": "atomicAdd per element (seed)", "shared_tree": "shared-memory tree",
          "warp_shuffle": "warp shuffle", "grid_stride": "grid-stride + shuffle",
          "gpuarray_dot": "pycuda gpuarray.dot", "end_to_end_pageable": "end to end, pageable host",
          "end_to_end_pinned": "end to end, pinned host"}
KEY_COLUMNS = ["variant", "block_size", "elements"]
# What rows recorded before schema version 11 named in ``param`` (a detail of how samples were made, or no
# axis), and its column now.
LEGACY_PARAMS = {"none": None}
TITLE = "Reductions: a dot product, five ways"
AXES = (
    axes.Axis("sizes", "vector sizes", [1 << 24], kind="ints", one="vector size", low=1 << 10, high=1 << 28,
              power_of_two=True, unit="elements", help="comma-separated vector sizes, powers of two (2^10 … 2^28)"),
    k.block_sizes_axis(),
    axes.Axis("variants", "variants", list(KERNEL_VARIANTS + END_TO_END), values=KERNEL_VARIANTS + END_TO_END),
)


# Each vector size, each block size, every variant.
GRID = Grid([Coordinate("elements", axis="sizes"), Coordinate("block_size", axis="block_sizes"),
             Coordinate("variant", axis="variants")])


class Params(axes.parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)):
    pass


parse_params = axes.parser(Params)


def invalid_reasons(params: Params, limits) -> list[str]:
    reasons = axes.reasons(params, limits)
    if "shared_tree" in params.variants:
        reasons += [f"block size {b}: the shared-memory tree halves the block each step, so it needs a power "
                    "of two" for b in params.block_sizes if b > 0 and b & (b - 1)]
    return reasons or memory_reasons(params, limits)


def memory_reasons(params: Params, limits) -> list[str]:
    """What can change between the check and the run: whether the buffers fit in the memory free now."""
    if not params.sizes:
        return []
    return k.memory_reasons(2 * max(params.sizes) * 4 + 256 * 1024**2, limits, "these vectors")


def bytes_moved(elements: int) -> int:
    return 2 * elements * 4


def flops(row) -> float:
    """FLOPs of one execution of the point (``gpu.core.roofline``), counted from reduction.cu (beside this file): every
    dot-product kernel multiplies each pair once and adds the product into a sum, 2 FLOP per element (the
    per-element atomic adds it into one float; the tree and the shuffles add in double per block; the grid-stride
    kernel sums float partials per thread first: each still one multiply and about one add per element; PyCUDA's
    ``gpuarray.dot`` is the same multiply-and-sum). The end-to-end variants time host copies with the kernel, so
    their rate is no kernel's: NaN (not a kernel alone, not placed on a roofline)."""
    if row["variant"] in END_TO_END:
        return float("nan")
    return 2.0 * float(row["elements"])
