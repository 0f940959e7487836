import math

import numpy as np
import pytest

from gpu.core import stats
from gpu.core.stats import PRECISE, Profile, fit_latency_bandwidth, gbps, get_profile, sample_until_stable, stop_reason


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

    def test_min_time_counts_every_operation_a_sample_is_the_mean_of(self):
        per_copy = [0.02] * 300  # 300 batched samples, each the mean of 84 copies of 0.02 ms: 0.5 s of copying
        assert stop_reason(self.profile, per_copy, 0.6) is None  # counted per copy: 6 ms
        assert stop_reason(self.profile, per_copy, 0.6, per_sample=84) == "converged"

    def test_noisy_samples_run_until_timeout(self):
        noisy = [1.0, 2.0] * 400  # cv ~ 33 %, 1.2 s of samples
        assert stop_reason(self.profile, noisy, 14.9) is None
        assert stop_reason(self.profile, noisy, 15.0) == "timeout"

    def test_max_samples_caps(self):
        assert stop_reason(self.profile, [1.0, 2.0] * 500, 0.1) == "max_samples"

    def test_timeout_keeps_a_floor_of_samples(self):
        assert stop_reason(self.profile, [500.0, 600.0], 20.0) is None
        assert stop_reason(self.profile, [500.0, 600.0, 550.0], 20.0) == "timeout"


class TestCostScaledBudget:
    """The interactive profile gives each point a wall-time budget of a few samples' worth of its own cost."""

    profile = Profile("t", warmup=1, min_samples=5, max_noise=0.02, min_time_s=0.01, timeout_s=1.5, max_samples=400,
                      floor_samples=5, budget_samples=8, budget_floor_s=0.01)

    def test_budget_scales_with_the_cost_of_a_sample_between_floor_and_timeout(self):
        assert self.profile.budget_s(0.0001) == 0.01  # a 4 KiB copy: the 10 ms floor
        assert self.profile.budget_s(0.1) == pytest.approx(0.8)  # 8 samples of 100 ms
        assert self.profile.budget_s(1.0) == 1.5  # never past the timeout
        assert stats.PRECISE.budget_s(0.1) == stats.PRECISE.timeout_s  # precise has no budget

    def test_noisy_point_stops_on_its_budget_not_the_timeout(self):
        noisy = [100.0, 130.0] * 3  # cv ~ 14 %, never converges
        assert stop_reason(self.profile, noisy, 0.69, sample_cost_s=0.1) is None
        assert stop_reason(self.profile, noisy, 0.70, sample_cost_s=0.1) is None  # one more ends at 0.8 s exactly
        assert stop_reason(self.profile, noisy, 0.71, sample_cost_s=0.1) == "budget"  # one more would overrun
        assert stop_reason(self.profile, noisy, 0.80, sample_cost_s=0.1) == "budget"
        assert stop_reason(self.profile, [0.01, 0.02] * 3, 0.02, sample_cost_s=1e-5) == "budget"  # cheap: 10 ms

    def test_budget_keeps_the_floor_of_samples_and_quiet_points_converge_first(self):
        assert stop_reason(self.profile, [100.0, 130.0, 100.0, 130.0], 5.0, sample_cost_s=0.1) is None  # 4 < 5
        assert stop_reason(self.profile, [100.0] * 5, 0.9, sample_cost_s=0.1) == "converged"

    def test_cost_is_the_first_warm_up_sample_host_time_included(self):
        now = [0.0]

        def clock():
            return now[0]

        def sample():
            now[0] += 0.125  # every sample takes 125 ms of wall time
            return 100.0 if len(kept) % 2 else 130.0

        kept = []
        summary = sample_until_stable(lambda: kept.append(1) or sample(), self.profile, clock=clock)
        # Budget 8 x 0.125 s: stops when 1 s has passed after the warm-up, i.e. after 8 kept samples.
        assert summary.stop_reason == "budget" and summary.samples == 8 and len(kept) == 9

    def test_a_sample_that_would_end_past_the_budget_is_not_started(self):
        now = [0.0]
        walls = iter([0.125] + [0.15] * 50)  # warm-up 125 ms (the cost), then 150 ms a sample
        values = iter([100.0, 130.0] * 25)  # cv ~ 14 %: never converges

        def sample():
            now[0] += next(walls)
            return next(values)

        summary = sample_until_stable(sample, self.profile, clock=lambda: now[0])
        # Budget 8 x 0.125 s = 1 s: after 6 samples (0.9 s) a 7th would end at about 1.03 s.
        assert summary.stop_reason == "budget" and summary.samples == 6

    def test_budget_can_be_switched_off_by_name(self):
        assert get_profile("interactive/budget_samples=0").budget_s(0.1) == stats.INTERACTIVE.timeout_s


