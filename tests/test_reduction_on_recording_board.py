"""The reduction sweep on the recording board (tests/recording_board.py), through the harness, with its kernels'
answers modelled from the board's memory: the generator writes the formula's vectors (gpu/experiments/reduction/
inputs.py), the references sum the blocks' chunks, the dot products dot what the buffers hold. What this checks is the
sweep's own work around them: no host vectors uploaded, the device's elements read back where the formula is checked,
the exact values taken from the references, the end-to-end host buffers copied from the device, the seed named when a
check fails, and the same seed making the same calls and rows. The kernels themselves are checked on the GPU
(tests/gpu/test_reduction_inputs_gpu.py)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from gpu.core.errors import VerificationError
from gpu.experiments import reduction, sweep_of
from gpu.experiments.reduction import inputs
from gpu.experiments.reduction import sweep as reduction_sweep
from tests import recording_board
from tests.recording_board import LAUNCH_MS, run_on_board

SEED = 0x5EED_0F_D07


def _floats(board, pointer, count) -> np.ndarray:
    return board.read(int(pointer), 4 * int(count)).view(np.float32).astype(np.float64)


class ReductionKernels(recording_board.Function):
    """The board's kernel, with the reduction's answers computed from the board's memory (``shared`` accepted)."""

    def __call__(self, *args, block=None, grid=None, stream=None, shared=0):
        self.block = block
        self._launch(grid, block, stream, args)

    def _reduction_fill_pair(self, a, b, n, seed, pair):
        for vector, buffer in zip((2 * int(pair), 2 * int(pair) + 1), (a, b), strict=True):
            self.board.write(int(buffer), generated(int(seed), vector, int(n)).view(np.uint8))
        return LAUNCH_MS

    def _block_sums(self, a, b, n, per_thread):
        chunk = self.block[0] * int(per_thread)
        products = _floats(self.board, a, n) * _floats(self.board, b, n)
        return [products[lo:lo + chunk] for lo in range(0, int(n), chunk)]

    def _reduction_reference_ternary(self, a, b, block_sums, n, per_thread):
        sums = np.array([int(p.sum()) for p in self._block_sums(a, b, n, per_thread)], np.int64)
        self.board.write(int(block_sums), sums.view(np.uint8))
        return LAUNCH_MS

    def _reduction_reference_uniform(self, a, b, block_sums, n, per_thread):
        sums = np.array([p.sum() for p in self._block_sums(a, b, n, per_thread)], np.float64)
        self.board.write(int(block_sums), sums.view(np.uint8))
        return LAUNCH_MS

    def _dot(self, a, b, result, n, dtype):
        value = np.dot(_floats(self.board, a, n), _floats(self.board, b, n))
        self.board.write(int(result), np.array([value], dtype).view(np.uint8))
        return LAUNCH_MS

    def _dot_atomic_per_element(self, a, b, result, n):
        return self._dot(a, b, result, n, np.float32)

    def _dot_shared_tree(self, a, b, result, n):
        return self._dot(a, b, result, n, np.float64)

    _dot_warp_shuffle = _dot_shared_tree

    def _dot_grid_stride(self, a, b, result, n4):
        return self._dot(a, b, result, 4 * int(n4), np.float64)


def generated(seed: int, vector: int, n: int) -> np.ndarray:
    """What the modelled generator writes: the formula (a test may replace it with a faulty generator)."""
    return inputs.values(seed, vector, np.arange(n))


class StandInGpuArrays:
    """``pycuda.gpuarray`` on the board: views of device buffers and their dot product."""

    def __init__(self, board):
        self.board = board

    def GPUArray(self, shape, dtype, gpudata=None):  # noqa: N802 (PyCUDA's name)
        return (int(gpudata), shape[0])

    def dot(self, x, y, stream=None):
        value = np.float32(np.dot(_floats(self.board, *x), _floats(self.board, *y)))
        self.board.note("gpuarray_dot", self.board.name(x[0]), self.board.name(y[0]), x[1], stream)
        self.board.advance(LAUNCH_MS)
        return type("Answer", (), {"get": lambda self: value})()


@pytest.fixture
def board_with_reductions(monkeypatch):
    monkeypatch.setattr(recording_board.Runtime, "kernel",
                        lambda self, stem, name: ReductionKernels(self.board, self, stem, name))
    monkeypatch.setattr(recording_board.Runtime, "gpuarray", property(lambda self: StandInGpuArrays(self.board)),
                        raising=False)
    monkeypatch.setattr(reduction_sweep.ReductionSweep, "draw_seed", lambda self: SEED)
    # The end-to-end samples' copies move their bytes too (the board only logs them), so their result is the dot of
    # what the host buffers hold.
    htod, dtoh = recording_board.Driver.memcpy_htod_async, recording_board.Driver.memcpy_dtoh_async

    def htod_moving(self, device, host, stream=None):
        self.board.write(int(device), np.ascontiguousarray(host).view(np.uint8).ravel())
        htod(self, device, host, stream)

    def dtoh_moving(self, host, device, stream=None):
        host.view(np.uint8).ravel()[:] = self.board.read(int(device), host.nbytes)
        dtoh(self, host, device, stream)

    monkeypatch.setattr(recording_board.Driver, "memcpy_htod_async", htod_moving)
    monkeypatch.setattr(recording_board.Driver, "memcpy_dtoh_async", dtoh_moving)


