"""How the worker measures the coalescing experiment, declared in this package's ``__init__.py``
(its docstring says what is measured, how it is timed and how it is checked)."""

from __future__ import annotations

import functools
import time

import numpy as np

from gpu.device.timing import KernelTimer
from gpu.experiments.coalescing import LABELS, bytes_moved, four_field_sum, strided_permutation
from gpu.sweeps import _kernels as k
from gpu.sweeps import harness
from gpu.sweeps.harness import values_coarse_first
from gpu.sweeps.verify import in_slices, transposed_equal, verify_equal


def verify_strided(source: np.ndarray, got: np.ndarray, stride: int, what: str) -> None:
    """The strided gather's output, checked without an n-element index array: with m = n / stride,
    out[q·m + r] = in[r·stride + q], i.e. out viewed as (stride, m) is in viewed as (m, stride), transposed
    (``transposed_equal``: bands of 1 MiB, on several cores). A failing check names the word."""
    n = source.size
    m = n // stride
    out, src = got.view(np.uint32).reshape(stride, m), source.view(np.uint32).reshape(m, stride)
    if not transposed_equal(out, src, max(1, (1 << 18) // stride)):
        verify_equal(source[strided_permutation(n, stride)].view(np.uint32), got.view(np.uint32), what)


def verify_transpose(matrix: np.ndarray, got: np.ndarray, what: str) -> None:
    """A transpose's output against the matrix (``transposed_equal``, bands of 1 MiB); names the first wrong word."""
    side = matrix.shape[0]
    out, src = got.view(np.uint32).reshape(side, side), matrix.view(np.uint32)
    if not transposed_equal(out, src, max(1, (1 << 18) // side)):
        verify_equal(np.ascontiguousarray(src.T).ravel(), got.view(np.uint32), what)


def layout_expected(host: np.ndarray, n: int, variant: str) -> np.ndarray:
    """What a layout kernel must write, from the source on the host, in slices on several cores. Field i of the
    four is host[i : i + n]. Read as structs, struct t of quarter q (t = q·n/4 + u) holds the four floats
    host[q + 4u …], since the fields lie one after another: so no 4n-float copy of the fields is built."""
    quarter = n // 4  # n is a power of two, at least 2^20
    out = np.empty(n, np.float32)

    def fill(lo: int, hi: int) -> None:
        while lo < hi:
            if variant.startswith("soa"):
                end, columns = hi, [host[i + lo:i + hi] for i in range(4)]
            else:
                q = lo // quarter
                end = min(hi, (q + 1) * quarter)
                base = q + 4 * (lo - q * quarter)
                structs = host[base:base + 4 * (end - lo)].reshape(-1, 4)
                columns = [structs[:, c] for c in range(4)]
            out[lo:end] = four_field_sum(*columns) if variant.endswith("_sum") else 2 * columns[0]
            lo = end

    in_slices(n, fill)
    return out


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
    def soa(self):
        """Four distinct fields x|y|z|w, field i being the source shifted by i floats: the same bytes read as n
        structs (AoS) or as four arrays (SoA). Made on the device at the first layout point (the copy points reach
        the page first), by four device copies of the source: no 1 GiB built on the host and uploaded."""
        n = self.params.elements
        soa = self.ledger.device_buffer(4 * n * 4)
        for i in range(4):
            self.cuda.memcpy_dtod(int(soa) + i * n * 4, int(self.src) + i * 4, n * 4)
        return soa

    def order(self, grid_points):
        """Each stride and offset sweep coarse first (per variant and block size)."""
        return values_coarse_first(grid_points, series=lambda p: (p["variant"], p["block_size"]),
                                   value=lambda p: p["param_value"])

    def point(self, grid_point):
        n, side = self.params.elements, self.params.matrix_side
        variant, block, value = grid_point["variant"], grid_point["block_size"], grid_point["param_value"]
        param = {"strided": "stride", "offset": "offset"}.get(
            variant, "matrix_side" if variant.startswith("transpose") else "none")
        return harness.Point(
            {"variant": variant, "group": grid_point["group"], "direction": "device", "block_size": block,
             "elements": n, "param_value": value, "param": param},
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
            soa = self.soa
            expected = layout_expected(host, n, variant)

            def launch(s):
                fn[variant](soa, out, u64(n), block=blk, grid=grid, stream=s)
        elif variant in ("soa_sum", "soa_x"):
            soa = self.soa
            expected = layout_expected(host, n, variant)
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
        # A cold kernel launch (L2 flushed, the stream held): KernelTimer's clock, not a copy method of the harness's.
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
