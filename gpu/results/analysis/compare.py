"""Comparing runs: per point a ratio of medians and a verdict that respects noise, a headline, a provenance diff,
a normalized view for unlike devices, and a history. Pure pandas + SciPy: no Streamlit, no CUDA.

Each point gets one of four verdicts:

* **same** (within noise): the samples show no difference. A two-sided Mann-Whitney U test on the two runs' kept
  samples gives p ≥ ``ALPHA`` (as Google Benchmark's ``compare.py``), or the medians differ by less than
  ``MIN_EFFECT``. With fewer than ``MIN_SAMPLES`` samples on a side the test has little power (3 against 3 cannot
  go below p = 0.1): the point is marked ``few_samples``, and every sample of one run beyond every sample of the
  other counts as a difference there.
* **within run-to-run noise**: the samples differ, but the candidate's median stays inside the band where
  unchanged software puts it from run to run (other processes, days, machines of the model). Within-run noise
  understates that, above all for host-side paths (pageable staging, page-locking, issue time, host clocks).
* **faster** / **slower**: beyond both.

How far medians move is judged by how far they move between runs, not by the spread of single samples (nvbench's
rule, which ``verdict`` still applies when it is given no band): the median of thousands of samples is precise
even when rare slow samples give them a CV of 30–70 %. ``noise`` is the samples' robust spread (``robust_spread``).

Run-to-run bands and histories are ``gpu.results.analysis.bands``; the point vocabulary (keys, labels, kinds) is
``gpu.results.analysis.points``. This module holds the verdicts and what is said about them; it re-exports the
names of the other two, so ``gpu.results.analysis.compare`` keeps every name its callers use.

``change`` is the candidate's speed relative to the baseline: baseline median ÷ candidate median − 1
(+10 % = the candidate takes 1/1.1 of the time; −18 % = it is 18 % slower).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpu.core import method_versions, text
from gpu.core.stats import (  # noqa: F401 (ALPHA, MIN_EFFECT, robust_spread: Compare's rules, read by tests)
    ALPHA,
    FASTER,
    MIN_EFFECT,
    MIN_SAMPLES,
    RUN_TO_RUN,
    SAME,
    SLOWER,
    robust_spread,
    verdict,
)
from gpu.results.analysis import bands, causes, points
from gpu.results.analysis.bands import (  # noqa: F401 (history and bands, as Compare's callers know them)
    BOARD_HISTORY,
    HISTORY_LEVEL,
    HISTORY_RUNS,
    MIN_HISTORY,
    MODEL_HISTORY,
    ONE_BOARD_FLOORS,
    RUN_TO_RUN_FLOORS,
    band_limits,
    band_text,
    board_of,
    boards_of,
    earlier_runs,
    floor,
    floor_text,
    history,
    listed_boards,
    listed_history,
    run_to_run_band,
    run_to_run_spread,
    same_board,
)
from gpu.results.analysis.points import (  # noqa: F401 (the point vocabulary, as Compare's callers know it)
    COUNT_COLUMNS,
    KEY_NAMES,
    LABEL_FORMATS,
    SHORT_KERNEL_MS,
    SMALL_COPY_BYTES,
    disjoint_reason,
    key_columns,
    limit_gbps,
    point_keys,
    point_kind,
    point_label,
)

VERDICT_NAMES = {SLOWER: "slower beyond noise", FASTER: "faster beyond noise",
                 RUN_TO_RUN: "within run-to-run noise", SAME: "same within noise"}
PROVENANCE_FIELDS = ["device_name", "driver_version", "cuda_version", "pycuda_version", "pcie", "sm_clock_max_mhz",
                     "mem_clock_max_mhz", "throttled points", "profile", "timers", "host", "gpu_uuid", "git_commit",
                     "method_version", "timestamp", "async_engine_count"]


def percent(change: float) -> str:
    """+5 % / −18 % (a true minus sign)."""
    return text.percent(change, signed=True)


def compare(baseline: pd.DataFrame, candidate: pd.DataFrame, earlier: list[pd.DataFrame] = ()) -> pd.DataFrame:
    """Every point measured in both runs, with medians, change, verdict and each as % of its device's limit.
    ``earlier``: other runs of the experiment (``earlier_runs``); those of the candidate's device measured before
    it give a point's run-to-run band when both runs are of that device."""
    experiments = set(baseline["experiment"]) | set(candidate["experiment"])
    if len(experiments) != 1:
        raise ValueError(f"runs of different experiments cannot be compared: {', '.join(sorted(experiments))}")
    experiment = experiments.pop()
    keys = key_columns(experiment)

    def keyed(frame):
        return {tuple(points._key(row[k]) for k in keys): row for row in frame.to_dict("records")}

    base, cand = keyed(baseline), keyed(candidate)
    one_board = same_board(baseline, candidate)
    model_history = bands.earlier_medians(baseline, candidate, earlier, keyed)
    board_history = bands.earlier_medians(baseline, candidate, earlier, keyed, boards_of(candidate)) \
        if one_board else {}
    rows = []
    for key in [k for k in base if k in cand]:
        b, c = base[key], cand[key]
        kind = point_kind(experiment, b)
        timer = c.get("timer")  # the same method only
        band = run_to_run_band(kind, float(np.median(b["samples_ms"])),
                               [(m, run) for m, t, run in model_history.get(key, ()) if t == timer], one_board,
                               [(m, run) for m, t, run in board_history.get(key, ()) if t == timer])
        result = verdict(b["samples_ms"], c["samples_ms"], band=band)
        low, high = band_limits(band, float(np.median(b["samples_ms"])))
        limit_b, limit_c = limit_gbps(b), limit_gbps(c)
        # what the witness saw on each side (``not observed`` for runs recorded before witnesses)
        b_seen, c_seen = causes.of_row(b), causes.of_row(c)
        rows.append({**{k: b[k] for k in keys}, "point": point_label(experiment, b), "direction": b["direction"],
                     "kind": kind, "baseline_ms": b["median_ms"], "candidate_ms": c["median_ms"],
                     "baseline_gbps": b["gbps"], "candidate_gbps": c["gbps"],
                     "baseline_cv": b["cv"], "candidate_cv": c["cv"],
                     "baseline_samples": int(b["samples"]), "candidate_samples": int(c["samples"]),
                     "ratio": b["median_ms"] / c["median_ms"], **result,
                     "run_to_run_low": low, "run_to_run_high": high,
                     "run_to_run_runs": band["runs"], "run_to_run_left_out": band["left_out"],
                     "baseline_pct_of_limit": b["gbps"] / limit_b * 100 if limit_b else math.nan,
                     "candidate_pct_of_limit": c["gbps"] / limit_c * 100 if limit_c else math.nan,
                     "baseline_conditions": b_seen, "candidate_conditions": c_seen,
                     "conditions": causes.pair_words(b_seen, c_seen),
                     "not_clean": causes.explained(b_seen, c_seen)})
    table = pd.DataFrame(rows)
    if not table.empty:
        table["normalized_change"] = table["candidate_pct_of_limit"] / table["baseline_pct_of_limit"] - 1
    return table


