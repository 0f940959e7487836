"""The occupancy calculator against the driver's recorded answers (H200 and H100), and its edge cases."""

from pathlib import Path

import pytest

from gpu.core.occupancy import DeviceLimits, KernelResources, load_driver_table, occupancy, recorded_profiles

TABLES = sorted((Path(__file__).resolve().parent.parent / "assets" / "occupancy").glob("*.json"))


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_calculator_matches_every_recorded_driver_answer(path):
    device, answers, meta = load_driver_table(path)
    checked = [a for a in answers if a["blocks_per_sm"] is not None]
    assert len(checked) >= 1000 and meta["driver_version"]
    wrong = []
    for a in checked:
        kernel = KernelResources(a["registers"], a["static_shared"], a["max_dynamic_shared"])
        if occupancy(device, kernel, a["block_size"], a["dynamic_shared"]).blocks_per_sm != a["blocks_per_sm"]:
            wrong.append(a)
    assert not wrong, wrong[:3]
    # The table exercises every limiter, or agreement would prove little.
    limiters = {occupancy(device, KernelResources(a["registers"], a["static_shared"], a["max_dynamic_shared"]),
                          a["block_size"], a["dynamic_shared"]).limiter for a in checked}
    assert {"warps", "registers", "shared memory", "invalid"} <= limiters


def test_both_hopper_profiles_are_committed():
    assert {"NVIDIA H200", "NVIDIA H100 80GB HBM3"} <= set(recorded_profiles())


@pytest.fixture
def h200():
    return recorded_profiles()["NVIDIA H200"][0]


def test_register_allocation_is_per_warp_in_units_of_256(h200):
    # 33 registers → 1056 per warp → 1280 allocated: 12 warps per sub-partition, 48 per SM → 6 blocks of 256.
    result = occupancy(h200, KernelResources(33), 256)
    assert result.blocks_per_sm == 6 and result.limiter == "registers"


def test_shared_memory_includes_the_reserved_kilobyte_and_granularity(h200):
    # 10000 B + 1024 B reserved = 11024 → 11136 after 128-byte rounding; 233472 / 11136 = 20 blocks.
    result = occupancy(h200, KernelResources(16, 0, 227 * 1024), 64, 10000)
    assert result.limits["shared memory"] == 20


@pytest.mark.parametrize("block,message", [(0, "outside 1…1024"), (1025, "outside 1…1024")])
def test_impossible_block_sizes_explain_themselves(h200, block, message):
    result = occupancy(h200, KernelResources(32), block)
    assert result.blocks_per_sm == 0 and result.limiter == "invalid" and message in result.reason


def test_too_many_registers_for_a_block_is_named(h200):
    result = occupancy(h200, KernelResources(255), 1024)
    assert result.blocks_per_sm == 0 and "registers" in result.reason


def test_devices_before_volta_are_refused():
    with pytest.raises(ValueError, match="7.0 and newer"):
        DeviceLimits.from_attributes("old", (6, 1), {})


def test_the_shared_memory_axis_writes_bytes_as_sizes_not_si_numbers():
    from gpu.core.occupancy import KernelResources, recorded_profiles
    from gpu.experiments.occupancy_sweep import view

    device, _ = next(iter(recorded_profiles().values()))
    fig = view.occupancy_curve(device, KernelResources(32, 0, device.shared_per_block_optin), 256, 0,
                                        "shared")
    assert fig.layout.xaxis.ticktext[:3] == ("0 B", "32 KiB", "64 KiB")  # Plotly's own ticks read "50k"
    assert "KiB" in fig.data[0].customdata[-1][2]
