"""Coalescing: the same bytes moved with different address patterns, against the device copy in the run.

Groups (all kernel-only, CUDA events, L2 flushed before every sample, the stream held while the launch is
queued, working sets of 256 MiB and up by default, far above Hopper's 50–60 MB L2):
* copy – ``memcpy_dtod`` (the driver's device copy: the reference peak), ``copy_f32`` (a float per
  thread) and ``copy_f4`` (16-byte vectors, grid-stride: our best copy);
* strided – a permutation gather whose warp neighbours sit ``stride`` elements apart;
* offset – reads shifted by ``offset`` elements from 128-byte alignment;
  both judged against ``CONTIGUOUS_REFERENCE`` (``copy_f32``), the contiguous read of the same bytes: stride 1 and
  offset 0 do the same work and are measured for the curves, but a verdict names one baseline;
* layout – array of structures vs structure of arrays, reading all four fields or only one;
* transpose – naive, shared-memory tile, tile padded against bank conflicts (32×8 threads per 32×32 tile).

Bytes counted: the useful bytes each kernel must read plus write, once (the device copy counts its read
and its write). Every output is checked exactly against NumPy.
"""

from __future__ import annotations

import numpy as np

from gpu.experiments import _kernels as k
from gpu.experiments import axes
from gpu.experiments.grid import Coordinate, Grid
from gpu.experiments.page import PageEntry

NAME = "coalescing"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "coalescing", 2, "pages/coalescing.py"
PAGE_ENTRY = PageEntry(PAGE, "Coalescing", "coalescing", ":material/view_week:",
                        "Coalescing: access patterns vs bandwidth", place=2)
HELP = "strided, misaligned, AoS/SoA and transpose kernels vs the device copy"
GROUPS = ("copy", "strided", "offset", "layout", "transpose")
VARIANTS = {
    "copy": ("memcpy_dtod", "copy_f32", "copy_f4"),
    "strided": ("strided",), "offset": ("offset",),
    "layout": ("aos_sum", "soa_sum", "aos_x", "soa_x"),
    "transpose": ("transpose_naive", "transpose_tiled", "transpose_padded"),
}
LABELS = {
    "memcpy_dtod": "memcpy_dtod (driver)", "copy_f32": "copy, 1 float/thread", "copy_f4": "copy, float4 grid-stride",
    "strided": "strided read", "offset": "misaligned read", "aos_sum": "AoS, all 4 fields",
    "soa_sum": "SoA, all 4 fields", "aos_x": "AoS, 1 field", "soa_x": "SoA, 1 field",
    "transpose_naive": "transpose: naive", "transpose_tiled": "transpose: shared tile",
    "transpose_padded": "transpose: padded tile",
}
KEY_COLUMNS = ["variant", "block_size", "elements", "param_value"]
# The contiguous read that the strided and misaligned reads are judged against (pages, stage, talk, report): the
# same bytes as theirs (one float read and one written per element), one 4-byte load and one store per thread.
CONTIGUOUS_REFERENCE = "copy_f32"
TITLE = "Coalescing: access patterns vs bandwidth"
AXES = (
    axes.Axis("elements", "floats per buffer", 1 << 26, kind="int", low=1 << 20, high=1 << 28, power_of_two=True,
              one="elements", help="floats per buffer, a power of two (2^20 … 2^28)"),
    k.block_sizes_axis(),
    axes.Axis("groups", "groups", list(GROUPS), values=GROUPS),
    axes.Axis("strides", "strides", [1, 2, 4, 8, 16, 32, 64], kind="ints", low=1, high=64, power_of_two=True,
              unit="elements"),
    axes.Axis("offsets", "offsets", [0, 1, 2, 4, 8, 16, 31, 32], kind="ints", low=0, high=32, unit="elements"),
)


def param_values(params, point) -> list:
    """A variant's ``param_value``s: the strides of the strided read, the offsets of the misaligned one, the matrix
    side of a transpose, 0 for the others."""
    group = point["group"]
    if group == "strided":
        return params.strides
    if group == "offset":
        return params.offsets
    return [params.matrix_side] if group == "transpose" else [0]


# Per block size: the copy group always (the reference peak), then the chosen groups, each variant of a group at each
# of its values.
GRID = Grid([
    Coordinate("block_size", axis="block_sizes"),
    Coordinate("group", values=lambda params, point: ["copy"] + [g for g in params.groups if g != "copy"], key=False),
    Coordinate("variant", values=lambda params, point: VARIANTS[point["group"]]),
    Coordinate("elements", axis="elements"),
    Coordinate("param_value", values=param_values),
])


class Params(axes.parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)):
    """Coalescing's parameters; their points come from ``GRID``."""

    @property
    def matrix_side(self) -> int:
        return 1 << (self.elements.bit_length() - 1) // 2


parse_params = axes.parser(Params)


def device_bytes_needed(params: Params) -> int:
    n = params.elements
    return (n + 32) * 4 + n * 4 + 4 * n * 4 + 256 * 1024**2  # source, output, layout fields, L2 flush


def invalid_reasons(params: Params, limits) -> list[str]:
    reasons = axes.reasons(params, limits)
    return reasons or memory_reasons(params, limits)


def memory_reasons(params: Params, limits) -> list[str]:
    """What can change between the check and the run: whether the buffers fit in the memory free now."""
    return k.memory_reasons(device_bytes_needed(params), limits, "this sweep")


def bytes_moved(variant: str, elements: int, matrix_side: int) -> int:
    if variant in ("aos_sum", "soa_sum"):
        return elements * (16 + 4)
    if variant.startswith("transpose"):
        return 2 * matrix_side * matrix_side * 4
    return 2 * elements * 4  # every other variant reads and writes one float per element


def strided_permutation(n: int, stride: int) -> np.ndarray:
    i = np.arange(n, dtype=np.uint64)
    scaled = i * np.uint64(stride)
    return ((scaled & np.uint64(n - 1)) + scaled // np.uint64(n)).astype(np.int64)


def four_field_sum(x, y, z, w) -> np.ndarray:
    """x + y + z + w in float32, left to right as the kernels add (exact on PinPoint's small-integer data)."""
    total = np.add(x, y, dtype=np.float32)
    total += z
    total += w
    return total


def flops(row) -> float:
    """FLOPs of one execution of the point (``gpu.core.roofline``), counted from coalescing.cu (beside this file): the
    AoS and SoA sums add the four fields of each element (3 FLOP per element), the one-field reads double the field
    (``2.0f * x``: 1 FLOP per element). The copies (``memcpy_dtod``, ``copy_f32``, ``copy_f4``), the strided and
    misaligned reads and the transposes move data without arithmetic on it (their index arithmetic is integer
    work, not FLOPs): 0."""
    per_element = {"aos_sum": 3, "soa_sum": 3, "aos_x": 1, "soa_x": 1}.get(row["variant"], 0)
    return float(per_element * row["elements"]) if per_element else 0.0