def headline(table: pd.DataFrame, unmatched_baseline: int = 0, unmatched_candidate: int = 0) -> str:
    """'7 of 152 points slower beyond noise, worst −18 % at 64 KiB pageable D2H; …'."""
    if table.empty:
        return "No point was measured in both runs: nothing to compare."
    total = len(table)
    parts = []
    slower = table[table["verdict"] == SLOWER]
    faster = table[table["verdict"] == FASTER]
    if not slower.empty:
        worst = slower.sort_values("change").iloc[0]
        parts.append(f"{len(slower)} of {total} points slower beyond noise, worst {percent(worst['change'])} at "
                     f"{worst['point']}" + _not_clean_words(slower, "of them "))
    else:
        parts.append(f"none of {total} points slower beyond noise")
    if not faster.empty:
        best = faster.sort_values("change").iloc[-1]
        parts.append(f"{len(faster)} faster, best {percent(best['change'])} at {best['point']}")
    drifting = int((table["verdict"] == RUN_TO_RUN).sum())
    if drifting:
        parts.append(f"{drifting} within run-to-run noise")
    parts.append(f"{int((table['verdict'] == SAME).sum())} the same within noise")
    if slower.empty and "not_clean" in table:
        named = _not_clean_words(table, "")
        if named:
            parts.append(named.lstrip("; "))
    few = int(table["few_samples"].sum())
    if few:
        parts.append(f"{few} with fewer than {MIN_SAMPLES} samples on a side (little statistical power)")
    if unmatched_baseline or unmatched_candidate:
        parts.append(f"{unmatched_baseline + unmatched_candidate} points measured in only one run are left out")
    return "; ".join(parts)


def _not_clean_words(part: pd.DataFrame, of_them: str) -> str:
    """'; 3 of them not clean (candidate: SW power cap in 38 % of samples)': the points of ``part`` whose
    baseline or candidate the witness found not clean, with their causes; '' when there are none."""
    if "not_clean" not in part:
        return ""
    named = part[part["not_clean"].astype(bool)]
    if named.empty:
        return ""
    said = causes.summary(causes.cause_words(b, c) for b, c in zip(named["baseline_conditions"],
                                                                    named["candidate_conditions"], strict=True))
    return f"; {len(named)} {of_them}{causes.NOT_CLEAN} ({said})"


def verdict_text(row) -> str:
    """A point's verdict in words with its conditions (``causes.verdict_words``): a point whose baseline or
    candidate was not clean is never a bare 'slower'."""
    return causes.verdict_words(VERDICT_NAMES[row["verdict"]], row.get("baseline_conditions"),
                                row.get("candidate_conditions"))


def conditions_words(baseline: pd.DataFrame, candidate: pd.DataFrame) -> str:
    """Both runs' conditions in one line: 'candidate: SW power cap in 38 % of samples · baseline: clean'; 'not
    observed' for a run no witness watched, never 'clean'."""
    return " · ".join(f"{role}: {causes.summary(causes.of_frame(frame))}"
                      for role, frame in (("candidate", candidate), ("baseline", baseline)))


