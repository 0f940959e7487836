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

import functools
import time

import numpy as np

from gpu.device.timing import KernelTimer
from gpu.experiments import _kernels as k
from gpu.experiments import axes, harness
from gpu.experiments.harness import values_coarse_first
from gpu.experiments.verify import verify_equal

NAME = "coalescing"
# Registration (gpu/experiments/registry.py): the runner's subcommand, the page, the place in lists.
COMMAND, ORDER, PAGE = "coalescing", 2, "pages/coalescing.py"
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


class Params(axes.parameters(AXES)):
    @property
    def matrix_side(self) -> int:
        return 1 << (self.elements.bit_length() - 1) // 2

    def points(self):
        """(variant, block_size, elements, param_value) for every point; the copy group always runs."""
        for block in self.block_sizes:
            for group in ["copy"] + [g for g in self.groups if g != "copy"]:
                for variant in VARIANTS[group]:
                    if group == "strided":
                        values = self.strides
                    elif group == "offset":
                        values = self.offsets
                    elif group == "transpose":
                        values = [self.matrix_side]
                    else:
                        values = [0]
                    for value in values:
                        yield variant, block, self.elements, value


parse_params = axes.parser(Params)


def device_bytes_needed(params: Params) -> int:
    n = params.elements
    return (n + 32) * 4 + n * 4 + 4 * n * 4 + 256 * 1024**2  # source, output, layout fields, L2 flush


def invalid_reasons(params: Params, limits) -> list[str]:
    reasons = axes.reasons(params, limits)
    if not reasons:
        reasons += k.memory_reasons(device_bytes_needed(params), limits, "this sweep")
    return reasons


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


