"""The CPU half of the witness's bar, end to end: a fake NVML (``tests.fake_nvml``) shows a throttle, a PCIe link
downtrained to Gen4 ×8 and NVLink CRC errors; the witness turns each into a point's ``conditions``; those words, set on
recorded runs as the harness sets them on its rows, are named by the Fleet page, by Compare and in ``check``'s summary.
A fleet whose witness saw nothing names no cause. No GPU setting is changed anywhere: the faults are the stand-in's."""

import pytest

from gpu.core import conditions
from gpu.device.telemetry import Telemetry
from gpu.present.fleet import boards as fleet
from gpu.present.fleet import links as fleet_links
from gpu.results.analysis import compare
from tests import test_causes
from tests.fake_nvml import FakeNVML
from tests.test_witness import _point

FAULTS = {
    "throttle": dict(reasons=0x4),  # SW power cap on every reading
    "pcie": dict(pcie=(4, 8)),  # a link trained down to Gen4 ×8 of the slot's Gen5 ×16
    "nvlink": dict(nvlink_links=[2]),  # link 2 up; its CRC counter rises during the point (below)
}


def witnessed(fault: str | None) -> str:
    """The ``conditions`` the witness gives one point on a GPU with ``fault`` (None: a quiet GPU)."""
    nvml = FakeNVML(**FAULTS.get(fault, {}))
    tele = Telemetry("0000:01:00.0", nvml=nvml)
    try:
        during = (lambda: nvml.nvlink.update({(2, 2): 12})) if fault == "nvlink" else None
        return _point(tele, during=during)["conditions"]
    finally:
        tele.witness.close()


def test_each_fault_the_fake_nvml_shows_becomes_a_cause_and_a_quiet_gpu_is_clean():
    assert witnessed(None) == conditions.CLEAN
    assert conditions.causes(witnessed("throttle")) == ["SW power cap in 100 % of samples"]
    assert conditions.causes(witnessed("pcie")) == ["PCIe Gen4 ×8 of Gen5 ×16"]
    [crc] = conditions.causes(witnessed("nvlink"))
    assert crc.startswith("NVLink 2 CRC") and crc.endswith("+12")


@pytest.mark.parametrize("fault", ["throttle", "pcie", "nvlink"])
def test_compare_and_checks_summary_name_what_the_witness_saw(capsys, tmp_path, fault):
    cause = witnessed(fault)
    base, candidate = test_causes.baseline(witnessed(None)), test_causes.later(1.1, f"slow-{fault}", cause)
    headline = compare.headline(compare.compare(base, candidate))
    assert f"not clean (candidate: {cause}" in headline
    code, out, _, summary, junit = test_causes.gate(capsys, tmp_path, base, candidate)
    assert code == 3 and f"slower, not clean (candidate: {cause}" in out
    assert "not clean — candidate\\: " in summary and cause.split(" ")[0] in summary
    assert any(cause in (failure.get("message") or "") for failure in junit.iter("failure"))


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["throttle", "pcie"])
def test_the_fleet_page_names_what_the_witness_saw_on_a_slow_board(fault):
    cause = witnessed(fault)
    [sentence] = fleet.outlier_sentences(test_causes.reduction_fleet({3: cause}, default=witnessed(None)))
    assert f"slower); {cause.replace(' of samples', ' of its samples')}." in sentence


def test_the_fleet_page_names_nvlink_errors_the_witness_saw_on_a_slow_link_and_a_clean_node_none():
    from gpu.experiments import peers
    from tests.simulated_fleet import peer_frame

    cause, clean = witnessed("nvlink"), witnessed(None)
    params = peers.parse_params({"sizes": [268435456], "variants": ["ce_write"], "methods": ["batched"],
                                 "profile": "interactive"})
    boards = list(range(2, 10))
    quiet = peer_frame(boards, params, host="node-3", run_id="quiet").assign(conditions=clean)
    pairs = quiet[quiet["peer_index"].notna() & (quiet["peer_index"] != quiet["gpu_index"])]
    source, destination = int(pairs["gpu_index"].iloc[0]), int(pairs["peer_index"].iloc[0])
    node = peer_frame(boards, params, {(boards[source], boards[destination]): 1 / 0.51}, host="node-3",
                      run_id="node3").assign(conditions=clean).astype({"conditions": object})
    node.loc[(node["gpu_index"] == source) & (node["peer_index"] == destination), "conditions"] = cause
    table = fleet_links.links([node])
    [sentence] = fleet_links.slow_link_sentences(fleet_links.judge(table, fleet_links.figures(table)["figure"].iloc[0]))
    assert sentence.endswith(f"); {cause}.")
    table = fleet_links.links([quiet])
    assert fleet_links.slow_link_sentences(fleet_links.judge(table, fleet_links.figures(table)["figure"].iloc[0])) == []
