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

Run-to-run noise is judged as Conbench does, against earlier results of the same point on the same machine:

* the history is that of the candidate's **board** (its ``gpu_uuid``) when the baseline names the same board and at
  least ``MIN_HISTORY`` earlier runs of that board measured the point; otherwise that of its **device model** (every
  board of the model, and runs that name no board), when ``MIN_HISTORY`` or more of those did. Boards of one model
  differ by up to 13 % on some kernels, so a history that mixes boards is wide where one board repeats to 0.1 %;
  a pair of runs on two boards is judged by the model's history, which holds the gap between boards. Earlier runs:
  the same experiment and profile family, measured before the candidate, the baseline among them; both runs must
  be of that model. With such a history, the band is the ``HISTORY_LEVEL`` prediction interval of their log medians
  (Student's t: mean ± t·s·√(1 + 1/n)); the candidate is beyond run-to-run noise when its median falls outside that
  band, on the side of its change against the baseline. The band's ``source`` says which history it came from:
  "history of 3 runs of this board" or "history of 6 runs of the device model";
* otherwise the band is the baseline's median ± the kind's floor (``RUN_TO_RUN_FLOORS``): the 95th percentile of
  |log(median ratio)| between runs of unchanged software, per kind of point (``point_kind``).

Floors (``python3 tests/benchmarks/run_to_run_floors.py`` prints them from the data) are the larger of two pooled
95th percentiles of |log(median ratio)| per kind, rounded up to 0.5 %: runs of one day (2026-11-23, H200, each in its
own worker process, in ``assets/noise/``: three transfers runs at 4 KiB–256 MiB, all modes and directions, within
five minutes; a coalescing, a reduction and an occupancy recording each with a block-256 or smaller rerun; two H100
streams runs four hours apart), and runs
days apart (the bundled H200 transfers runs of 2026-11-21 and 2026-11-22, another machine of the model; on an H100,
transfers, streams, managed, pools and batching of 2026-11-22 in ``assets/noise/`` against their reruns of 2026-11-23,
which are the bundled review runs or sit beside them; streams also against a third run of 2026-11-23 with the staged
order):

=================  ========  ==================  =================================================
kind               floor     same day / apart    what
=================  ========  ==================  =================================================
kernel             ±1.0 %    0.2 % / 0.7 %       device-only work of 100 µs and more
pinned             ±3.6 %    0.7 % / 3.2 %       pinned copies of 4 MiB and more (batches of 256 KiB and more)
mapped             ±3.0 %    0.7 % / 2.8 %       mapped copies of 4 MiB and more (batches of 256 KiB and more)
medium copy        ±11.1 %   3.8 % / 10.9 %      single pinned or mapped copies of 256 KiB – 4 MiB
short kernel       ±15.6 %   15.6 % / 0.2 %      device-only work under 100 µs (9 points so far)
managed migration  ±20.3 %   — / 19.7 %          first touch and prefetch of managed memory
small copy         ±44.8 %   44.6 % / 37.2 %     any copy under 256 KiB (issue time dominates)
pageable           ±49.2 %   48.7 % / 49.0 %     pageable copies of 256 KiB and more
host clock         ±57.6 %   — / 56.9 %          allocation-including points, pools, packing
=================  ========  ==================  =================================================

Unchanged pairs flag 3.5 % of their points with these floors (33 of 950), 8.0 % when each pair is judged by floors
derived without it: the floors rest on few runs yet. One pair of runs catches a 10 % change on kernels of 100 µs and
more, on pinned and mapped copies of 4 MiB and more and on batched ones of 256 KiB and more, and (just) on single
copies of 256 KiB – 4 MiB; on short kernels, small copies, pageable copies, managed migrations and host clocks
unchanged software moves further than that between runs, and such a change shows as within run-to-run noise. A
history of a device that repeats better narrows the band.

``change`` is the candidate's speed relative to the baseline: baseline median ÷ candidate median − 1
(+10 % = the candidate takes 1/1.1 of the time; −18 % = it is 18 % slower).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpu.core import schema, stats, text
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
from gpu.core.units import format_bytes
from gpu.experiments import get_experiment, registry

MIN_HISTORY = 3
SMALL_COPY_BYTES = stats.SMALL_COPY_BYTES
# Kernels that take 100 µs and more moved ≤ 0.19 % between runs of one day (50 points); shorter ones 0.3–18 %.
SHORT_KERNEL_MS = 0.1
HISTORY_LEVEL = 0.99
HISTORY_RUNS = 10  # the newest earlier runs of a device that make its history (a stored run loads in ~0.3 s)
# 95th percentile of |log(median ratio)| between runs of unchanged software, per kind of point: printed by
# tests/benchmarks/run_to_run_floors.py from assets/noise/ and the day-apart H200 transfers pair (see above).
# Kernels are measured on several H200 boards (assets/noise/*_board*): boards of one model differ by up to 12 % on
# some kernels (stride-64 reads, 2^28 reductions) and by ~2 % on HBM copies, which a run on another board must not
# be flagged for.
RUN_TO_RUN_FLOORS = {"kernel": 0.035, "pinned": 0.035, "mapped": 0.03, "medium copy": 0.16, "short kernel": 0.835,
                     "managed migration": 0.185, "small copy": 0.49, "pageable": 0.545, "host clock": 0.455}
# The same, between runs that name one GPU board (the same ``gpu_uuid``): three repeats on one lease of an H200
# (assets/noise/*_board5_repeat*). Kernels repeat to 0.1 % there, where boards of the model differ by up to 12 %.
ONE_BOARD_FLOORS = {"kernel": 0.005, "pinned": 0.015, "mapped": 0.03, "medium copy": 0.095, "short kernel": 0.68,
                    "small copy": 0.22, "pageable": 0.28}
VERDICT_NAMES = {SLOWER: "slower beyond noise", FASTER: "faster beyond noise",
                 RUN_TO_RUN: "within run-to-run noise", SAME: "same within noise"}
PROVENANCE_FIELDS = ["device_name", "driver_version", "cuda_version", "pycuda_version", "pcie", "sm_clock_max_mhz",
                     "mem_clock_max_mhz", "throttled points", "profile", "timers", "host", "gpu_uuid", "git_commit",
                     "timestamp", "async_engine_count"]


def key_columns(experiment: str) -> list[str]:
    return list(get_experiment(experiment).KEY_COLUMNS)


def point_label(experiment: str, row) -> str:
    """A point in words: the experiment's own ``point_label(row)`` where it declares one ('64 KiB pageable D2H'),
    else the variant and its key parameters."""
    declared = getattr(get_experiment(experiment), "point_label", None)
    if declared is not None:
        return declared(row)
    parts = [str(row["variant"])]
    for column in key_columns(experiment):
        value = schema.key_value(row.get(column))
        if column == "variant" or value is None:
            continue
        if column in ("bytes", "param_value") and registry.BY_NAME[experiment].byte_labels:
            parts.append(format_bytes(value))
        elif column in COUNT_COLUMNS:
            parts.append(text.count(int(value), COUNT_COLUMNS[column]))
        elif column == "param_value":
            if row.get("param") == "none":  # a kernel without a swept parameter (a plain copy)
                continue
            parts.append(f"{row.get('param') or 'parameter'} {value}")
        else:
            parts.append(LABEL_FORMATS.get(column, column + " {}").format(value))
    return " · ".join(parts)


COUNT_COLUMNS = {"chunks": "chunk", "streams": "stream"}  # key columns that count things: '16 chunks', '4 streams'
LABEL_FORMATS = {"block_size": "block {}", "elements": "{:,} elements", "host_memory": "{}", "issue_order": "{}",
                 "intensity": "intensity {}",
                 "shared_bytes_per_block": "{} B shared"}


def percent(change: float) -> str:
    """+5 % / −18 % (a true minus sign)."""
    return text.percent(change, signed=True)


def band_limits(band: dict, baseline_median_ms: float) -> tuple[float, float]:
    """The run-to-run band in the units of ``change`` (candidate speed ÷ baseline speed − 1): the band is symmetric
    on a log scale of time, so ±49 % there reads −38.7 % … +63.2 % here. A change outside these limits is beyond
    run-to-run noise; inside, within it."""
    low = baseline_median_ms / math.exp(band["center"] + band["half_width"]) - 1
    high = baseline_median_ms / math.exp(band["center"] - band["half_width"]) - 1
    return low, high


def band_text(low: float, high: float) -> str:
    """'−38.7 % … +63.2 %': a run-to-run band written as the change column writes a change."""
    if low != low or high != high:
        return "—"
    return f"{text.percent(low, 1, signed=True)} … {text.percent(high, 1, signed=True)}"


def floor_text(kind: str, one_board: bool = False) -> str:
    """A kind's floor as the band it gives around the baseline, in the units of ``change``."""
    return band_text(*band_limits({"center": 0.0, "half_width": floor(kind, one_board)}, 1.0))


def point_kind(experiment: str, row) -> str:
    """The kind of path a point measures, which sets how far it moves between runs: ``host clock`` (timed on
    the host: allocation, packing, pools), ``kernel`` (device memory only), ``managed migration`` (page faults or
    prefetches), ``small copy`` (a copy of less than ``SMALL_COPY_BYTES``, whatever the host memory: Python's and
    the driver's few microseconds of issue time dominate it), else the copy's host memory: ``pageable`` (staged
    through the driver), ``mapped`` (a kernel reading host memory) or ``pinned`` (write-combined included). Device
    work of less than ``SHORT_KERNEL_MS`` (in this row's run) is a ``short kernel``."""
    variant = str(row.get("variant"))
    if str(row.get("timer") or "").startswith("host_clock") or bool(_key(row.get("include_alloc"))):
        return "host clock"
    declared = getattr(get_experiment(experiment), "noise_kind", None)
    kind = declared(row) if declared is not None else None
    if kind is not None:
        return kind  # the experiment knows its kind of point (managed migration, a medium single copy, …)
    pageable = "pageable" in variant or row.get("host_memory") == "pageable"
    if row.get("direction") not in ("h2d", "d2h", "both", "round_trip") and not pageable and "pinned" not in variant:
        return "short kernel" if float(row.get("median_ms") or 0) < SHORT_KERNEL_MS else "kernel"
    chunks = _key(row.get("chunks")) if variant != "one_copy" else None
    per_copy = (_key(row.get("bytes")) or 0) / (chunks or 1)  # per copy: a piece, a chunk
    if per_copy < SMALL_COPY_BYTES:
        return "small copy"
    if pageable:
        return "pageable"
    return "mapped" if variant == "mapped" else "pinned"


def _key(value):
    return schema.key_value(value)


def floor(kind: str, one_board: bool = False) -> float:
    """The kind's run-to-run floor; between runs of one board, its one-board floor where one was measured."""
    if one_board and kind in ONE_BOARD_FLOORS:
        return min(ONE_BOARD_FLOORS[kind], RUN_TO_RUN_FLOORS[kind])
    return RUN_TO_RUN_FLOORS[kind]


def board_of(frame: pd.DataFrame) -> str | None:
    """The one GPU board a run was measured on (its ``gpu_uuid``), or None when it names none or several."""
    if "gpu_uuid" not in frame.columns:
        return None
    boards = {value for value in frame["gpu_uuid"] if isinstance(value, str) and value}
    return boards.pop() if len(boards) == 1 else None


def same_board(first: pd.DataFrame, second: pd.DataFrame) -> bool:
    board = board_of(first)
    return board is not None and board == board_of(second)


BOARD_HISTORY, MODEL_HISTORY = "this board", "the device model"  # whose history a band came from


def _usable(medians) -> list[float]:
    return [m for m in medians if m and m > 0]


def run_to_run_band(kind: str, baseline_median: float, earlier_medians=(), one_board: bool = False,
                    board_medians=()) -> dict:
    """Where unchanged software puts the candidate's median, on a log scale: ``center`` ± ``half_width``. When both
    runs name the same board (``one_board``): from the board's own earlier medians (``board_medians``) when there are
    ``MIN_HISTORY`` or more, else the baseline ± the kind's one-board floor; never from the model's history, which
    mixes boards that differ by up to 13 % and would hide a board's own change. Otherwise from the device model's
    earlier medians (``earlier_medians``) when there are ``MIN_HISTORY`` or more, else the baseline ± the floor."""
    sources = ((board_medians, BOARD_HISTORY),) if one_board else ((earlier_medians, MODEL_HISTORY),)
    for medians, whose in sources:
        earlier = np.log(np.asarray(_usable(medians), dtype=float))
        if earlier.size < MIN_HISTORY:
            continue
        from scipy.stats import t

        n = earlier.size
        half = float(t.ppf(0.5 + HISTORY_LEVEL / 2, n - 1) * earlier.std(ddof=1) * math.sqrt(1 + 1 / n))
        return {"center": float(earlier.mean()), "half_width": half, "source": f"history of {n} runs of {whose}"}
    narrow = one_board and kind in ONE_BOARD_FLOORS
    return {"center": math.log(baseline_median), "half_width": floor(kind, narrow),
            "source": f"{kind} {'one-board ' if narrow else ''}floor"}


def run_to_run_spread(runs: list[pd.DataFrame]) -> pd.DataFrame:
    """|log(median ratio)| of every point between every two of ``runs`` of one experiment on one device model
    (runs of unchanged software), with the point's kind: the measurements ``RUN_TO_RUN_FLOORS`` summarize."""
    rows = []
    for i, first in enumerate(runs):
        for second in runs[i + 1:]:
            if (_first(first, "experiment"), _first(first, "device_name")) != \
                    (_first(second, "experiment"), _first(second, "device_name")):
                continue
            experiment = _first(first, "experiment")
            keys = key_columns(experiment)
            other = {tuple(_key(r[k]) for k in keys): r for r in second.to_dict("records")}
            for row in first.to_dict("records"):
                match = other.get(tuple(_key(row[k]) for k in keys))
                if match is not None:
                    rows.append({"experiment": experiment, "device_name": row["device_name"],
                                 "kind": point_kind(experiment, row), "point": point_label(experiment, row),
                                 "runs": f"{row['run_id']} · {match['run_id']}",
                                 "abs_log_ratio": abs(math.log(row["median_ms"] / match["median_ms"]))})
    return pd.DataFrame(rows, columns=["experiment", "device_name", "kind", "point", "runs", "abs_log_ratio"]) \
        .astype({"abs_log_ratio": float})


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


def point_keys(frame: pd.DataFrame) -> set[tuple]:
    """The points a run measured, as comparable keys (its experiment's key columns, normalized)."""
    keys = key_columns(str(frame["experiment"].iloc[0]))
    return {tuple(_key(v) for v in values) for values in zip(*(frame[k] for k in keys), strict=True)}


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
        return {tuple(_key(row[k]) for k in keys): row for row in frame.to_dict("records")}

    base, cand = keyed(baseline), keyed(candidate)
    one_board = same_board(baseline, candidate)
    history = _earlier_medians(baseline, candidate, earlier, keyed)
    board_history = _earlier_medians(baseline, candidate, earlier, keyed, board_of(candidate)) if one_board else {}
    rows = []
    for key in [k for k in base if k in cand]:
        b, c = base[key], cand[key]
        kind = point_kind(experiment, b)
        timer = c.get("timer")  # the same method only
        band = run_to_run_band(kind, float(np.median(b["samples_ms"])),
                               [m for m, t in history.get(key, ()) if t == timer], one_board,
                               [m for m, t in board_history.get(key, ()) if t == timer])
        result = verdict(b["samples_ms"], c["samples_ms"], band=band)
        low, high = band_limits(band, float(np.median(b["samples_ms"])))
        limit_b, limit_c = limit_gbps(b), limit_gbps(c)
        rows.append({**{k: b[k] for k in keys}, "point": point_label(experiment, b), "direction": b["direction"],
                     "kind": kind, "baseline_ms": b["median_ms"], "candidate_ms": c["median_ms"],
                     "baseline_gbps": b["gbps"], "candidate_gbps": c["gbps"],
                     "baseline_cv": b["cv"], "candidate_cv": c["cv"],
                     "baseline_samples": int(b["samples"]), "candidate_samples": int(c["samples"]),
                     "ratio": b["median_ms"] / c["median_ms"], **result,
                     "run_to_run_low": low, "run_to_run_high": high,
                     "baseline_pct_of_limit": b["gbps"] / limit_b * 100 if limit_b else math.nan,
                     "candidate_pct_of_limit": c["gbps"] / limit_c * 100 if limit_c else math.nan})
    table = pd.DataFrame(rows)
    if not table.empty:
        table["normalized_change"] = table["candidate_pct_of_limit"] / table["baseline_pct_of_limit"] - 1
    return table


def _first(frame: pd.DataFrame, column: str) -> str:
    return str(frame[column].iloc[0]) if column in frame and not frame.empty else ""


def _when(value) -> pd.Timestamp | None:
    """A run's timestamp as an aware time (ISO text, with T or a space), None when unreadable."""
    try:
        stamp = pd.Timestamp(str(value))
    except ValueError:
        return None
    if pd.isna(stamp):
        return None
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp


def _same_history(run, device: str, profile: str, before: pd.Timestamp | None, board: str | None = None) -> bool:
    """Whether a run (a frame's first row or a catalog row) belongs to a candidate's history: the same device
    model (and board, when ``board`` is given), the same profile family (precise runs are not judged by quick
    interactive ones), measured before it."""
    when = _when(run["timestamp"])
    return (str(run["device_name"]) == device and str(run["profile"]).split("/")[0] == profile.split("/")[0]
            and when is not None and before is not None and when < before
            and (board is None or run.get("gpu_uuid") == board))


def _earlier_medians(baseline, candidate, earlier, keyed, board: str | None = None) -> dict:
    """Point key → (median, timer) of each run in the candidate's history (of its model, or of ``board`` only).
    Empty when the baseline is of another device: a history of one device says nothing about the gap between two."""
    device, profile = _first(candidate, "device_name"), _first(candidate, "profile")
    if _first(baseline, "device_name") != device:
        return {}
    before = _when(_first(candidate, "timestamp"))
    runs = {_first(f, "run_id"): f for f in [baseline, *earlier] if not f.empty
            and _same_history(f.iloc[0], device, profile, before, board)
            and _first(f, "run_id") != _first(candidate, "run_id")}
    medians: dict = {}
    for frame in sorted(runs.values(), key=lambda f: _when(_first(f, "timestamp")))[-HISTORY_RUNS:]:
        for key, row in keyed(frame).items():
            medians.setdefault(key, []).append((float(row["median_ms"]), row.get("timer")))
    return medians


def listed_history(runs: pd.DataFrame, candidate: pd.DataFrame) -> pd.DataFrame:
    """The rows of a run listing (``Catalog.runs``) that belong to the candidate's history, oldest first with
    their time (``when``): its experiment's runs on its device model, in its profile family, measured before it."""
    device, profile = _first(candidate, "device_name"), _first(candidate, "profile")
    before = _when(_first(candidate, "timestamp"))
    mine = runs[[_same_history(run, device, profile, before) for _, run in runs.iterrows()]] if not runs.empty \
        else runs
    mine = mine[mine["run_id"] != _first(candidate, "run_id")]
    return mine.assign(when=mine["timestamp"].map(_when)).sort_values("when", kind="stable")


def earlier_runs(catalog, baseline: pd.DataFrame, candidate: pd.DataFrame) -> list[pd.DataFrame]:
    """The history ``compare`` needs, from a catalog (anything with ``runs(experiment)`` and ``load(run_id)``):
    the newest ``HISTORY_RUNS`` runs of the experiment on the candidate's device model and profile family measured
    before it, and the newest ``HISTORY_RUNS`` of those on its board when both runs name the same board. None are
    loaded when too few exist to make a history with the baseline."""
    if _first(baseline, "device_name") != _first(candidate, "device_name"):
        return []
    mine = listed_history(catalog.runs(_first(candidate, "experiment")), candidate)
    mine = mine[mine["run_id"] != _first(baseline, "run_id")]
    if len(mine) + 1 < MIN_HISTORY:
        return []
    newest = list(mine.tail(HISTORY_RUNS)["run_id"])
    if same_board(baseline, candidate) and "gpu_uuid" in mine.columns:
        on_board = list(mine[mine["gpu_uuid"] == board_of(candidate)].tail(HISTORY_RUNS)["run_id"])
        newest += [run_id for run_id in on_board if run_id not in newest]
    return [catalog.load(run_id) for run_id in newest]


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
                     f"{worst['point']}")
    else:
        parts.append(f"none of {total} points slower beyond noise")
    if not faster.empty:
        best = faster.sort_values("change").iloc[-1]
        parts.append(f"{len(faster)} faster, best {percent(best['change'])} at {best['point']}")
    drifting = int((table["verdict"] == RUN_TO_RUN).sum())
    if drifting:
        parts.append(f"{drifting} within run-to-run noise")
    parts.append(f"{int((table['verdict'] == SAME).sum())} the same within noise")
    few = int(table["few_samples"].sum())
    if few:
        parts.append(f"{few} with fewer than {MIN_SAMPLES} samples on a side (little statistical power)")
    if unmatched_baseline or unmatched_candidate:
        parts.append(f"{unmatched_baseline + unmatched_candidate} points measured in only one run are left out")
    return "; ".join(parts)


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
        bands = {(kind, source.endswith("one-board floor"))
                 for kind, source in zip(floored["kind"], floored["run_to_run_source"], strict=True)}
        kinds = ", ".join(f"{kind}{' (one board)' if narrow else ''} {floor_text(kind, narrow)}"
                          for kind, narrow in sorted(bands, key=lambda band: floor(*band)))
        parts.append(f"measured floors for {_points(len(floored))} ({kinds})")
    hint = f" {MIN_HISTORY} or more earlier runs of the board (of the device model, for runs on two boards) give a " \
        "point a band of its own." if not floored.empty else ""
    return "Run-to-run noise: " + "; ".join(parts) + "." + hint


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
    """One point of one device across runs in time order: median with min/max per run, and whether the run
    regressed beyond noise against the run before it (run-to-run noise judged from the runs before it of the same
    profile family and timer, as ``compare`` does)."""
    experiment = frames[0]["experiment"].iloc[0] if frames else None
    keys = key_columns(experiment) if experiment else []
    rows, previous, previous_frame, earlier = [], None, None, []
    for frame in sorted(frames, key=lambda f: _when(f["timestamp"].iloc[0]) or pd.Timestamp.min.tz_localize("UTC")):
        same = [frame[k].map(_key) == _key(point[k]) for k in keys]
        match = frame[np.logical_and.reduce(same)] if keys else frame.iloc[0:0]
        if match.empty:
            continue
        row = match.iloc[0]
        if previous is None:
            result = {"verdict": "first", "change": math.nan, "p_value": math.nan, "run_to_run_source": None}
        else:
            board = board_of(frame)
            on_board = [r for r in earlier if board is not None and r.get("gpu_uuid") == board][-HISTORY_RUNS:]
            band = run_to_run_band(point_kind(experiment, row), float(np.median(previous["samples_ms"])),
                                   _same_method(earlier[-HISTORY_RUNS:], row), same_board(previous_frame, frame),
                                   _same_method(on_board, row))
            result = verdict(previous["samples_ms"], row["samples_ms"], band=band)
        rows.append({"run_id": row["run_id"], "timestamp": row["timestamp"], "device_name": row["device_name"],
                     "gpu_uuid": board_of(frame), "median_ms": row["median_ms"], "min_ms": row["min_ms"],
                     "max_ms": row["max_ms"], "gbps": row["gbps"], "verdict": result["verdict"],
                     "change": result["change"], "regressed": result["verdict"] == SLOWER,
                     "run_to_run_source": result["run_to_run_source"]})
        previous, previous_frame = row, frame
        earlier.append(row)
    return pd.DataFrame(rows)


