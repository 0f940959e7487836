"""Bank conflicts on a real GPU (pytest -m gpu on the GPU machine): every thread's sum and every transposed word checked
exactly, the cost of each stride against stride 1 as the bank model orders it, padding that removes it, and a wrong
expectation refused."""

import pytest

from gpu.core.errors import WorkerError
from gpu.experiments import bank_conflicts as bank
from gpu.experiments.bank_conflicts import view
from gpu.service.backends import submit_values

pytestmark = pytest.mark.gpu


def test_every_point_verifies_and_conflicts_cost_what_the_bank_model_orders(live_backend):
    frame = submit_values(live_backend, bank.NAME, {"profile": "interactive"}).outcome()
    assert len(frame) == len(list(bank.parse_params({}).points())) and frame["verified"].all()
    data = view.with_costs(frame)
    for row in data.to_dict("records"):
        print(f"\n{bank.point_label(row)}: {row['median_ms'] * 1e3:,.1f} µs, {row['gbps']:,.0f} GB/s, "
              f"{row['slowdown']:.2f}× conflict-free, {row['clocks_per_read']:.2f} SM clocks per warp read, "
              f"bank model {row['model_ways']}-way, cv {row['cv']:.2%}")
    print("\n" + view.takeaway(frame) + "\n" + view.headline(frame))
    strided = data[data["group"] == "strided"]
    assert set(strided["timer"]) == {"cuda_event_held"} and (strided["median_ms"] >= 0.1).all()
    assert set(data.loc[data["group"] == "transpose", "timer"]) == {"cuda_event_l2_flushed_held"}
    cost = strided.set_index(["variant", "stride"])["slowdown"]
    # stride 1 reads at about one SM clock per 128 bytes: the reads, not the loop, set the time
    clocks = strided.set_index(["variant", "stride"])["clocks_per_read"]
    assert clocks[("strided_4B", 1)] < 2 and clocks[("strided_8B", 1)] < 4
    for word in (4, 8):
        plain = [cost[(f"strided_{word}B", s)] for s in bank.STRIDES]
        assert all(b >= 0.9 * a for a, b in zip(plain, plain[1:], strict=False)), plain  # never cheaper further apart
        assert plain[-1] >= 8  # a 16- or 32-way conflict costs many times stride 1
        assert all(cost[(f"padded_{word}B", s)] < 1.3 for s in bank.STRIDES)  # padding removes it
    transposes = data[data["group"] == "transpose"].set_index("variant")["slowdown"]
    assert transposes["transpose_naive_4B"] > 1.2  # the naive tile's 32-way column reads cost the transpose time


def test_a_wrong_expected_sum_is_refused_not_reported():
    from gpu.service.backends import LiveBackend
    from gpu.service.client import WorkerClient

    client = WorkerClient(service="tests.gpu.bank_conflicts_service:WrongExpectationService")
    try:
        handle = submit_values(LiveBackend(client), bank.NAME,
                               {"groups": ["strided"], "word_sizes": [4], "layouts": ["plain"], "strides": [2],
                                "reads_per_thread": 1024, "profile": "interactive"})
        with pytest.raises(WorkerError, match=r"wrong result, so no figure is reported: 4-byte words, stride 1, "
                                              r"block 256: [\d,]+ of [\d,]+ threads wrote a wrong sum, first thread 0"):
            handle.outcome()
        assert not handle.rows  # no row reached the page
    finally:
        client.close()
