"""Streams, reductions, occupancy, FMA, bank conflicts and batching on a real GPU (pytest -m gpu on the GPU machine),
their point grids declared once: each run measures exactly its declared grid (every key once, in the grid's order),
every point verified, each with the timer it has always recorded."""

import pytest

from gpu.core.schema import key_value
from gpu.core.units import KiB, MiB
from gpu.experiments import get_experiment
from gpu.service.backends import submit_values

pytestmark = pytest.mark.gpu

REDUCTION_UNHELD = ("gpuarray_dot", "end_to_end_pageable")
CASES = {
    "streams": ({"size_bytes": 16 * MiB, "chunks": [4, 8], "streams": [1, 2], "host_memory": ["pinned", "pageable"],
                 "issue_orders": ["depth_first", "staged"], "intensities": [0, 3]},
                lambda row: "cuda_event_held" if row["host_memory"] == "pinned" else "cuda_event"),
    "reduction": ({"sizes": [1 << 16, 1 << 20], "block_sizes": [128, 256]},
                  lambda row: "cuda_event_l2_flushed" + ("" if row["variant"] in REDUCTION_UNHELD else "_held")),
    "occupancy": ({"block_sizes": [64, 256, 512, 1024], "extra_registers": 32},
                  lambda row: "cuda_event_l2_flushed_held"),
    "fma": ({"chains": [1, 4], "block_sizes": [256, 512], "fmas_per_thread": 1 << 12},
            lambda row: "cuda_event_held"),
    "bank_conflicts": ({"strides": [2, 32], "block_sizes": [256], "reads_per_thread": 1 << 10,
                        "matrix_side": 1 << 11},
                       lambda row: "cuda_event_held" if row["group"] == "strided" else "cuda_event_l2_flushed_held"),
    "batching": ({"piece_sizes": [256, 64 * KiB], "pieces": 16},
                 lambda row: "host_clock_pack+cuda_event_copy" if row["variant"] == "packed" else "cuda_event"),
}


@pytest.mark.parametrize("experiment", list(CASES))
def test_a_run_measures_exactly_its_declared_grid_in_order_every_point_verified(live_backend, experiment):
    raw, timer = CASES[experiment]
    module = get_experiment(experiment)
    frame = submit_values(live_backend, experiment, {**raw, "profile": "interactive"}).outcome()
    declared = [tuple(key_value(v) for v in key) for key in module.parse_params(raw).points()]
    measured = [tuple(key_value(v) for v in key) for key in zip(*(frame[c] for c in module.KEY_COLUMNS), strict=True)]
    assert measured == declared
    assert frame["verified"].all()
    rows = frame.to_dict("records")
    assert [row["timer"] for row in rows] == [timer(row) for row in rows]
    print(f"\n{experiment}: {len(rows)} points, median ms {frame['median_ms'].min():.4f} … "
          f"{frame['median_ms'].max():.4f}")
