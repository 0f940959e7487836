import math

import numpy as np
import pytest

from gpu import stats
from gpu.stats import PRECISE, Profile, fit_latency_bandwidth, gbps, get_profile, sample_until_stable, stop_reason


def test_summary_reports_median_spread_and_every_sample():
    s = stats.summarize([1.0, 2.0, 3.0, 100.0], "converged")
    assert s.median_ms == 2.5 and s.min_ms == 1.0 and s.max_ms == 100.0
    assert s.samples == 4 and s.samples_ms == [1.0, 2.0, 3.0, 100.0]
    assert s.cv == pytest.approx(np.std([1, 2, 3, 100], ddof=1) / np.mean([1, 2, 3, 100]))


def test_gbps_is_decimal():
    assert gbps(10**9, 1000.0) == pytest.approx(1.0)
    assert gbps(2**30, 19.4) == pytest.approx(55.35, rel=1e-3)
    assert math.isnan(gbps(1, 0))


def test_precise_profile_is_nvbench_default():
    assert (PRECISE.min_samples, PRECISE.max_noise, PRECISE.min_time_s, PRECISE.timeout_s) == (10, 0.005, 0.5, 15.0)


class TestStoppingRule:
    profile = Profile("t", warmup=0, min_samples=10, max_noise=0.005, min_time_s=0.5, timeout_s=15, max_samples=1000)

    def test_not_before_min_samples_even_if_quiet_and_long(self):
        assert stop_reason(self.profile, [100.0] * 9, 1.0) is None

    def test_not_before_min_time(self):
        assert stop_reason(self.profile, [1.0] * 20, 1.0) is None  # 20 ms of samples < 0.5 s
        assert stop_reason(self.profile, [1.0] * 500, 1.0) == "converged"

    def test_noisy_samples_run_until_timeout(self):
        noisy = [1.0, 2.0] * 400  # cv ~ 33 %, 1.2 s of samples
        assert stop_reason(self.profile, noisy, 14.9) is None
        assert stop_reason(self.profile, noisy, 15.0) == "timeout"

    def test_max_samples_caps(self):
        assert stop_reason(self.profile, [1.0, 2.0] * 500, 0.1) == "max_samples"

    def test_timeout_keeps_a_floor_of_samples(self):
        assert stop_reason(self.profile, [500.0, 600.0], 20.0) is None
        assert stop_reason(self.profile, [500.0, 600.0, 550.0], 20.0) == "timeout"


def test_sample_until_stable_warms_up_and_uses_the_clock():
    calls = []
    ticks = iter(range(10**6))

    def sample():
        calls.append(1)
        return 60.0  # 60 ms: 10 samples make 0.6 s

    profile = Profile("t", warmup=2, min_samples=10, max_noise=0.01, min_time_s=0.5, timeout_s=1e9, max_samples=100)
    summary = sample_until_stable(sample, profile, clock=lambda: next(ticks))
    assert summary.samples == 10 and summary.stop_reason == "converged"
    assert len(calls) == 12  # 2 warm-up samples are not kept


def test_profile_overrides_are_named_and_checked():
    p = get_profile("precise/timeout_s=3,max_samples=100")
    assert p.timeout_s == 3.0 and p.max_samples == 100 and p.name == "precise/timeout_s=3,max_samples=100"
    assert get_profile("interactive") is stats.INTERACTIVE
    with pytest.raises(ValueError, match="unknown profile"):
        get_profile("fast")
    with pytest.raises(ValueError, match="not a setting"):
        get_profile("precise/speed=2")
    with pytest.raises(ValueError, match="not a number"):
        get_profile("precise/timeout_s=soon")
    with pytest.raises(ValueError, match="positive"):
        get_profile("precise/timeout_s=0")


def test_model_fit_recovers_alpha_beta_and_n_half():
    alpha_s, beta = 8e-6, 55e9
    sizes = np.array([4096 * 2**i for i in range(19)], dtype=float)
    times_ms = (alpha_s + sizes / beta) * 1e3
    fit = fit_latency_bandwidth(sizes, times_ms)
    assert fit.alpha_us == pytest.approx(8.0, rel=1e-6)
    assert fit.beta_gbps == pytest.approx(55.0, rel=1e-6)
    assert fit.n_half_bytes == pytest.approx(8e-6 * 55e9, rel=1e-6)
    assert fit.max_rel_residual < 1e-9


def test_model_fit_weights_small_sizes_by_relative_error():
    sizes = np.array([4096, 8192, 2**30], dtype=float)
    times_ms = np.array([10e-3, 10.07e-3, 19.5])  # latency-bound small points, one big one
    fit = fit_latency_bandwidth(sizes, times_ms)
    assert 9 < fit.alpha_us < 11  # ordinary least squares would let the 1 GiB point swamp α


def test_model_fit_refuses_what_it_cannot_fit():
    with pytest.raises(ValueError, match="two different sizes"):
        fit_latency_bandwidth([4096, 4096], [1, 1])
    with pytest.raises(ValueError, match="does not grow"):
        fit_latency_bandwidth([4096, 8192, 16384], [3.0, 2.0, 1.0])
