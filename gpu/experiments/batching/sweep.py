"""How the worker measures the batching experiment, declared in this package's ``__init__.py``
(its docstring says what is measured, how it is timed and how it is checked)."""

from __future__ import annotations

import time

import numpy as np

from gpu.core.units import format_bytes
from gpu.experiments.batching import LABELS, bytes_moved
from gpu.sweeps import harness
from gpu.sweeps.timing_methods import SINGLE, StreamClock
from gpu.sweeps.verify import POISON, pattern_for, verify_equal


class BatchingSweep(harness.Sweep):
    """Each piece size: the pieces, a staging buffer and the device buffer, then every variant on one stream."""


    def setup(self) -> None:
        self.clock = StreamClock(self.gpu, self.ledger)  # the harness's single method: events around one issue

    def group_of(self, grid_point):
        return grid_point["param_value"]

    def enter_group(self, piece) -> None:
        """A piece size's pieces, staging buffer, device buffer and read-back."""
        ledger, K = self.ledger, self.params.pieces
        words = piece // 4
        total = piece * K
        # Pieces at a stride of 2·s in one pinned region: row i's first half is piece i.
        region_buffer = ledger.host_buffer(2 * total, "pinned")
        region = region_buffer.reshape(K, 2 * words)
        pieces = region[:, :words]
        np.copyto(pieces, pattern_for(K * words, seed=piece).reshape(K, words))
        expected = np.ascontiguousarray(pieces).reshape(-1)
        staging = ledger.host_buffer(total, "pinned")
        contiguous = staging.reshape(K, words)
        device = ledger.device_buffer(total)
        readback = np.empty(K * words, np.uint32)
        np.copyto(contiguous, pieces)  # one_copy's source is the packed data, ready before the clock
        self.buffers = region_buffer, (pieces, expected, staging, contiguous, device, readback)

    def leave_group(self, piece) -> None:
        region_buffer, (_, _, staging, _, device, _) = self.buffers
        self.ledger.free_host(region_buffer)
        self.ledger.free_host(staging)
        self.ledger.free_device(device)

    def point(self, grid_point) -> harness.Point:
        variant, piece, K = grid_point["variant"], grid_point["param_value"], grid_point["chunks"]
        return harness.Point(
            {"variant": variant, "group": "batching", "direction": "h2d", "param": "piece_bytes",
             "param_value": piece, "chunks": K},
            f"{LABELS[variant]} · {K} × {format_bytes(piece)}", bytes_moved(piece, K),
            "host_clock_pack+cuda_event_copy" if variant == "packed" else "cuda_event",
            (variant, piece, *self.buffers[1]))

    def measure(self, point):
        variant, piece, pieces, _, staging, contiguous, device, _ = point.state
        cuda, clock, K = self.cuda, self.clock, self.params.pieces
        cuda.memset_d32(device, int(POISON), K * (piece // 4))
        if variant == "packed":
            staging.fill(POISON)
        base = int(device)

        def separate(stream) -> None:  # one issue: the K copies, the host issuing them while the GPU runs
            for i in range(K):
                cuda.memcpy_htod_async(base + i * piece, pieces[i], stream)

        def one_copy(stream) -> None:
            cuda.memcpy_htod_async(device, staging, stream)

        def packed() -> float:
            # The gather into staging runs on the host, so its own clock times it; then the one copy, as one_copy.
            started = time.perf_counter()
            np.copyto(contiguous, pieces)
            pack_ms = (time.perf_counter() - started) * 1e3
            return pack_ms + clock.once(one_copy)

        if variant == "packed":
            return packed
        return clock.sampler(SINGLE, separate if variant == "separate" else one_copy)

    def verify(self, point) -> None:
        variant, piece, _, expected, _, _, device, readback = point.state
        self.cuda.memcpy_dtoh(readback, device)
        verify_equal(expected, readback, f"{LABELS[variant]}, {self.params.pieces} × {format_bytes(piece)}")


run = harness.runner(BatchingSweep)
