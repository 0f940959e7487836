"""Comparing runs: per point a ratio of medians and a verdict that respects noise, a headline, a provenance diff,
a normalized view for unlike devices, and a history. Pure pandas + SciPy: no Streamlit, no CUDA.

A point is **faster** or **slower** only when both hold (otherwise it is the **same**):

* a two-sided Mann-Whitney U test on the two runs' kept samples gives p < ``ALPHA`` (as Google Benchmark's
  ``compare.py`` does; with fewer than ``MIN_SAMPLES`` samples on a side the test has little power, and the
  point is marked ``few_samples``), and
* the medians differ by more than either run's own spread (coefficient of variation), as nvbench's compare
  script requires, and by at least ``MIN_EFFECT``.

``change`` is the candidate's speed relative to the baseline: baseline median ÷ candidate median − 1
(+10 % = the candidate takes 1/1.1 of the time; −18 % = it is 18 % slower).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpu import schema, text
from gpu.experiments import get_experiment
from gpu.units import format_bytes

ALPHA = 0.05
MIN_SAMPLES = 9
MIN_EFFECT = 0.01
PROVENANCE_FIELDS = ["device_name", "driver_version", "cuda_version", "pycuda_version", "pcie", "sm_clock_max_mhz",
                     "mem_clock_max_mhz", "throttled points", "profile", "timers", "host", "git_commit", "timestamp",
                     "async_engine_count"]


def key_columns(experiment: str) -> list[str]:
    return list(get_experiment(experiment).KEY_COLUMNS)


def point_label(experiment: str, row) -> str:
    """A point in words: '64 KiB pageable D2H' for transfers, the variant and its parameters elsewhere."""
    if experiment == "transfers":
        return (f"{format_bytes(row['bytes'])} {row['variant']} {str(row['direction']).upper()}"
                + (" incl. allocation" if bool(row.get("include_alloc")) else ""))
    parts = [str(row["variant"])]
    for column in key_columns(experiment):
        value = schema.key_value(row.get(column))
        if column == "variant" or value is None:
            continue
        if column in ("bytes", "param_value") and experiment in ("managed", "pools", "batching"):
            parts.append(format_bytes(value))
        elif column in ("chunks", "streams"):
            parts.append(text.count(int(value), column[:-1]))
        elif column == "param_value":
            if row.get("param") == "none":  # a kernel without a swept parameter (a plain copy)
                continue
            parts.append(f"{row.get('param') or 'parameter'} {value}")
        else:
            parts.append(LABEL_FORMATS.get(column, column + " {}").format(value))
    return " · ".join(parts)


LABEL_FORMATS = {"block_size": "block {}", "elements": "{:,} elements", "host_memory": "{}", "issue_order": "{}",
                 "intensity": "intensity {}",
                 "shared_bytes_per_block": "{} B shared"}


def percent(change: float) -> str:
    """+5 % / −18 % (a true minus sign)."""
    return text.percent(change, signed=True)


def verdict(baseline_ms, candidate_ms, baseline_cv: float, candidate_cv: float) -> dict:
    """faster | slower | same for one point, with the p-value, the change and whether samples were few."""
    from scipy.stats import mannwhitneyu

    base = np.asarray(baseline_ms, dtype=float)
    cand = np.asarray(candidate_ms, dtype=float)
    base_median, cand_median = float(np.median(base)), float(np.median(cand))
    change = base_median / cand_median - 1
    difference = abs(cand_median - base_median) / base_median
    noise = max(_finite(baseline_cv), _finite(candidate_cv), MIN_EFFECT)
    if base.size >= 2 and cand.size >= 2 and not (np.ptp(base) == 0 and np.ptp(cand) == 0 and base[0] == cand[0]):
        p_value = float(mannwhitneyu(base, cand, alternative="two-sided").pvalue)
    else:
        p_value = math.nan
    beyond_noise = p_value < ALPHA and difference > noise
    return {"verdict": ("faster" if cand_median < base_median else "slower") if beyond_noise else "same",
            "p_value": p_value, "change": change, "noise": noise,
            "few_samples": bool(min(base.size, cand.size) < MIN_SAMPLES)}


def _finite(value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    return value if math.isfinite(value) else 0.0


def limit_gbps(row) -> float:
    """The device's own theoretical limit for a point: HBM for work on the device, PCIe for host↔device."""
    column = "hbm_gbps_theoretical" if row["direction"] == "device" else "pcie_gbps_theoretical"
    value = row.get(column)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return math.nan
    if row["direction"] in ("round_trip", "both"):
        value *= 2  # both directions of the link
    return value


