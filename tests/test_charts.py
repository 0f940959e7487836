"""Chart helpers read the data they are given: traces, speedups and labels come from the frame."""

import pytest

from gpu import charts
from gpu.backend import ReplayBackend
from gpu.units import GiB, KiB


@pytest.fixture(scope="module")
def frame():
    return ReplayBackend().submit("transfers", {"include_alloc": [False, True]}).outcome()


def test_bandwidth_figure_has_a_trace_per_mode_and_the_pcie_line(frame):
    fig = charts.bandwidth_figure(frame[~frame["include_alloc"]])
    names = {t.name for t in fig.data}
    assert {"pageable (NumPy)", "pinned", "pinned write-combined", "mapped zero-copy"} <= names
    pcie = [t for t in fig.data if t.name.startswith("PCIe theoretical")]
    assert len(pcie) == 2 and pcie[0].y[0] == pytest.approx(frame["pcie_gbps_theoretical"].iloc[0])
    assert fig.layout.xaxis.type == "log"
    assert "NVIDIA H200" in fig.layout.title.text and "Replay" in fig.layout.title.text


def test_speedup_is_mode_over_pageable_at_the_same_point(frame):
    table = charts.speedup_table(frame)
    row = table[(table["variant"] == "pinned") & (table["direction"] == "h2d") & (table["bytes"] == GiB)
                & (~table["include_alloc"])].iloc[0]
    pick = frame[(frame["direction"] == "h2d") & (frame["bytes"] == GiB) & (~frame["include_alloc"])]
    expected = pick[pick["variant"] == "pinned"]["gbps"].iloc[0] / pick[pick["variant"] == "pageable"]["gbps"].iloc[0]
    assert row["speedup"] == pytest.approx(expected)


def test_recorded_h200_shows_the_allocation_verdict_flip(frame):
    # The recorded run itself: pinned wins copy-only at 1 GiB, and loses once allocation is timed.
    table = charts.speedup_table(frame)
    at_1gib = table[(table["variant"] == "pinned") & (table["bytes"] == GiB) & (table["direction"] == "h2d")]
    assert at_1gib[~at_1gib["include_alloc"]]["speedup"].iloc[0] > 2
    assert at_1gib[at_1gib["include_alloc"]]["speedup"].iloc[0] < 1


def test_model_table_fits_each_mode_and_direction(frame):
    fits = charts.model_table(frame[~frame["include_alloc"]])
    assert len(fits) == 8
    pinned = fits[(fits["variant"] == "pinned") & (fits["direction"] == "h2d")].iloc[0]
    top = frame[(frame["variant"] == "pinned") & (frame["direction"] == "h2d") & (frame["bytes"] == GiB)
                & (~frame["include_alloc"])]["gbps"].iloc[0]
    assert pinned["beta_gbps"] == pytest.approx(top, rel=0.05)
    assert 0.5 < pinned["alpha_us"] < 50
    assert pinned["n_half_bytes"] == pytest.approx(pinned["alpha_us"] * 1e-6 * pinned["beta_gbps"] * 1e9)


def test_numbers_table_keeps_spread_and_formats_sizes(frame):
    table = charts.numbers_table(frame[frame["bytes"] == 4 * KiB])
    assert set(table["size"]) == {"4 KiB"}
    assert (table["min µs"] <= table["median µs"]).all() and (table["median µs"] <= table["max µs"]).all()
