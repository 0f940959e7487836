"""Reductions' point grid: the keys its declaration generates, and the points its sweep is handed, are exactly those of
the hand-written loops they replaced (copied here as the reference), over the defaults and unusual choices."""

from __future__ import annotations

import pytest

from gpu.experiments import reduction
from gpu.experiments.reduction import sweep as reduction_sweep
from tests.sweep_walk import walked


def reference_points(params):
    """The declaration's ``Params.points()`` as it was written by hand."""
    for n in params.sizes:
        for block in params.block_sizes:
            for variant in params.variants:
                yield variant, block, n


def reference_walk(params):
    """The sweep's ``points()`` as it was written by hand: (label, bytes, timer, columns) in measurement order."""
    for n in params.sizes:
        for block in params.block_sizes:
            for variant in params.variants:
                hold = variant not in reduction.UNHELD
                yield (f"{reduction.LABELS[variant]} · {n:,} elements · block {block}", reduction.bytes_moved(n),
                       "cuda_event_l2_flushed" + ("_held" if hold else ""),
                       {"variant": variant, "group": "end_to_end" if variant in reduction.END_TO_END else "kernel",
                        "direction": "device", "block_size": block, "elements": n,
                        "rel_error": None})


CHOICES = [
    {},
    {"sizes": [1 << 20, 1 << 10, 1 << 28], "block_sizes": [1024, 32, 256]},  # unsorted input
    {"sizes": [1 << 12], "block_sizes": [96], "variants": ["gpuarray_dot"]},  # one value each
    {"variants": ["end_to_end_pinned", "warp_shuffle", "atomic_per_element"]},  # a given order, not the declared one
    {"sizes": [1 << 16, 1 << 16, 1 << 14], "variants": ["shared_tree", "shared_tree", "grid_stride"]},  # duplicates
    {"sizes": [], "variants": ["grid_stride"]},  # empty (refused by the checks, still no points)
    {"variants": []},
    {"block_sizes": []},
]


@pytest.mark.parametrize("raw", CHOICES)
def test_the_generated_keys_are_the_hand_written_loops(raw):
    params = reduction.parse_params(raw)
    assert list(params.points()) == list(reference_points(params))


def test_directly_built_params_keep_their_order():
    params = reduction.Params(sizes=[1 << 14, 1 << 12], block_sizes=[512, 64], variants=["grid_stride", "shared_tree"])
    assert list(params.points()) == list(reference_points(params))


class _Timer:
    def timer_name(self, hold=None):
        return "cuda_event_l2_flushed" + ("_held" if hold else "")


class _GpuArrays:
    @staticmethod
    def GPUArray(shape, dtype, gpudata=None):  # noqa: N802 (PyCUDA's name)
        return (shape, dtype, gpudata)


@pytest.mark.parametrize("raw", [c for c in CHOICES if all(c.get(a, 1) for a in ("sizes", "variants",
                                                                                    "block_sizes"))])
def test_the_sweep_is_handed_the_points_it_built_by_hand(raw, monkeypatch):
    params = reduction.parse_params({**raw, "profile": "interactive"})
    # No vectors made: a size's seed and its references stand in.
    monkeypatch.setattr(reduction_sweep.ReductionSweep, "draw_seed", lambda self: 1)
    monkeypatch.setattr(reduction_sweep.ReductionSweep, "reference_sum", lambda self, n, seed, pair: 0)

    def equip(sweep):
        sweep.timer, sweep.gpuarray = _Timer(), _GpuArrays()
        sweep.a = sweep.b = sweep.ledger.device_buffer(4)

    assert walked(reduction_sweep.ReductionSweep, params, equip) == list(reference_walk(params))
