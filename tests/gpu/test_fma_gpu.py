"""The compute ceiling on a real GPU (pytest -m gpu on the GPU machine): every sum checked exactly against the host,
FP32 near its theoretical rate at the recorded clock, and a wrong expectation refused."""

import pytest

from gpu.core import compute
from gpu.core.errors import WorkerError
from gpu.experiments import fma
from gpu.service.backends import submit_values

pytestmark = pytest.mark.gpu


def test_every_point_verifies_and_fp32_reaches_most_of_its_theoretical_rate(live_backend):
    frame = submit_values(live_backend, "fma", {"chains": [1, 4, 16], "block_sizes": [256, 1024],
                                                "profile": "interactive"}).outcome()
    assert len(frame) == 2 * 2 * 3 and frame["verified"].all()  # every thread's sum matched the host's exactly
    assert (frame["median_ms"] >= 0.5).all(), frame["median_ms"]  # samples long enough to time with events
    assert frame["timer"].eq("cuda_event_held").all()
    for row in frame.to_dict("records"):
        rate, theoretical = fma.flops_per_second(row), compute.row_theoretical_flops(row)
        share = f" = {rate / theoretical:.1%} of theoretical" if theoretical else ""
        print(f"\n{row['variant']} chains {row['chains']} block {row['block_size']}: {rate / 1e12:.2f} TFLOP/s "
              f"at {row['sm_clock_mhz']:.0f} MHz{share}")
    fp32, fp64 = fma.roofs(frame)
    print(f"\n{fp32.source}\n{fp64.source}")
    best32 = frame.iloc[[fma.flops_per_second(r) for r in frame.to_dict("records")].index(fp32.per_second)]
    theoretical = compute.row_theoretical_flops(best32.to_dict())
    if theoretical is None:
        pytest.skip(f"compute capability {best32['compute_capability']} has no theoretical figure")
    assert fp32.per_second >= 0.8 * theoretical
    assert fp64.per_second < fp32.per_second  # FP64 has at most half the lanes on every listed capability


def test_a_wrong_expected_value_is_refused_not_reported():
    from gpu.service.backends import LiveBackend
    from gpu.service.client import WorkerClient

    client = WorkerClient(service="tests.gpu.fma_service:WrongExpectationService")
    try:
        handle = submit_values(LiveBackend(client), "fma",
                               {"precisions": ["fp32"], "chains": [4], "fmas_per_thread": 1024,
                                "profile": "interactive"})
        with pytest.raises(WorkerError, match=r"wrong result, so no figure is reported: FP32 FMA \(4 chains, block "
                                              r"256\): [\d,]+ of [\d,]+ threads wrote a wrong sum, first thread 0 "
                                              r"\(expected 1031, got 1030\)"):
            handle.outcome()
        assert not handle.rows  # no row reached the page
    finally:
        client.close()