def verify_strided(source: np.ndarray, got: np.ndarray, stride: int, what: str) -> None:
    """The strided gather's output, checked without an n-element index array: with m = n / stride,
    out[q·m + r] = in[r·stride + q], i.e. out viewed as (stride, m) is in viewed as (m, stride), transposed.
    Compared a block of columns at a time, so both sides stay in cache; a failing check names the word."""
    n = source.size
    m = n // stride
    out, src = got.view(np.uint32).reshape(stride, m), source.view(np.uint32).reshape(m, stride)
    cols = max(1, (1 << 16) // stride)
    for r0 in range(0, m, cols):
        if not np.array_equal(out[:, r0:r0 + cols], src[r0:r0 + cols].T):
            verify_equal(source[strided_permutation(n, stride)].view(np.uint32), got.view(np.uint32), what)


def verify_transpose(matrix: np.ndarray, got: np.ndarray, what: str, tile: int = 256) -> None:
    """A transpose's output against the matrix, tile by tile (each tile fits in cache); names the first wrong word."""
    side = matrix.shape[0]
    out, src = got.view(np.uint32).reshape(side, side), matrix.view(np.uint32)
    for r0 in range(0, side, tile):
        for c0 in range(0, side, tile):
            if not np.array_equal(out[r0:r0 + tile, c0:c0 + tile], src[c0:c0 + tile, r0:r0 + tile].T):
                verify_equal(np.ascontiguousarray(src.T).ravel(), got.view(np.uint32), what)


class CoalescingSweep(harness.Sweep):
    """The source, output and read-back buffers for the whole job; the layout fields at the first layout point.
    Each stride and offset sweep is measured coarse first: its curve has its shape after a few points."""

    RESTART_TELEMETRY = False

    def setup(self) -> None:
        gpu, cuda, ledger, n = self.gpu, self.cuda, self.ledger, self.params.elements
        self.timer = KernelTimer(gpu, ledger)
        self.host = k.small_int_floats(n + 32, seed=time.time_ns() & 0xFFFF)
        self.src = ledger.device_buffer((n + 32) * 4)
        cuda.memcpy_htod(self.src, self.host)
        self.out = ledger.device_buffer(n * 4)
        self.readback = ledger.host_buffer(n * 4, "pinned").view(np.float32)  # pinned: read back at full speed
        self.fn = {name: gpu.kernel("coalescing", name) for name in
                   ("copy_f32", "copy_f4", "strided_read", "offset_read", "aos_sum", "soa_sum", "aos_x", "soa_x",
                    "transpose_naive", "transpose_tiled", "transpose_padded")}
        self.first_transpose = None

    @functools.cached_property
    def layout_data(self):
        """Four distinct fields; the same bytes read as n structs (AoS) or as arrays x|y|z|w (SoA). Built at
        the first layout point, so the copy points reach the page without waiting for 1 GiB of set-up."""
        n = self.params.elements
        fields = np.concatenate([self.host[i:i + n] for i in range(4)])
        soa = self.ledger.device_buffer(4 * n * 4)
        self.cuda.memcpy_htod(soa, fields)
        return fields, soa

    def points(self):
        n, side = self.params.elements, self.params.matrix_side
        story = values_coarse_first(list(self.params.points()), series=lambda p: (p[0], p[1]), value=lambda p: p[3])
        for variant, block, _, value in story:
            param = {"strided": "stride", "offset": "offset"}.get(
                variant, "matrix_side" if variant.startswith("transpose") else "none")
            yield harness.Point(
                {"variant": variant, "group": next(g for g, vs in VARIANTS.items() if variant in vs),
                 "direction": "device", "block_size": block, "elements": n, "param_value": value, "param": param},
                f"{LABELS[variant]} · block {block}" + (f" · {value}" if value else ""),
                bytes_moved(variant, n, side), self.timer.timer_name(), {"variant": variant, "block": block,
                                                                         "value": value})

    def measure(self, point):
        state = point.state
        variant, block, value = state["variant"], state["block"], state["value"]
        cuda, fn, src, out, host = self.cuda, self.fn, self.src, self.out, self.host
        n, side, u64 = self.params.elements, self.params.matrix_side, np.uint64
        grid = k.grid_for(n, block)
        blk = (block, 1, 1)
        expected = host[:n]
        if variant == "memcpy_dtod":
            def launch(s):
                cuda.memcpy_dtod_async(out, src, n * 4, s)
        elif variant == "copy_f32":
            def launch(s):
                fn["copy_f32"](src, out, u64(n), block=blk, grid=grid, stream=s)
        elif variant == "copy_f4":
            waves = max(1, self.gpu.sm_count * (2048 // block) * 2)

            def launch(s):
                fn["copy_f4"](src, out, u64(n // 4), block=blk, grid=(min(waves, grid[0]), 1), stream=s)
        elif variant == "strided":
            log2, log2_n = value.bit_length() - 1, n.bit_length() - 1
            expected = None  # checked by verify_strided

            def launch(s):
                fn["strided_read"](src, out, u64(n), np.uint32(log2), np.uint32(log2_n), block=blk, grid=grid,
                                   stream=s)
        elif variant == "offset":
            expected = host[value:value + n]

            def launch(s):
                fn["offset_read"](src, out, u64(n), np.uint32(value), block=blk, grid=grid, stream=s)
        elif variant in ("aos_sum", "aos_x"):
            fields, soa = self.layout_data
            structs = fields.reshape(n, 4)
            expected = four_field_sum(*(structs[:, i] for i in range(4))) if variant == "aos_sum" \
                else 2 * structs[:, 0]

            def launch(s):
                fn[variant](soa, out, u64(n), block=blk, grid=grid, stream=s)
        elif variant in ("soa_sum", "soa_x"):
            fields, soa = self.layout_data
            arrays = fields.reshape(4, n)
            expected = four_field_sum(*arrays) if variant == "soa_sum" else 2 * arrays[0]
            x, y, z, w = (int(soa) + i * n * 4 for i in range(4))

            def launch(s):
                if variant == "soa_sum":
                    fn[variant](np.uintp(x), np.uintp(y), np.uintp(z), np.uintp(w), out, u64(n),
                                block=blk, grid=grid, stream=s)
                else:
                    fn[variant](np.uintp(x), out, u64(n), block=blk, grid=grid, stream=s)
        else:  # transposes: fixed 32x8 threads per 32x32 tile
            expected = None  # checked by verify_transpose
            tiles = (side // 32, side // 32)

            def launch(s):
                fn[variant](src, out, np.int32(side), block=(32, 8, 1), grid=tiles, stream=s)
        state["expected"] = expected
        cuda.memset_d32(out, 0xFFFFFFFF, n)  # poison: NaN everywhere the kernel fails to write
        timer = self.timer
        return lambda: timer.once(launch)

    def verify(self, point) -> None:
        state = point.state
        variant, value, expected = state["variant"], state["value"], state["expected"]
        cuda, out, readback, host = self.cuda, self.out, self.readback, self.host
        n, side = self.params.elements, self.params.matrix_side
        what = f"{LABELS[variant]} (block {state['block']})"
        if variant == "strided":
            cuda.memcpy_dtoh(readback, out)
            verify_strided(host[:n], readback, value, what)
        elif variant.startswith("transpose"):
            got = readback[:side * side]
            cuda.memcpy_dtoh(got, out)
            if self.first_transpose is None:
                verify_transpose(host[:side * side].reshape(side, side), got, what)
                self.first_transpose = got.copy()
            else:  # every transpose has the same answer: the one already checked is the reference
                verify_equal(self.first_transpose.view(np.uint32), got.view(np.uint32), what)
        else:
            got = readback[:expected.size]
            cuda.memcpy_dtoh(got, out)
            verify_equal(expected.view(np.uint32), got.view(np.uint32), what)


run = harness.runner(CoalescingSweep)


def flops(row) -> float:
    """FLOPs of one execution of the point (``gpu.core.roofline``), counted from gpu/kernels/coalescing.cu: the
    AoS and SoA sums add the four fields of each element (3 FLOP per element), the one-field reads double the field
    (``2.0f * x``: 1 FLOP per element). The copies (``memcpy_dtod``, ``copy_f32``, ``copy_f4``), the strided and
    misaligned reads and the transposes move data without arithmetic on it (their index arithmetic is integer
    work, not FLOPs): 0."""
    per_element = {"aos_sum": 3, "soa_sum": 3, "aos_x": 1, "soa_x": 1}.get(row["variant"], 0)
    return float(per_element * row["elements"]) if per_element else 0.0