class TestOutliers:
    """A point whose noise is a few outlying samples gets more time to dilute them; a broad spread does not."""

    profile = Profile("t", warmup=1, min_samples=5, max_noise=0.02, min_time_s=0.01, timeout_s=1.5, max_samples=400,
                      floor_samples=5, budget_samples=5, budget_floor_s=0.05, outlier_extra_s=0.4)

    def test_robust_noise_ignores_a_lone_outlier_but_not_a_broad_spread(self):
        lone = [5.85, 5.88, 5.94, 6.73, 6.04, 5.90, 5.89]  # one pipeline sample 14 % slow
        assert stats.relative_std(lone) > 0.05 and stats.robust_noise(lone) < 0.011
        broad = [35.2, 33.8, 45.5, 47.3, 38.8]  # a pageable copy
        assert stats.robust_noise(broad) > 0.10
        assert stats.robust_noise([1.0] * 9) == 0 and math.isnan(stats.robust_noise([1.0, 2.0]))
        normal = np.random.default_rng(1).normal(100, 1.5, 20000)
        assert stats.robust_noise(normal) == pytest.approx(stats.relative_std(normal), rel=0.05)

    def test_a_lone_outlier_extends_the_budget_and_a_broad_spread_does_not(self):
        lone = [5.85, 5.88, 5.94, 6.73, 6.04, 5.90, 5.89]
        broad = [5.0, 5.9, 6.8, 5.2, 6.5, 5.6, 6.1]
        cost = 0.006  # budget max(50 ms, 5 x 6 ms) = 50 ms
        assert stop_reason(self.profile, broad, 0.046, sample_cost_s=cost) == "budget"
        assert stop_reason(self.profile, lone, 0.046, sample_cost_s=cost) is None  # up to 0.45 s now
        assert stop_reason(self.profile, lone, 0.445, sample_cost_s=cost) == "budget"
        diluted = lone + [5.9] * 60  # the outlier is 1 of 67: cv under 2 %
        assert stop_reason(self.profile, diluted, 0.40, sample_cost_s=cost) == "converged"
        no_extra = Profile(**{**self.profile.as_dict(), "outlier_extra_s": 0.0})
        assert stop_reason(no_extra, lone, 0.046, sample_cost_s=cost) == "budget"

    def test_the_extension_never_passes_the_timeout(self):
        lone = [100.0, 101.0, 99.0, 130.0, 100.0]
        assert stop_reason(self.profile, lone, 1.15, sample_cost_s=0.2) is None  # budget 1.0 s + 0.4 s
        assert stop_reason(self.profile, lone, 1.25, sample_cost_s=0.2) == "budget"
        assert stop_reason(self.profile, lone, 1.2, sample_cost_s=0.25) is None  # 1.25 + 0.4 s, capped at 1.5 s
        assert stop_reason(self.profile, lone, 1.3, sample_cost_s=0.25) == "budget"
        assert stop_reason(self.profile, lone, 1.5, sample_cost_s=0.25) == "timeout"

    def test_the_interactive_profile_dilutes_outliers(self):
        assert stats.INTERACTIVE.outlier_extra_s > 0 and stats.PRECISE.outlier_extra_s == 0
        assert get_profile("interactive/outlier_extra_s=0").outlier_extra_s == 0


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


