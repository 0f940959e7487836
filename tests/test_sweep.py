"""Progressive delivery: story-first measuring order, rows streamed as measured, final rows in point order."""

import pandas as pd

from gpu.core import schema
from gpu.core.units import GiB, KiB, MiB
from gpu.experiments import coarse_first, get_experiment, in_point_order
from gpu.sweeps.harness import SweepRows


def test_coarse_first_shows_both_ends_then_the_middle_and_keeps_every_value_once():
    sizes = [4 * KiB * 2**i for i in range(19)]
    order = coarse_first(sizes)
    assert order[:5] == [4 * KiB, 1 * GiB, 2 * MiB, 64 * KiB, 32 * MiB]
    assert sorted(order) == sizes and len(set(order)) == len(sizes)
    assert coarse_first([1, 2]) == [1, 2] and coarse_first([7]) == [7] and coarse_first([]) == []
    for n in range(1, 40):
        assert sorted(coarse_first(range(n))) == list(range(n))


def test_sweep_rows_hand_each_row_to_the_progress_callback_at_once():
    seen = []

    class Progress:
        def __call__(self, done, total, text=""):
            pass

        def row(self, row):
            seen.append(dict(row))

    rows = SweepRows(Progress())
    rows.append({"a": 1})
    rows += [{"a": 2}, {"a": 3}]
    assert seen == [{"a": 1}, {"a": 2}, {"a": 3}] == list(rows)
    plain = SweepRows(lambda done, total, text="": None)  # a plain callback: rows are only kept
    plain.append({"a": 1})
    assert plain == [{"a": 1}]


def test_rows_measured_in_any_order_come_back_in_point_order():
    module = get_experiment("transfers")
    params = module.parse_params({"sizes": [4096, 1 << 20, 1 << 30], "modes": ["pageable", "pinned"],
                                  "directions": ["h2d", "d2h"]})
    canonical = list(params.points())
    measured = [p for size in coarse_first(params.sizes) for p in canonical if p[0] == size]
    assert measured != canonical
    rows = [{"run_id": "r", "experiment": "transfers", "bytes": b, "variant": v, "direction": d, "include_alloc": a,
             "median_ms": 1.0 + i, "min_ms": 1.0, "max_ms": 2.0, "cv": 0.01, "samples": 5, "gbps": 1.0,
             "stop_reason": "converged", "profile": "interactive", "timer": t, "verified": True}
            for i, (b, v, d, a, t) in enumerate(measured)]
    frame = in_point_order(schema.make_frame(rows, {}), module, params)
    assert list(zip(frame["bytes"], frame["variant"], frame["direction"], frame["include_alloc"], frame["timer"],
                    strict=True)) == canonical
    # Each row keeps its own measurement through the reordering.
    by_key = {(r["bytes"], r["variant"], r["direction"]): r["median_ms"] for r in rows}
    assert all(by_key[(r.bytes, r.variant, r.direction)] == r.median_ms for r in frame.itertuples())
    assert in_point_order(pd.DataFrame(columns=frame.columns), module, params).empty
