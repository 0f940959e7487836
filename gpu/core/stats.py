"""Measurement statistics: profiles, the nvbench-style stopping rule, summaries and the t = α + n/β model.

Pure Python + NumPy: the worker feeds it sample times, the tests feed it made-up ones.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Profile:
    """How long to keep sampling one measurement point.

    Stop as *converged* once ``samples >= min_samples``, the summed sample time reaches
    ``min_time_s`` and the relative standard deviation is at most ``max_noise``; otherwise stop at
    ``timeout_s`` of wall time (with at least ``floor_samples`` samples) or at ``max_samples``.

    With ``budget_samples`` > 0 a point's wall-time limit also scales with its cost: it stops as *budget*
    once it has spent ``budget_samples`` times the wall time of one sample (the first warm-up's, or the
    first sample's), or when one more sample would end past that, but never before ``budget_floor_s`` nor
    before ``floor_samples`` samples. A 4 KiB copy then gets milliseconds and a 1 GiB pageable copy a few
    samples, instead of both the same timeout. With ``outlier_extra_s`` a point that is still above
    ``max_noise`` at its budget, but whose robust spread (median absolute deviation) is within it, may spend that
    much more time: its noise is a few outlying samples, which more samples dilute, not a broad spread (as a
    pageable copy's), which they would not.

    With ``warmup_kept_ms`` > 0 a warm-up that lasts at least that long is kept as the first sample: a warm-up
    is there to pay one-time costs (the first launch, cold caches and TLBs), which are microseconds, and a
    20 ms copy's first run shows none of them (its first sample is within noise of its median), while the dropped
    warm-ups of the Transfers sweep's largest copies add up to about half a second of copying.

    ``hot_max_noise`` is the noise limit for samples that are each the mean of several operations (a batched
    sample, ``per_sample`` > 1); unset, it is ``max_noise`` (a profile without it measures as before), and 1 means
    no noise criterion: such a point stops once it has ``min_samples`` samples and ``min_time_s`` of measured time
    (or at its time limits), as *min_time* where its noise is above ``max_noise``, and its budget is not extended
    for outliers. That is nvbench's rule: only its cold measurement, one launch a sample, stops on noise
    (``nvbench/detail/measure_cold.cu``, ``measure_cold_base::is_finished``, with
    ``nvbench/detail/stdrel_criterion.cxx``, ``stdrel_criterion::do_is_finished``); its hot (batch) measurement
    stops at ``min_samples`` launches and its batch target time (``--batch-target-time``; the criterion's
    ``min-time`` before it), or at the timeout, with no noise criterion (``nvbench/detail/measure_hot.cuh``,
    ``measure_hot::run_trials``): a batch's mean is already an average over many launches.
    """

    name: str
    warmup: int
    min_samples: int
    max_noise: float
    min_time_s: float
    timeout_s: float
    max_samples: int
    floor_samples: int = 3
    budget_samples: float = 0.0
    budget_floor_s: float = 0.0
    outlier_extra_s: float = 0.0
    warmup_kept_ms: float = 0.0
    hot_max_noise: float | None = None

    def noise_limit(self, per_sample: int = 1) -> float | None:
        """The noise limit of a point whose samples are each the mean of ``per_sample`` operations: ``max_noise``, or
        ``hot_max_noise`` for a batched sample where the profile sets it; None for no noise criterion."""
        if per_sample <= 1 or self.hot_max_noise is None:
            return self.max_noise
        return None if self.hot_max_noise >= 1 else self.hot_max_noise

    def budget_s(self, sample_cost_s: float) -> float:
        """The wall-time limit of a point whose one sample costs ``sample_cost_s`` (timeout_s without a budget)."""
        if self.budget_samples <= 0:
            return self.timeout_s
        return min(self.timeout_s, max(self.budget_floor_s, self.budget_samples * sample_cost_s))

    def as_dict(self) -> dict:
        return asdict(self)


# Below this a host↔device copy is latency-bound: on the H200 a copy's ~5 µs of issue time is what 256 KiB takes
# at 55 GB/s, and smaller copies move 5–45 % between runs where larger ones move ≤ 1 % (pinned). Compare's floors
# call such a point a "small copy".
SMALL_COPY_BYTES = 256 << 10

# nvbench's defaults: >= 10 samples, stop at <= 0.5 % noise after >= 0.5 s of samples, give up at 15 s.
PRECISE = Profile("precise", warmup=3, min_samples=10, max_noise=0.005, min_time_s=0.5, timeout_s=15.0,
                  max_samples=5000)
# For sliders and talks: converge at 2 % noise, or spend about 5 samples' worth of time (at least 50 ms, at
# most 1.5 s) and report the spread found; always at least 5 samples, so comparisons keep their power. A point
# whose noise is a few outliers gets up to 0.4 s more to dilute them.
INTERACTIVE = Profile("interactive", warmup=1, min_samples=5, max_noise=0.02, min_time_s=0.01, timeout_s=1.5,
                      max_samples=100, floor_samples=5, budget_samples=5.0, budget_floor_s=0.05,
                      outlier_extra_s=0.4, warmup_kept_ms=20.0)
PROFILES = {p.name: p for p in (PRECISE, INTERACTIVE)}
DAY_S = 86400.0
# The largest value each setting takes: a time up to a day, a count up to a million, a noise up to 100 %.
SETTING_MAX = {"warmup": 1_000_000, "min_samples": 1_000_000, "max_noise": 1.0, "min_time_s": DAY_S,
               "timeout_s": DAY_S, "max_samples": 1_000_000, "floor_samples": 1_000_000, "budget_samples": 1_000_000,
               "budget_floor_s": DAY_S, "outlier_extra_s": DAY_S, "warmup_kept_ms": DAY_S * 1000, "hot_max_noise": 1.0}


def get_profile(spec: str) -> Profile:
    """A profile by name, optionally with overrides: ``precise/timeout_s=3,max_samples=2000``,
    ``precise/timeout_s=1,hot_max_noise=1``.

    The full spec string becomes the profile's name, so a recording says exactly how it was measured.
    """
    name, _, overrides = str(spec).partition("/")
    if name not in PROFILES:
        raise ValueError(f"unknown profile '{name}': choose one of {', '.join(PROFILES)}")
    profile = PROFILES[name]
    if not overrides:
        return profile
    values = profile.as_dict()
    for item in overrides.split(","):
        key, _, text = item.partition("=")
        key = key.strip()
        if key not in values or key == "name":
            raise ValueError(f"profile '{spec}': '{key}' is not a setting "
                             f"(settings: {', '.join(k for k in values if k != 'name')})")
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"profile '{spec}': '{text}' is not a number") from None
        largest = SETTING_MAX.get(key, DAY_S)
        if not math.isfinite(number) or number > largest:
            raise ValueError(f"profile '{spec}': {key} must be a finite number of at most {largest:g}, not "
                             f"{text.strip()[:40]}")
        value = type(values[key])(number) if isinstance(values[key], int) else number
        if value < 0 or (value == 0 and key not in ("warmup", "budget_samples", "budget_floor_s", "outlier_extra_s")):
            raise ValueError(f"profile '{spec}': {key} must be positive")
        values[key] = value
    values["name"] = str(spec)
    return Profile(**values)


def relative_std(samples_ms) -> float:
    """Coefficient of variation (sample std / mean); NaN with fewer than two samples."""
    values = np.asarray(samples_ms, dtype=float)
    if values.size < 2 or values.mean() == 0:
        return math.nan
    return float(values.std(ddof=1) / values.mean())


def robust_noise(samples_ms) -> float:
    """The spread of the bulk of the samples, blind to a few outliers: 1.4826 × median absolute deviation / median
    (equal to the CV for normally distributed samples); NaN with fewer than three samples."""
    values = np.asarray(samples_ms, dtype=float)
    if values.size < 3:
        return math.nan
    median = float(np.median(values))
    if median == 0:
        return math.nan
    return float(1.4826 * np.median(np.abs(values - median)) / median)


@dataclass
class Summary:
    median_ms: float
    min_ms: float
    max_ms: float
    cv: float
    samples: int
    stop_reason: str
    samples_ms: list[float]


def summarize(samples_ms, stop_reason: str) -> Summary:
    values = np.asarray(samples_ms, dtype=float)
    if values.size == 0:
        raise ValueError("no samples to summarize")
    return Summary(
        median_ms=float(np.median(values)),
        min_ms=float(values.min()),
        max_ms=float(values.max()),
        cv=relative_std(values),
        samples=int(values.size),
        stop_reason=stop_reason,
        samples_ms=[float(v) for v in values],
    )


class SampleSeries:
    """One point's samples as they arrive, for the stop rule at every sample: the list (``values``, the summary's),
    the same floats in a NumPy buffer, and a running total with a bound on its rounding. ``stop_reason`` on a list sums
    it and converts it to an array at every sample, O(n) each time: on a point of 5,000 samples (a 1 MiB copy at the
    health suite's cap) that was 0.06-0.17 s of host time between samples on a 2-core machine. On a series it decides
    the same way for the same samples (``reaches`` answers exactly what ``sum(values)`` would, the noise is computed on
    the same floats), at O(1) a sample until the summed time nears ``min_time_s``."""

    def __init__(self):
        self.values: list[float] = []
        self._buffer = np.empty(256)
        self._total = 0.0
        self._magnitude = 0.0  # the sum of |value|: bounds the running total's rounding

    def append(self, value: float) -> None:
        value = float(value)
        n = len(self.values)
        if n == self._buffer.size:
            self._buffer = np.concatenate([self._buffer, np.empty(n)])
        self._buffer[n] = value
        self.values.append(value)
        self._total += value
        self._magnitude += abs(value)

    def __len__(self) -> int:
        return len(self.values)

    def array(self) -> np.ndarray:
        """The samples so far (a view of the buffer: no copy)."""
        return self._buffer[:len(self.values)]

    def reaches(self, min_time_s: float, per_sample: int) -> bool:
        """``sum(values) * per_sample / 1e3 >= min_time_s``, computed on the list only where the running total is too
        close to the threshold to tell: the running total and ``sum`` each differ from the true sum by at most
        n·2⁻⁵³·Σ|value| (under 10⁻⁹ of Σ|value| for up to a million samples)."""
        margin = 1e-9 * self._magnitude
        if (self._total + margin) * per_sample / 1e3 < min_time_s:
            return False
        if (self._total - margin) * per_sample / 1e3 >= min_time_s:
            return True
        return sum(self.values) * per_sample / 1e3 >= min_time_s


def stop_reason(profile: Profile, samples_ms, elapsed_wall_s: float,
                sample_cost_s: float | None = None, per_sample: int = 1) -> str | None:
    """Why sampling should stop now ('converged', 'min_time', 'budget', 'timeout', 'max_samples'), or None to go on.

    ``samples_ms``: a list, or a ``SampleSeries`` (the sampling loop's: the same answer without its O(n) work at every
    sample). ``sample_cost_s`` is the wall time of one sample of this point (for profiles with a budget).
    ``per_sample``: the operations each sample's time was divided over (a batched sample's copies, each sample their
    mean), so ``min_time_s`` counts the time measured, as nvbench does, not the per-operation times; where it is more
    than one, the noise limit is the profile's ``hot_max_noise`` (``Profile.noise_limit``): a batched point within it
    but above ``max_noise`` stops as 'min_time' (nvbench's hot rule, ``Profile``)."""
    series = samples_ms if isinstance(samples_ms, SampleSeries) else None
    values = series.array() if series is not None else samples_ms
    n = len(samples_ms)
    limit = profile.noise_limit(per_sample)  # None: no noise criterion (a batched point under nvbench's hot rule)
    if n >= profile.max_samples:
        return "max_samples"
    if n >= profile.min_samples and (series.reaches(profile.min_time_s, per_sample) if series is not None
                                     else sum(samples_ms) * per_sample / 1e3 >= profile.min_time_s):
        noise = relative_std(values)
        if limit is None or noise <= limit:
            # Above max_noise, a batched point stops by the hot rule: at min_samples and min_time, not on its noise.
            return "converged" if noise <= profile.max_noise else "min_time"
    if n < min(profile.floor_samples, profile.min_samples):
        return None
    if elapsed_wall_s >= profile.timeout_s:
        return "timeout"
    if profile.budget_samples > 0 and sample_cost_s is not None:
        # A budget is not overrun by a whole sample: stop when the next one would end past it.
        def overruns(budget: float) -> bool:
            return elapsed_wall_s + sample_cost_s > budget * (1 + 1e-9)

        budget = profile.budget_s(sample_cost_s)
        extended = min(profile.timeout_s, budget + profile.outlier_extra_s)
        # The robust noise (two medians) only matters where the extension changes the answer: computed at every
        # sample it cost a Transfers sweep a second of host time.
        if profile.outlier_extra_s > 0 and limit is not None and overruns(budget) != overruns(extended) \
                and robust_noise(values) <= limit:
            budget = extended  # a few outliers: dilute them (where there is a noise limit to reach)
        if overruns(budget):
            return "budget"
    return None


def sample_until_stable(sample_once: Callable[[], float], profile: Profile,
                        clock: Callable[[], float] = time.perf_counter, per_sample: int = 1) -> Summary:
    """Warm up, then call ``sample_once`` (which returns one sample in ms) until the profile says stop.

    The wall time of the first warm-up (or, without one, of the first sample), host overhead included, is
    the point's sample cost for a budgeted profile. ``per_sample``: the operations each sample is the mean of
    (``stop_reason``)."""
    cost = None
    samples = SampleSeries()
    start = None
    for i in range(profile.warmup):
        began = clock()
        value = float(sample_once())
        if i == 0:
            cost = clock() - began
            if profile.warmup_kept_ms > 0 and value >= profile.warmup_kept_ms:
                samples.append(value)  # long enough that one-time costs are noise: a sample (see Profile)
                start = began
                break
    start = clock() if start is None else start
    while True:
        samples.append(float(sample_once()))
        if cost is None:
            cost = clock() - start
        reason = stop_reason(profile, samples, clock() - start, cost, per_sample)
        if reason:
            return summarize(samples.values, reason)


def gbps(nbytes: float, milliseconds: float) -> float:
    """Decimal gigabytes per second (10^9 B/s), as nvbench and nvbandwidth report."""
    if milliseconds <= 0:
        return math.nan
    return nbytes / (milliseconds * 1e-3) / 1e9


@dataclass(frozen=True)
class LatencyBandwidthFit:
    """t = α + n/β fitted to (bytes, time); n½ = α·β is the size that reaches half of β."""

    alpha_us: float
    beta_gbps: float
    n_half_bytes: float
    max_rel_residual: float
    points: int


def fit_latency_bandwidth(nbytes, time_ms) -> LatencyBandwidthFit:
    """Least squares on relative error (weights 1/t), so 4 KiB and 1 GiB points count alike."""
    n = np.asarray(nbytes, dtype=float)
    t = np.asarray(time_ms, dtype=float) * 1e-3
    mask = np.isfinite(n) & np.isfinite(t) & (t > 0)
    n, t = n[mask], t[mask]
    if n.size < 2 or np.unique(n).size < 2:
        raise ValueError("the model needs at least two different sizes")
    design = np.column_stack([np.ones_like(n), n]) / t[:, None]
    (alpha, inv_beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if inv_beta <= 0:
        raise ValueError("time does not grow with size: no bandwidth to fit")
    alpha = max(alpha, 0.0)
    beta = 1.0 / inv_beta
    predicted = alpha + n / beta
    return LatencyBandwidthFit(
        alpha_us=alpha * 1e6,
        beta_gbps=beta / 1e9,
        n_half_bytes=alpha * beta,
        max_rel_residual=float(np.max(np.abs(predicted - t) / t)),
        points=int(n.size),
    )


# --- verdicts: is one set of samples faster than another beyond noise (Compare, the streams headline) -----
ALPHA = 0.05
MIN_SAMPLES = 9
MIN_EFFECT = 0.01
SLOWER, FASTER, RUN_TO_RUN, SAME = "slower", "faster", "run-to-run", "same"


def robust_spread(samples_ms) -> float:
    """1.4826 × MAD / median: the samples' coefficient of variation for a normal bulk, which rare slow samples
    (an interrupt, a page fault) do not inflate. A 4 KiB copy's CV is often 15–70 % from a handful of them."""
    samples = np.asarray(samples_ms, dtype=float)
    median = float(np.median(samples))
    return 1.4826 * float(np.median(np.abs(samples - median))) / median if median > 0 else 0.0


def verdict(baseline_ms, candidate_ms, baseline_cv: float | None = None, candidate_cv: float | None = None,
            band: dict | None = None) -> dict:
    """faster | slower | run-to-run | same for one point, with the p-value, the change, the run-to-run band's
    half-width as a relative change and whether samples were few. The runs' own spread is ``robust_spread`` of
    their samples unless given; without ``band`` only within-run noise counts."""
    from scipy.stats import mannwhitneyu

    base = np.asarray(baseline_ms, dtype=float)
    cand = np.asarray(candidate_ms, dtype=float)
    base_median, cand_median = float(np.median(base)), float(np.median(cand))
    change = base_median / cand_median - 1
    difference = abs(cand_median - base_median) / base_median
    spreads = [robust_spread(base) if baseline_cv is None else _finite(baseline_cv),
               robust_spread(cand) if candidate_cv is None else _finite(candidate_cv)]
    noise = max(*spreads, MIN_EFFECT)
    if base.size >= 2 and cand.size >= 2 and not (np.ptp(base) == 0 and np.ptp(cand) == 0 and base[0] == cand[0]):
        p_value = float(mannwhitneyu(base, cand, alternative="two-sided").pvalue)
    else:
        p_value = math.nan
    few = bool(min(base.size, cand.size) < MIN_SAMPLES)
    # 3 against 3 samples cannot reach p < 0.05; with a run-to-run band as the guard, every sample of one run
    # beyond every sample of the other counts as significant there.
    separated = base.size and cand.size and (base.min() > cand.max() or cand.min() > base.max())
    significant = p_value < ALPHA or (band is not None and few and bool(separated))
    direction = FASTER if cand_median < base_median else SLOWER
    result = SAME
    if band is None:  # within-run noise alone: nvbench's rule, the difference beyond either run's spread
        result = direction if significant and difference > noise else SAME
    elif significant and difference >= MIN_EFFECT:
        # How far medians move is judged by how far they move between runs (the band), not by the spread of
        # single samples: the median of thousands of samples is precise even when the samples are spread out.
        away = math.log(cand_median) - band["center"]
        beyond = abs(away) > band["half_width"] and (away < 0) == (direction == FASTER)
        result = direction if beyond else RUN_TO_RUN
    return {"verdict": result, "p_value": p_value, "change": change, "noise": noise,
            "run_to_run": math.expm1(band["half_width"]) if band is not None else math.nan,
            "run_to_run_source": band["source"] if band is not None else None, "few_samples": few}


def _finite(value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    return value if math.isfinite(value) else 0.0
