"""The profile's ``hot_max_noise``: batched samples (each the mean of several operations) stop as nvbench's hot
measurement does, at min_samples and min_time with no noise criterion, where a profile says so; one-operation samples,
and every profile that does not set it, stop exactly as before."""

import itertools

import numpy as np
import pytest

from gpu.core import stats
from gpu.core.stats import Profile, get_profile, sample_until_stable, stop_reason

HOT = get_profile("precise/timeout_s=1,hot_max_noise=1")
DEFAULT = get_profile("precise/timeout_s=1")


def _rule_before_hot_max_noise(profile, samples_ms, elapsed_wall_s, sample_cost_s=None, per_sample=1):
    """``stop_reason`` as it was before ``hot_max_noise`` (on a list), to hold the new rule to it."""
    n = len(samples_ms)
    if n >= profile.max_samples:
        return "max_samples"
    if n >= profile.min_samples and sum(samples_ms) * per_sample / 1e3 >= profile.min_time_s:
        if stats.relative_std(samples_ms) <= profile.max_noise:
            return "converged"
    if n < min(profile.floor_samples, profile.min_samples):
        return None
    if elapsed_wall_s >= profile.timeout_s:
        return "timeout"
    if profile.budget_samples > 0 and sample_cost_s is not None:
        def overruns(budget):
            return elapsed_wall_s + sample_cost_s > budget * (1 + 1e-9)

        budget = profile.budget_s(sample_cost_s)
        extended = min(profile.timeout_s, budget + profile.outlier_extra_s)
        if profile.outlier_extra_s > 0 and overruns(budget) != overruns(extended) \
                and stats.robust_noise(samples_ms) <= profile.max_noise:
            budget = extended
        if overruns(budget):
            return "budget"
    return None


def _batched(noise, count, mean_ms=0.02, seed=3):
    """``count`` batched samples of a 1 MiB pinned copy's mean time, with relative noise ``noise``."""
    return list(np.random.default_rng(seed).normal(mean_ms, noise * mean_ms, count))


def test_the_profile_spec_sets_it_names_it_and_checks_it():
    assert HOT.hot_max_noise == 1.0 and HOT.name == "precise/timeout_s=1,hot_max_noise=1" and HOT.timeout_s == 1.0
    assert get_profile("interactive/hot_max_noise=0.05").hot_max_noise == 0.05
    assert stats.PRECISE.hot_max_noise is None and stats.INTERACTIVE.hot_max_noise is None and DEFAULT.hot_max_noise \
        is None
    for spec, message in (("precise/hot_max_noise=2", "hot_max_noise must be a finite number of at most 1, not 2"),
                          ("precise/hot_max_noise=0", "hot_max_noise must be positive"),
                          ("precise/hot_max_noise=-0.1", "hot_max_noise must be positive"),
                          ("precise/hot_max_noise=nan", "hot_max_noise must be a finite number"),
                          ("precise/hot_max_noise=quiet", "'quiet' is not a number")):
        with pytest.raises(ValueError, match=message) as error:
            get_profile(spec)
        assert "\n" not in str(error.value) and spec in str(error.value)


def test_the_noise_limit_is_max_noise_for_one_operation_a_sample_and_unset():
    assert DEFAULT.noise_limit(1) == DEFAULT.noise_limit(84) == 0.005
    assert HOT.noise_limit(1) == 0.005 and HOT.noise_limit(84) is None
    looser = get_profile("precise/hot_max_noise=0.02")
    assert looser.noise_limit(1) == 0.005 and looser.noise_limit(2) == 0.02


def test_a_noisy_batched_series_stops_at_min_time_under_the_hot_rule_and_runs_to_the_timeout_without():
    noisy = [0.0194, 0.0206] * 149  # 298 samples of 84 copies of 0.02 ms ± 3 %: 0.5006 s of copying
    assert stats.relative_std(noisy) == pytest.approx(0.03, rel=0.01)
    assert stop_reason(HOT, noisy[:297], 0.6, per_sample=84) is None  # 0.499 s: short of min_time
    assert stop_reason(HOT, noisy, 0.6, per_sample=84) == "min_time"
    assert stop_reason(DEFAULT, noisy, 0.6, per_sample=84) is None
    assert stop_reason(DEFAULT, noisy, 0.99, per_sample=84) is None
    assert stop_reason(DEFAULT, noisy, 1.0, per_sample=84) == "timeout"