def run(raw: dict):
    return run_on_board(sweep_of(reduction.NAME), reduction.parse_params(raw))


KERNELS_ONLY = list(reduction.KERNEL_VARIANTS)


def test_every_variant_verifies_on_vectors_made_on_the_device(board_with_reductions):
    rows, log = run({"sizes": [1 << 12, 1 << 14], "block_sizes": [256], "variants": KERNELS_ONLY})
    assert len(rows) == 2 * len(KERNELS_ONLY) and all(row["verified"] for row in rows)
    assert all(row["rel_error"] < 1e-6 for row in rows)
    assert not [entry for entry in log if entry[0] == "htod"]  # no host vector uploaded
    launches = [entry[1] for entry in log if entry[0] == "launch"]
    # Each size: both pairs made and summed once; each variant: both pairs made again, then its check and samples.
    assert launches.count("reduction_reference_ternary") == launches.count("reduction_reference_uniform") == 2
    assert launches.count("reduction_fill_pair") == 2 * 2 + 2 * 2 * len(KERNELS_ONLY)
    # The cross-check read back the whole vectors at 2^12, and 6,144 elements of each at 2^14 (every other copy is of
    # one block sum or one result: 8 bytes at most).
    reads = [entry[2] for entry in log if entry[0] == "dtoh" and entry[2] > 8]
    assert sum(reads) == 4 * 4 * (1 << 12) + 4 * 4 * (2 * inputs.EDGE + inputs.SPREAD * inputs.RUN)


def test_the_end_to_end_host_buffers_are_copied_from_the_device(board_with_reductions):
    variants = ["end_to_end_pinned", "grid_stride", "end_to_end_pageable"]
    rows, log = run({"sizes": [1 << 14], "block_sizes": [256], "variants": variants})
    assert [row["variant"] for row in rows] == variants and all(row["verified"] for row in rows)
    copies = [entry for entry in log if entry[0] == "dtoh" and entry[2] == 4 << 14]
    assert len(copies) == 4 and not [entry for entry in log if entry[0] == "htod"]  # two vectors each way, once


def test_end_to_end_host_buffers_left_unfilled_fail_the_job(board_with_reductions, monkeypatch):
    """The check of the copies above can fail: host buffers that never received the device's vectors give a dot of 0."""
    dtoh = recording_board.Driver.memcpy_dtoh

    def dropping_whole_vectors(self, host, device):
        if host.nbytes != 4 << 14:
            dtoh(self, host, device)

    monkeypatch.setattr(recording_board.Driver, "memcpy_dtoh", dropping_whole_vectors)
    with pytest.raises(VerificationError, match=rf"end to end, pinned host .* \(inputs' seed {SEED:#x}\)"):
        run({"sizes": [1 << 14], "block_sizes": [256], "variants": ["end_to_end_pinned"]})


def test_the_same_seed_makes_the_same_calls_and_rows(board_with_reductions, monkeypatch):
    raw = {"sizes": [1 << 13], "block_sizes": [128], "variants": ["warp_shuffle", "gpuarray_dot"]}
    first, second = run(raw), run(raw)
    assert recording_board.summary(*first) == recording_board.summary(*second)
    monkeypatch.setattr(reduction_sweep.ReductionSweep, "draw_seed", lambda self: SEED + 1)
    other = recording_board.summary(*run(raw))
    assert other["rows"] != recording_board.summary(*first)["rows"]  # another seed, other data (gpuarray's error)


def test_a_generator_writing_one_wrong_element_fails_the_job_naming_the_seed(board_with_reductions, monkeypatch):
    start = inputs.checked_runs(1 << 16)[3][0]  # the first element of a run checked in the middle of the vector

    def faulty(seed, vector, n):
        values = inputs.values(seed, vector, np.arange(n))
        if vector == 2:
            values[start] = np.nextafter(values[start], np.float32(2))
        return values

    monkeypatch.setattr(sys.modules[__name__], "generated", faulty)
    with pytest.raises(VerificationError, match=rf"seed {SEED:#x}.*element {start:,} of vector 2"):
        run({"sizes": [1 << 16], "block_sizes": [256], "variants": ["warp_shuffle"]})


def test_a_wrong_reference_fails_every_variant_naming_the_seed(board_with_reductions, monkeypatch):
    exact = reduction_sweep.ReductionSweep.reference_sum

    def one_off(self, n, seed, pair):
        value = exact(self, n, seed, pair)
        return value + 1 if pair == reduction_sweep.TERNARY_PAIR else value

    monkeypatch.setattr(reduction_sweep.ReductionSweep, "reference_sum", one_off)
    with pytest.raises(VerificationError, match=rf"on -1/0/1 data .* \(inputs' seed {SEED:#x}\)"):
        run({"sizes": [1 << 12], "block_sizes": [256], "variants": ["shared_tree"]})
