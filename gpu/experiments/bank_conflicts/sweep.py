"""How the worker measures bank conflicts, declared in ``gpu/experiments/bank_conflicts/__init__.py`` (its docstring
says what is measured, how it is timed and how it is checked)."""

from __future__ import annotations

import time

import numpy as np

from gpu.device.timing import KernelTimer
from gpu.experiments import bank_conflicts as declared
from gpu.sweeps import harness
from gpu.sweeps.verify import pattern_for, transposed_equal, verify_equal

POISON_WORD = 0xFFFFFFFF  # written over every output before a point: a thread or word left unwritten never passes


class BankConflictsSweep(harness.Sweep):
    """The strided output (8 bytes a thread of the widest launch) for the whole job; the transposes' input and output
    (the largest word size chosen) at the first transpose point, the input filled once with a position-dependent
    pattern, so a misplaced word never verifies."""

    def setup(self) -> None:
        gpu, ledger, params = self.gpu, self.ledger, self.params
        # A kernel's own clock (gpu.device.timing.KernelTimer: events around one launch, the stream held while it is
        # queued), not one of the harness's copy methods: a sample is one cold launch, never a batch.
        self.reads_timer = KernelTimer(gpu, ledger, flush_l2=False)  # shared memory only: no cache state to reset
        self.transpose_timer = None
        self.threads_per_sm = int(gpu.attributes.get("MAX_THREADS_PER_MULTIPROCESSOR", 2048))
        self.out = self.readback = None
        if "strided" in params.groups:
            most = max(declared.strided_threads(gpu.sm_count, self.threads_per_sm, b) for b in params.block_sizes)
            self.out = ledger.device_buffer(most * 8)
            self.readback = ledger.host_buffer(most * 8, "pinned").view(np.uint8)  # viewed per word size
        self.matrix = None
        self.fn = {name: gpu.kernel("bank_conflicts", name) for name in set(declared.KERNELS.values())}

    def _transpose_buffers(self):
        """Input, output and read-back of the largest word size chosen, made at the first transpose point."""
        if self.matrix is None:
            side, word = self.params.matrix_side, max(self.params.word_sizes)
            nbytes = side * side * word
            self.transpose_timer = KernelTimer(self.gpu, self.ledger)  # reads HBM: L2 flushed before every sample
            host = pattern_for(nbytes // 4, seed=time.time_ns() & 0xFFFF)
            source = self.ledger.device_buffer(nbytes)
            self.cuda.memcpy_htod(source, host)
            self.matrix = (host, source, self.ledger.device_buffer(nbytes),
                           self.ledger.host_buffer(nbytes, "pinned").view(np.uint8))
        return self.matrix

    def group_of(self, grid_point):
        return grid_point["group"]

    def enter_group(self, group) -> None:
        if group == "transpose":
            self._transpose_buffers()

    def point(self, grid_point) -> harness.Point:
        variant, block = grid_point["variant"], grid_point["block_size"]
        value, reads = grid_point["param_value"], grid_point["intensity"]
        word = declared.word_bytes_of(variant)
        if grid_point["group"] == "strided":
            threads = declared.strided_threads(self.gpu.sm_count, self.threads_per_sm, block)
            return harness.Point(
                {"variant": variant, "group": "strided", "direction": "shared", "block_size": block,
                 "elements": threads, "param": "stride", "param_value": value, "intensity": reads,
                 "shared_bytes_per_block": declared.SHARED_WORDS * word},
                f"{declared.LABELS[variant]} · stride {value} · block {block}",
                declared.strided_bytes(threads, reads, word), self.reads_timer.timer_name(),
                {"variant": variant, "block": block, "stride": value, "reads": reads, "threads": threads})
        return harness.Point(
            {"variant": variant, "group": "transpose", "direction": "device", "block_size": block,
             "elements": value * value, "param": "matrix_side", "param_value": value, "intensity": reads,
             "shared_bytes_per_block": declared.tile_shared_bytes(variant)},
            f"{declared.LABELS[variant]} · {value:,} × {value:,}", declared.transpose_bytes(value, word),
            self.transpose_timer.timer_name(), {"variant": variant, "side": value})

    def prepare(self, point) -> None:
        state = point.state
        word = declared.word_bytes_of(state["variant"])
        if "side" in state:
            out, words = self.matrix[2], state["side"] ** 2 * word // 4
        else:
            out, words = self.out, state["threads"] * word // 4
        self.cuda.memset_d32(out, POISON_WORD, words)

    def measure(self, point):
        state = point.state
        variant = state["variant"]
        kernel = self.fn[declared.KERNELS[variant]]
        if "side" in state:
            _, source, out, _ = self.matrix
            side = state["side"]
            tiles = (side // declared.TILE, side // declared.TILE)

            def launch(s):
                kernel(source, out, np.int32(side), block=(declared.TILE, declared.TILE_ROWS, 1), grid=tiles, stream=s)

            timer = self.transpose_timer
        else:
            block, threads, out = state["block"], state["threads"], self.out
            row = np.uint32(declared.row_words(state["stride"], declared.is_padded(variant)))
            trips = np.uint32(state["reads"] // declared.READS_PER_TRIP)

            def launch(s):
                kernel(out, row, trips, block=(block, 1, 1), grid=(threads // block, 1), stream=s)

            timer = self.reads_timer
        return lambda: timer.once(launch)

    def verify(self, point) -> None:
        state = point.state
        variant = state["variant"]
        word = declared.word_bytes_of(variant)
        dtype = np.uint32 if word == 4 else np.uint64
        what = declared.point_label({"variant": variant, "param_value": state.get("stride", state.get("side")),
                                     "block_size": state.get("block", declared.TRANSPOSE_BLOCK)})
        if "side" in state:
            host, _, out, readback = self.matrix
            side = state["side"]
            got = readback[:side * side * word].view(dtype)
            self.cuda.memcpy_dtoh(got, out)
            matrix = host.view(dtype)[:side * side].reshape(side, side)
            if not transposed_equal(got.reshape(side, side), matrix, max(1, (1 << 18) // side)):
                verify_equal(np.ascontiguousarray(matrix.T).ravel(), got, what)
            return
        got = self.readback[:state["threads"] * word].view(dtype)
        self.cuda.memcpy_dtoh(got, self.out)
        expected = declared.expected_lane_sums(word, state["stride"], declared.is_padded(variant), state["reads"])
        declared.check_lane_sums(expected, got, what)


run = harness.runner(BankConflictsSweep)