def test_the_hot_rule_keeps_min_samples_and_a_quiet_batched_point_still_converges():
    long = [30.0, 31.0] * 5  # 84 copies a sample: 25 s of copies, far past min_time, at 1.7 % noise
    assert stop_reason(HOT, long[:9], 0.5, per_sample=84) is None  # 9 < min_samples
    assert stop_reason(HOT, long, 0.5, per_sample=84) == "min_time"
    quiet = _batched(0.001, 300)
    assert stop_reason(HOT, quiet, 0.6, per_sample=84) == "converged"  # within max_noise: said as before


def test_one_operation_a_sample_keeps_the_noise_rule_under_the_hot_profile():
    noisy = _batched(0.03, 300, mean_ms=2.0)  # 0.6 s of one-copy samples at 3 % noise
    assert stop_reason(HOT, noisy, 0.6, per_sample=1) is None
    assert stop_reason(HOT, noisy, 1.0, per_sample=1) == "timeout"


def test_a_limit_between_stops_a_batched_point_within_it_only():
    between = get_profile("precise/hot_max_noise=0.02")
    assert stop_reason(between, _batched(0.01, 300), 0.6, per_sample=84) == "min_time"
    assert stop_reason(between, _batched(0.05, 300), 0.6, per_sample=84) is None


def test_no_noise_limit_means_no_outlier_extension_for_batched_samples():
    profile = Profile("t", warmup=1, min_samples=5, max_noise=0.02, min_time_s=10.0, timeout_s=1.5, max_samples=400,
                      floor_samples=5, budget_samples=5, budget_floor_s=0.05, outlier_extra_s=0.4, hot_max_noise=1.0)
    lone = [5.85, 5.88, 5.94, 6.73, 6.04, 5.90, 5.89]
    assert stop_reason(profile, lone, 0.046, sample_cost_s=0.006, per_sample=1) is None  # extended, as before
    assert stop_reason(profile, lone, 0.046, sample_cost_s=0.006, per_sample=8) == "budget"  # nothing to dilute to


PROFILES = [stats.PRECISE, DEFAULT, HOT, stats.INTERACTIVE, get_profile("interactive/hot_max_noise=1"),
            get_profile("precise/timeout_s=1,hot_max_noise=0.001"),
            Profile("edge", warmup=0, min_samples=3, max_noise=0.02, min_time_s=0.0003, timeout_s=1e9,
                    max_samples=100_000, hot_max_noise=1.0)]


def _sequences():
    rng = np.random.default_rng(41)
    yield [0.1] * 600
    yield list(rng.normal(0.12, 0.03, 600))  # a pageable 1 MiB copy's noise
    yield list(0.04 * (1 + rng.standard_t(3, 600) * 0.01))  # a pinned copy's, with outliers
    yield list(rng.normal(5.0, 0.5, 300))  # a large pageable copy's: 1.5 s of samples at 10 % noise
    yield [5.85, 5.88, 5.94, 6.73, 6.04, 5.90, 5.89] + [5.9] * 60
    yield [0.001, float("nan")] + [0.001] * 50


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_the_rule_is_unchanged_for_one_operation_a_sample_and_for_profiles_without_it(profile):
    """Every answer of the new rule, on a list and on the loop's series, equals the rule before ``hot_max_noise``
    for one-operation samples under any profile, and for batched samples under a profile that leaves it unset."""
    sample_counts = (1, 84) if profile.hot_max_noise is None else (1,)
    for values in _sequences():
        series = stats.SampleSeries()
        for n, value in enumerate(values, 1):
            series.append(value)
            for per_sample in sample_counts:
                for wall, cost in ((0.02, 0.006), (0.3, 0.006), (0.5, 0.01), (1.2, 0.2), (1.0, None)):
                    before = _rule_before_hot_max_noise(profile, values[:n], wall, cost, per_sample)
                    assert stop_reason(profile, values[:n], wall, cost, per_sample) == before, (n, per_sample, wall)
                    assert stop_reason(profile, series, wall, cost, per_sample) == before, (n, per_sample, wall)


def test_the_sampling_loop_stops_a_batched_point_at_min_time_under_the_hot_rule():
    rng = np.random.default_rng(5)

    def sample():
        return float(rng.normal(1.2, 0.036))  # a batched sample: 1.2 ms at 3 % noise, the mean of 50 copies

    ticks = itertools.count(0.0, 0.001)  # the clock moves 1 ms a reading
    hot = sample_until_stable(sample, HOT, clock=lambda: next(ticks), per_sample=50)
    assert hot.stop_reason == "min_time" and hot.samples == 10  # 10 samples of 60 ms of copies: 0.6 s
    ticks = itertools.count(0.0, 0.001)
    default = sample_until_stable(sample, DEFAULT, clock=lambda: next(ticks), per_sample=50)
    assert default.stop_reason == "timeout" and default.samples > hot.samples