def compare(baseline: pd.DataFrame, candidate: pd.DataFrame) -> pd.DataFrame:
    """Every point measured in both runs, with medians, change, verdict and each as % of its device's limit."""
    experiments = set(baseline["experiment"]) | set(candidate["experiment"])
    if len(experiments) != 1:
        raise ValueError(f"runs of different experiments cannot be compared: {', '.join(sorted(experiments))}")
    experiment = experiments.pop()
    keys = key_columns(experiment)

    def keyed(frame):
        return {tuple(schema.key_value(row[k]) for k in keys): row for row in frame.to_dict("records")}

    base, cand = keyed(baseline), keyed(candidate)
    rows = []
    for key in [k for k in base if k in cand]:
        b, c = base[key], cand[key]
        result = verdict(b["samples_ms"], c["samples_ms"], b["cv"], c["cv"])
        limit_b, limit_c = limit_gbps(b), limit_gbps(c)
        rows.append({**{k: b[k] for k in keys}, "point": point_label(experiment, b), "direction": b["direction"],
                     "baseline_ms": b["median_ms"], "candidate_ms": c["median_ms"],
                     "baseline_gbps": b["gbps"], "candidate_gbps": c["gbps"],
                     "baseline_cv": b["cv"], "candidate_cv": c["cv"],
                     "baseline_samples": int(b["samples"]), "candidate_samples": int(c["samples"]),
                     "ratio": b["median_ms"] / c["median_ms"], **result,
                     "baseline_pct_of_limit": b["gbps"] / limit_b * 100 if limit_b else math.nan,
                     "candidate_pct_of_limit": c["gbps"] / limit_c * 100 if limit_c else math.nan})
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
    slower = table[table["verdict"] == "slower"]
    faster = table[table["verdict"] == "faster"]
    if not slower.empty:
        worst = slower.sort_values("change").iloc[0]
        parts.append(f"{len(slower)} of {total} points slower beyond noise, worst {percent(worst['change'])} at "
                     f"{worst['point']}")
    else:
        parts.append(f"none of {total} points slower beyond noise")
    if not faster.empty:
        best = faster.sort_values("change").iloc[-1]
        parts.append(f"{len(faster)} faster, best {percent(best['change'])} at {best['point']}")
    parts.append(f"{total - len(slower) - len(faster)} the same within noise")
    few = int(table["few_samples"].sum())
    if few:
        parts.append(f"{few} with fewer than {MIN_SAMPLES} samples on a side (little statistical power)")
    if unmatched_baseline or unmatched_candidate:
        parts.append(f"{unmatched_baseline + unmatched_candidate} points measured in only one run are left out")
    return "; ".join(parts)


def _provenance(frame: pd.DataFrame) -> dict:
    first = frame.iloc[0]
    out = {field: first.get(field) for field in PROVENANCE_FIELDS if field in frame.columns}
    out["pcie"] = f"gen {first.get('pcie_gen')} × {first.get('pcie_width')}"
    throttled = frame["throttled"].astype("boolean")
    out["throttled points"] = f"{int(throttled.fillna(False).sum())} of {len(frame)}"
    # What the clock covered: a change of method (e.g. the stream hold) is a reason for a difference too.
    out["timers"] = ", ".join(sorted(frame["timer"].dropna().astype(str).unique())) if "timer" in frame else None
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


def history(frames: list[pd.DataFrame], point: dict) -> pd.DataFrame:
    """One point across runs in time order: median with min/max per run, and whether the run regressed
    beyond noise against the run before it."""
    experiment = frames[0]["experiment"].iloc[0] if frames else None
    keys = key_columns(experiment) if experiment else []
    rows, previous = [], None
    for frame in sorted(frames, key=lambda f: str(f["timestamp"].iloc[0])):
        same = [frame[k].map(schema.key_value) == schema.key_value(point[k]) for k in keys]
        match = frame[np.logical_and.reduce(same)] if keys else frame.iloc[0:0]
        if match.empty:
            continue
        row = match.iloc[0]
        result = verdict(previous["samples_ms"], row["samples_ms"], previous["cv"], row["cv"]) \
            if previous is not None else {"verdict": "first", "change": math.nan, "p_value": math.nan}
        rows.append({"run_id": row["run_id"], "timestamp": row["timestamp"], "device_name": row["device_name"],
                     "median_ms": row["median_ms"], "min_ms": row["min_ms"], "max_ms": row["max_ms"],
                     "gbps": row["gbps"], "verdict": result["verdict"], "change": result["change"],
                     "regressed": result["verdict"] == "slower"})
        previous = row
    return pd.DataFrame(rows)


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
