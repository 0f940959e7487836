"""Compare's default pair (like for like) and what a comparison can detect (gpu.results.analysis.pairing)."""

import pandas as pd

from gpu.results.analysis import compare, pairing
from gpu.results.exchange.catalog import Catalog
from gpu.results.persistence.store import RunStore


def listing(*runs):
    return pd.DataFrame([{"run_id": run_id, "device_name": device, "timestamp": when}
                         for run_id, device, when in runs])


def test_the_newest_run_is_paired_with_the_nearest_earlier_run_of_its_model():
    runs = listing(("h100-new", "H100", "2026-11-23T15:00:00+00:00"), ("h200-new", "H200", "2026-11-23T12:00:00"),
                   ("h100-old", "H100", "2026-11-20T10:00:00+00:00"), ("h100-mid", "H100", "2026-11-22T10:00:00Z"))
    assert pairing.like_pair(runs, lambda run_id: {1}) == ("h100-mid", "h100-new")


def test_runs_that_share_no_point_or_no_model_are_passed_over_and_none_left_is_no_pair():
    runs = listing(("batched", "H100", "2026-11-23T15:00:00Z"), ("single", "H100", "2026-11-23T14:00:00Z"),
                   ("h200", "H200", "2026-11-23T13:00:00Z"), ("single-old", "H100", "2026-11-21T14:00:00Z"))
    keys = {"batched": {"b"}, "single": {"s"}, "h200": {"b", "s"}, "single-old": {"s"}}
    assert pairing.like_pair(runs, keys.get) == ("single-old", "single")
    assert pairing.like_pair(runs[runs["run_id"] != "single-old"], keys.get) is None
    assert pairing.like_pair(runs.iloc[0:0], keys.get) is None


def test_across_models_names_both_and_one_model_is_none():
    h200 = pd.DataFrame({"device_name": ["NVIDIA H200"]})
    h100 = pd.DataFrame({"device_name": ["NVIDIA H100 80GB HBM3"]})
    assert pairing.across_models(h200, h100) == "NVIDIA H100 80GB HBM3 against NVIDIA H200"
    assert pairing.across_models(h200, h200) is None


def test_what_the_bundled_h200_pair_can_detect_is_each_kinds_widest_band(tmp_path):
    catalog = Catalog(RunStore(f"sqlite:///{tmp_path}/runs.sqlite"))
    baseline, candidate = catalog.load("56dfb5d63118"), catalog.load("abfc8dc50ea0")
    table = compare.compare(baseline, candidate, compare.earlier_runs(catalog, baseline, candidate))
    kinds = pairing.detectable(table).set_index("kind")
    assert kinds["points"].sum() == len(table)
    # a slowdown inside the widest band of a kind is within run-to-run noise there, one beyond it is not
    for kind, row in kinds.iterrows():
        mine = table[table["kind"] == kind]
        assert row["slower"] == -mine["run_to_run_low"].min() and row["faster"] == mine["run_to_run_high"].max()
    assert list(kinds.index[:2]) == ["mapped", "pinned"] and kinds.index[-1] == "pageable"
    line = pairing.detectable_line(table)
    # two runs make no history: pageable copies keep their floor, "changes under 42 % are within noise here"
    assert line.startswith("What this comparison can detect")
    assert f"pageable copies (26 points) {compare.floor_text('pageable')}" in line, line
    assert pairing.detectable_line(table.iloc[0:0]) == ""