def test_a_long_warm_up_is_kept_as_the_first_sample_and_a_short_one_is_not():
    def run(sample_ms, profile):
        calls = []

        def sample():
            calls.append(sample_ms)
            return sample_ms

        summary = stats.sample_until_stable(sample, profile, clock=iter(range(10**6)).__next__)
        return summary, len(calls)

    long, calls = run(25.0, stats.INTERACTIVE)
    assert calls == long.samples  # the warm-up of 25 ms is one of the samples
    short, calls = run(1.0, stats.INTERACTIVE)
    assert calls == short.samples + stats.INTERACTIVE.warmup  # a 1 ms warm-up is dropped
    precise, calls = run(25.0, stats.PRECISE)
    assert stats.PRECISE.warmup_kept_ms == 0 and calls == precise.samples + stats.PRECISE.warmup


# --- the sampling loop's series: the same decisions as the rule on a list, without its O(n) work at every sample ----
SERIES_PROFILES = [
    get_profile("precise/timeout_s=1"),
    Profile("edge", warmup=0, min_samples=3, max_noise=0.02, min_time_s=0.0003, timeout_s=1e9, max_samples=100_000),
    stats.INTERACTIVE,
]


def _sequences():
    rng = np.random.default_rng(41)
    yield [0.1] * 3000  # 0.1 ms is no binary fraction: the summed time meets 0.3 s only approximately
    yield [0.0001] * 20 + [0.05] * 40
    yield list(rng.normal(0.12, 0.03, 3000))  # a pageable 1 MiB copy's noise
    yield list(0.04 * (1 + rng.standard_t(3, 3000) * 0.01))  # a pinned copy's, with outliers
    yield list(rng.uniform(0.0, 1e-4, 500)) + [1e9, -1e9] + [1e-5] * 30  # cancellation: the bound keeps it exact
    yield [0.001, float("nan")] + [0.001] * 50


@pytest.mark.parametrize("profile", SERIES_PROFILES, ids=lambda p: p.name)
def test_the_loops_series_stops_exactly_where_the_rule_on_a_list_does(profile):
    for values in _sequences():
        series = stats.SampleSeries()
        for n, value in enumerate(values, 1):
            series.append(value)
            for per_sample in (1, 84):
                listed = stop_reason(profile, values[:n], 0.5, 0.01, per_sample)
                assert stop_reason(profile, series, 0.5, 0.01, per_sample) == listed, (n, per_sample)
        assert series.values == [float(v) for v in values]
        assert np.array_equal(series.array(), np.asarray(values, dtype=float), equal_nan=True)


def test_the_series_reaches_min_time_exactly_when_the_lists_sum_does():
    rng = np.random.default_rng(7)
    for _ in range(200):
        values = list(rng.uniform(0.0, 2.0, int(rng.integers(1, 400))))
        series = stats.SampleSeries()
        for value in values:
            series.append(value)
        exact = sum(values)
        for threshold_ms in (exact, np.nextafter(exact, 0.0), np.nextafter(exact, np.inf), exact * 0.999,
                             exact * 1.001):
            for per_sample in (1, 3):
                threshold_s = threshold_ms * per_sample / 1e3
                assert series.reaches(threshold_s, per_sample) == (exact * per_sample / 1e3 >= threshold_s)


def test_sampling_keeps_every_sample_in_order_and_summarizes_them_as_before():
    values = iter([5.0, 1.0, 2.0, 3.0] + [2.0] * 20)
    profile = Profile("t", warmup=1, min_samples=5, max_noise=0.0, min_time_s=0.001, timeout_s=1e9, max_samples=8)
    summary = sample_until_stable(lambda: next(values), profile)
    assert summary.samples_ms == [1.0, 2.0, 3.0, 2.0, 2.0, 2.0, 2.0, 2.0] and summary.stop_reason == "max_samples"
    assert summary.cv == stats.relative_std([1.0, 2.0, 3.0, 2.0, 2.0, 2.0, 2.0, 2.0])
