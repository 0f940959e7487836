"""Is this normal? A headline figure against its physical limit (PCIe generation × width, HBM, NVLink count × per-link
rate) and the bundled recording of its GPU model (gpu/results/analysis/normal.py), on bundled recordings; and the line
under a page's takeaway (``takeaways.context``)."""

import pytest

from gpu.core import schema
from gpu.core.paths import asset
from gpu.present import takeaways
from gpu.results.analysis import normal


def read(folder, name):
    return schema.read_results(asset(folder, name))


def pinned_1gib(frame):
    rows = frame[(frame["variant"] == "pinned") & (frame["direction"] == "h2d") & ~frame["include_alloc"]
                 & (frame["bytes"] == 2**30)]
    return rows.iloc[0].to_dict()


def test_a_transfer_against_pcie_and_the_bundled_recording_of_its_model():
    rerun = pinned_1gib(read("runs", "transfers_nvidia-h200_2026-11-22.parquet"))
    recorded = pinned_1gib(read("replay", "transfers_nvidia-h200_2026-11-21.parquet"))
    share = round(rerun["gbps"] / rerun["pcie_gbps_theoretical"] * 100)
    assert (rerun["pcie_gen"], rerun["pcie_width"]) == (5, 16)
    assert normal.normal(rerun) == (f"{rerun['gbps']:.1f} GB/s: {share} % of PCIe Gen5 ×16, "
                                    f"{rerun['gbps'] / recorded['gbps']:.2f}× the bundled H200 recording")
    # the bundled recording itself is not compared with itself
    assert normal.normal(recorded).endswith("of PCIe Gen5 ×16")


def test_a_downtrained_link_is_stated_against_its_own_generation_and_width():
    row = pinned_1gib(read("runs", "transfers_nvidia-h200_2026-11-22.parquet"))
    row.update(pcie_gen=4, pcie_width=8, pcie_gbps_theoretical=schema.pcie_gbps_per_direction(4, 8), gbps=14.0)
    said = normal.normal(row, recordings=())
    assert said == f"14.0 GB/s: {round(14.0 / schema.pcie_gbps_per_direction(4, 8) * 100)} % of PCIe Gen4 ×8"


def test_hbm_nvlink_and_a_row_without_limits():
    copies = read("runs", "device_copy_nvidia-h100-80gb-hbm3_2026-11-25.parquet")
    largest = copies[copies["bytes"] == copies["bytes"].max()]  # the headline: the largest size's fastest
    best = largest.loc[largest["gbps"].idxmax()].to_dict()
    assert normal.is_this_normal(copies) == normal.normal(best)
    assert f"{round(best['gbps'] / best['hbm_gbps_theoretical'] * 100)} % of HBM" in normal.normal(best)
    for recording in ("peers_nvidia-h100-80gb-hbm3_2026-11-25.parquet", "peers_nvidia-h200_2026-11-28.parquet"):
        peers = read("replay", recording)
        pair = peers[(peers["direction"] == "peer") & (peers["variant"] == "ce_write")].sort_values("bytes").iloc[-1]
        assert pair["link"].startswith("NVLink 4 ×18")
        assert f"{round(pair['gbps'] / 450 * 100)} % of 18 NVLink 4 links" in normal.normal(pair.to_dict())
    assert normal.normal({"gbps": 3.0, "direction": "peer", "link": "PCIe via host bridge"}, recordings=()) == \
        "3.00 GB/s"
    assert normal.normal({"gbps": float("nan")}) == ""


def test_the_line_under_a_takeaway_says_what_is_normal_and_what_was_not_observed():
    frame = read("replay", "transfers_nvidia-h200_2026-11-21.parquet")
    line = takeaways.context(frame)
    assert line.startswith(f"Is this normal? {normal.is_this_normal(frame)}")
    assert f"Conditions not observed for these {len(frame)} points" in line and " clean" not in line
    assert takeaways.context(frame, stage=True) is None  # on stage only what was seen
    throttled = frame.assign(conditions="clean").astype({"conditions": object})
    throttled.loc[throttled.index[:5], "conditions"] = "SW power cap in 38 % of samples"
    assert takeaways.context(throttled, stage=True) == \
        f"5 of {len(frame)} points not clean: SW power cap in 38 % of samples."
    assert "points not clean" not in takeaways.context(frame.assign(conditions="clean"))


@pytest.mark.parametrize("generation,rate", [(4, 25.0), (5, 50.0)])
def test_nvlink_limits_are_count_times_the_per_link_rate(generation, rate):
    limit = normal.limit_of({"direction": "peer", "link": f"NVLink {generation} ×12"})
    assert limit == normal.Limit(f"12 NVLink {generation} links", 12 * rate)