def _same_method(rows, row) -> list[float]:
    """The medians of ``rows`` measured as ``row`` was: the same timer and profile family."""
    return [r["median_ms"] for r in rows if r["timer"] == row["timer"]
            and str(r["profile"]).split("/")[0] == str(row["profile"]).split("/")[0]]


KEY_NAMES = {"bytes": "sizes", "variant": "modes", "direction": "directions", "block_size": "block sizes",
             "include_alloc": "allocation settings", "elements": "element counts", "param": "parameters",
             "param_value": "parameter values", "group": "groups", "host_memory": "host memory kinds",
             "chunks": "chunk counts", "streams": "stream counts", "issue_order": "issue orders",
             "intensity": "intensities", "shared_bytes_per_block": "shared memory sizes"}


def disjoint_reason(baseline: pd.DataFrame, candidate: pd.DataFrame) -> str | None:
    """None when the runs share a point; otherwise 'These runs share no points: different sizes (…) …', naming
    each point setting whose values differ between the runs."""
    experiment = str(baseline["experiment"].iloc[0])
    keys = key_columns(experiment)

    def points(frame):
        return {tuple(schema.key_value(row[k]) for k in keys) for row in frame[keys].to_dict("records")}

    if points(baseline) & points(candidate):
        return None

    def values(frame, column):
        found = {schema.key_value(v) for v in frame[column]}
        ordered = sorted(found, key=lambda v: (v is None, isinstance(v, str), v if isinstance(v, int | float) else 0,
                                               str(v)))
        shown = [format_bytes(v) if column == "bytes" and v is not None else str(v) for v in ordered]
        return text.shorten(", ".join(shown[:4]) + (f" and {len(shown) - 4} more" if len(shown) > 4 else ""), 60)

    differing = [f"different {KEY_NAMES.get(c, c)} (baseline {values(baseline, c)}; candidate {values(candidate, c)})"
                 for c in keys if {schema.key_value(v) for v in baseline[c]} != {schema.key_value(v)
                                                                                 for v in candidate[c]}]
    return "These runs share no points: " + ("; ".join(differing) if differing else
                                             "different combinations of the same settings") + "."


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
