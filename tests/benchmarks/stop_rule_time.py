"""The profile's stop rule between samples, on the host: its time per sample over a point of 5,000 samples (a
pinned or pageable 1 MiB copy at the health suite's cap), checked on a list at every sample (as the sampling loop did)
against the loop's ``SampleSeries``. No GPU: the samples are made-up times, so only the rule's own cost is timed.
Prints, never asserts.

    python tests/benchmarks/stop_rule_time.py
"""

from __future__ import annotations

import time

import numpy as np

from gpu.core import stats


def seconds_in_rule(samples: list[float], profile: stats.Profile, series: bool) -> tuple[float, str | None]:
    """The rule's time over every prefix of ``samples`` (as the loop asks it after each sample) and its last answer."""
    held = stats.SampleSeries() if series else []
    reason = None
    started = time.perf_counter()
    for value in samples:
        held.append(value)
        reason = stats.stop_reason(profile, held, 0.5, None)
        if reason:
            break
    return time.perf_counter() - started, reason


def main() -> None:
    profile = stats.get_profile("precise/timeout_s=1")
    rng = np.random.default_rng(0)
    cases = {"pinned 1 MiB (0.04 ms, 5 % noise)": [float(v) for v in rng.normal(0.04, 0.002, 5000)],
             "pageable 1 MiB (0.12 ms, 20 % noise)": [float(v) for v in rng.normal(0.12, 0.024, 5000)]}
    print(f"stop rule per sample, profile {profile.name}, {len(next(iter(cases.values())))} samples a point")
    for name, samples in cases.items():
        on_list, reason_list = seconds_in_rule(samples, profile, series=False)
        on_series, reason_series = seconds_in_rule(samples, profile, series=True)
        print(f"  {name}: on a list {on_list / len(samples) * 1e6:.1f} µs ({on_list:.3f} s a point), "
              f"on the series {on_series / len(samples) * 1e6:.1f} µs ({on_series:.3f} s); "
              f"{on_list / on_series:.1f}×; stops: {reason_list} / {reason_series}")


if __name__ == "__main__":
    main()