def method_words(baseline: pd.DataFrame, candidate: pd.DataFrame) -> str:
    """Whether the two runs were measured by the same method (``gpu.core.method_versions.words``): a difference of
    method is a reason for a difference of figures, and an unknown version is said, never guessed."""
    return method_versions.words(baseline, candidate)


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    """Points per verdict, every verdict named (zero included), in the order slower, faster, run-to-run, same."""
    counts = table["verdict"].value_counts() if not table.empty else {}
    return {VERDICT_NAMES[v]: int(counts.get(v, 0)) for v in VERDICT_NAMES}


def _points(count: int) -> str:
    return f"{count} point" + ("" if count == 1 else "s")


def band_summary(table: pd.DataFrame) -> str:
    """Where the run-to-run bands came from: 'Run-to-run noise: the history of 4 runs of this board for 40 points;
    measured floors for 12 points (pinned −1.5 % … +1.5 %, small copy −30.9 % … +44.8 %)': each band in the units of
    a point's change (speed), where the band is symmetric on a log scale.'"""
    if table.empty:
        return ""
    sources = table["run_to_run_source"].value_counts()
    histories = [f"the {source} for {_points(count)}"
                 for source, count in sources.items() if source.startswith("history")]
    floored = table[table["run_to_run_source"].str.endswith("floor")]
    parts = histories
    if not floored.empty:
        floors = {(kind, source.endswith("one-board floor"))
                  for kind, source in zip(floored["kind"], floored["run_to_run_source"], strict=True)}
        kinds = ", ".join(f"{kind}{' (one board)' if narrow else ''} {floor_text(kind, narrow)}"
                          for kind, narrow in sorted(floors, key=lambda band: floor(*band)))
        parts.append(f"measured floors for {_points(len(floored))} ({kinds})")
    hint = f" {MIN_HISTORY} or more earlier runs of the board (of the device model, for runs on two boards) give a " \
        "point a band of its own." if not floored.empty else ""
    runs = bands.band_runs_text(table)
    return "Run-to-run noise: " + "; ".join(parts) + "." + hint + (f" {runs}" if runs else "")


def _provenance(frame: pd.DataFrame) -> dict:
    first = frame.iloc[0]
    out = {field: first.get(field) for field in PROVENANCE_FIELDS if field in frame.columns}
    out["pcie"] = f"gen {first.get('pcie_gen')} × {first.get('pcie_width')}"
    throttled = frame["throttled"].astype("boolean")
    out["throttled points"] = f"{int(throttled.fillna(False).sum())} of {len(frame)}"
    # What the clock covered: a change of method (e.g. the stream hold) is a reason for a difference too.
    out["timers"] = ", ".join(sorted(frame["timer"].dropna().astype(str).unique())) if "timer" in frame else None
    # Every board the run names (a peer run spans a node's GPUs), not its first row's.
    out["gpu_uuid"] = ", ".join(sorted(boards_of(frame))) or None
    out["method_version"] = method_versions.shown(frame)  # "unknown" for a run recorded before runs kept one
    return {field: out.get(field) for field in PROVENANCE_FIELDS}


def provenance_diff(baseline: pd.DataFrame, candidate: pd.DataFrame) -> pd.DataFrame:
    """Field by field, what differs between the two runs' provenance (the likely reasons for a difference)."""
    b, c = _provenance(baseline), _provenance(candidate)
    rows = []
    for field in PROVENANCE_FIELDS:
        bv, cv = _text(b.get(field)), _text(c.get(field))
        rows.append({"field": field, "baseline": bv, "candidate": cv, "differs": bv != cv})
    return pd.DataFrame(rows)


def _text(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def compare_normalized(baseline: pd.DataFrame, candidate: pd.DataFrame) -> pd.DataFrame:
    """``compare`` on the normalized view, for unlike devices: each candidate sample is scaled by the ratio of the
    two devices' limits for its point (a device with twice the bandwidth is expected to take half the time), so the
    same verdict rule decides faster/slower/same on the share of each device's own limit. Times, GB/s and % of
    limit shown stay the candidate's own; points whose limit is unknown on either device are left out."""
    reference = baseline.iloc[0]
    limit_columns = ("hbm_gbps_theoretical", "pcie_gbps_theoretical")
    factors = np.array([limit_gbps(row) / limit_gbps({**row, **{c: reference.get(c) for c in limit_columns}})
                        for row in candidate.to_dict("records")])
    known = np.isfinite(factors) & (factors > 0)
    scaled = candidate[known].copy()
    factors = factors[known]
    scaled["samples_ms"] = [list(np.asarray(s, dtype=float) * f) for s, f in zip(scaled["samples_ms"], factors,
                                                                                   strict=True)]
    scaled["median_ms"] = scaled["median_ms"] * factors
    scaled["gbps"] = scaled["gbps"] / factors
    table = compare(baseline, scaled)
    if table.empty:
        return table
    own = compare(baseline, candidate[known]).set_index("point")
    for column in ("candidate_ms", "candidate_gbps", "candidate_pct_of_limit"):
        table[column] = table["point"].map(own[column])
    table["normalized_change"] = table["change"]
    return table
