"""Compare's history and run-to-run bands: where unchanged software puts a point's median from run to run, from the
history of the candidate's board or device model, or from the measured floors; and one point's history over runs.
Pure pandas + SciPy: no Streamlit, no CUDA.

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
  "history of 3 runs of this board" or "history of 6 runs of the device model". The runs it judges against
  cannot widen it: an earlier run more than ``OUTLIER_FLOORS`` floors from the baseline is left out (and named),
  and the band stays within the baseline's median ± the kind's floor, the band no history gives;
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


A run's **boards** are every board its rows name (``gpu.core.boards.run_boards``): one for a one-GPU run, all of a
node's GPUs for a peer matrix. Two runs are of "the same board" when they name the same set of boards (the same
node, for peer runs); a point between two GPUs is keyed by its pair, so its history is that pair's.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpu.core import boards, text
from gpu.core.stats import SLOWER, verdict
from gpu.results.analysis.points import _key, key_columns, point_kind, point_label

MIN_HISTORY = 3
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


def floor(kind: str, one_board: bool = False) -> float:
    """The kind's run-to-run floor; between runs of one board, its one-board floor where one was measured."""
    if one_board and kind in ONE_BOARD_FLOORS:
        return min(ONE_BOARD_FLOORS[kind], RUN_TO_RUN_FLOORS[kind])
    return RUN_TO_RUN_FLOORS[kind]


def board_of(frame: pd.DataFrame) -> str | None:
    """The UUID of the one GPU board a run was measured on, or None when it names none or several (a peer run)."""
    return boards.one_board(frame)


def boards_of(frame: pd.DataFrame) -> frozenset[str]:
    """Every board a run names, as devices and as peers (a node's GPUs for a peer run; empty: it names none)."""
    return frozenset(boards.run_boards(frame))


def same_board(first: pd.DataFrame, second: pd.DataFrame) -> bool:
    """Whether two runs were measured on the same board, or for runs that span several boards (a node's peer
    matrix) on the same set of boards: then a point, keyed by its GPU pair, is the same pair of boards."""
    mine = boards_of(first)
    return bool(mine) and mine == boards_of(second)


def listed_boards(runs: pd.DataFrame) -> pd.Series:
    """The boards of each run of a listing (``Catalog.runs``/``RunStore.runs``: its ``boards``, else ``gpu_uuid``)."""
    if "boards" in runs.columns:
        return runs["boards"].map(lambda b: frozenset(b) if isinstance(b, tuple | list | frozenset | set) else
                                  frozenset())
    if "gpu_uuid" in runs.columns:
        return runs["gpu_uuid"].map(lambda u: frozenset(boards.named_uuids([u])))
    return pd.Series([frozenset()] * len(runs), index=runs.index, dtype=object)


BOARD_HISTORY, MODEL_HISTORY = "this board", "the device model"  # whose history a band came from


OUTLIER_FLOORS = 5  # an earlier run more than this many of its kind's floors from the baseline is left out of it


def _usable(medians) -> list[tuple[float, str | None]]:
    """(median, run id) of each usable earlier median; a bare number is a median whose run is not named."""
    pairs = [m if isinstance(m, tuple) else (m, None) for m in medians]
    return [(float(m), run) for m, run in pairs if m and m > 0]


def run_to_run_band(kind: str, baseline_median: float, earlier_medians=(), one_board: bool = False,
                    board_medians=()) -> dict:
    """Where unchanged software puts the candidate's median, on a log scale: ``center`` ± ``half_width``. When both
    runs name the same board (``one_board``): from the board's own earlier medians (``board_medians``) when there are
    ``MIN_HISTORY`` or more, else the baseline ± the kind's one-board floor; never from the model's history, which
    mixes boards that differ by up to 13 % and would hide a board's own change. Otherwise from the device model's
    earlier medians (``earlier_medians``) when there are ``MIN_HISTORY`` or more, else the baseline ± the floor.

    Earlier medians are numbers or (median, run id) pairs. The history cannot be turned against the gate that reads
    it: an earlier run more than ``OUTLIER_FLOORS`` of the kind's floors from the baseline's median is left out
    (``left_out``: an import that lies, or a run of other software), and the band never reaches beyond the
    baseline's median ± the kind's floor, the band that no history gives: a history narrows the band, never widens
    it. ``runs`` names the runs that made it."""
    sources = ((board_medians, BOARD_HISTORY),) if one_board else ((earlier_medians, MODEL_HISTORY),)
    cap = floor(kind)
    left_out: tuple = ()
    for medians, whose in sources:
        usable = _usable(medians)
        if not usable:
            continue
        logs = np.log(np.asarray([m for m, _ in usable], dtype=float))
        kept = np.abs(logs - math.log(baseline_median)) <= OUTLIER_FLOORS * cap
        left_out = tuple(run for (_, run), keep in zip(usable, kept, strict=True) if not keep and run)
        earlier = logs[kept]
        if earlier.size < MIN_HISTORY:
            continue
        from scipy.stats import t

        n = earlier.size
        half = float(t.ppf(0.5 + HISTORY_LEVEL / 2, n - 1) * earlier.std(ddof=1) * math.sqrt(1 + 1 / n))
        center = float(earlier.mean())
        # Within the baseline's median ± the floor: at worst the band of a store with no history.
        low = max(center - half, math.log(baseline_median) - cap)
        high = min(center + half, math.log(baseline_median) + cap)
        runs = tuple(run for (_, run), keep in zip(usable, kept, strict=True) if keep and run)
        if low <= high:
            return {"center": (low + high) / 2, "half_width": (high - low) / 2,
                    "source": f"history of {n} runs of {whose}", "runs": runs, "left_out": left_out}
        left_out = (*left_out, *runs)  # the baseline lies outside its own history: judged by its floor alone
    narrow = one_board and kind in ONE_BOARD_FLOORS
    return {"center": math.log(baseline_median), "half_width": floor(kind, narrow),
            "source": f"{kind} {'one-board ' if narrow else ''}floor", "runs": (), "left_out": left_out}


def runs_off_their_history(frames: list[pd.DataFrame]) -> dict[str, tuple[int, int]]:
    """Run id → (points off, points compared) for each run of ``frames`` (runs of one experiment on one board or
    model) whose median lies more than ``OUTLIER_FLOORS`` of its kind's floors from the median of all of them on more
    than half of its points: a run that does not hold what the others measured. Needs ``MIN_HISTORY`` runs."""
    frames = [f for f in frames if not f.empty]
    if len(frames) < MIN_HISTORY:
        return {}
    experiment = _first(frames[0], "experiment")
    keys = key_columns(experiment)
    by_point: dict[tuple, list[tuple[str, float, str]]] = {}
    for frame in frames:
        for row in frame.to_dict("records"):
            if row["median_ms"] and row["median_ms"] > 0:
                by_point.setdefault(tuple(_key(row[k]) for k in keys), []).append(
                    (str(row["run_id"]), math.log(row["median_ms"]), point_kind(experiment, row)))
    counts: dict[str, list[int]] = {}
    for measured in by_point.values():
        if len(measured) < MIN_HISTORY:
            continue
        middle = float(np.median([log for _, log, _ in measured]))
        for run, log, kind in measured:
            tally = counts.setdefault(run, [0, 0])
            tally[0] += abs(log - middle) > OUTLIER_FLOORS * floor(kind)
            tally[1] += 1
    return {run: (off, total) for run, (off, total) in counts.items() if off * 2 > total}


def band_runs_text(table: pd.DataFrame) -> str:
    """Which earlier runs made the run-to-run bands of a compare table, and which were left out of them as lying
    far outside their history (on how many points): '' when no band came from a history."""
    if table.empty or "run_to_run_runs" not in table.columns:
        return ""
    made = sorted({run for runs in table["run_to_run_runs"] for run in runs})
    out: dict[str, int] = {}
    for runs in table["run_to_run_left_out"]:
        for run in runs:
            out[run] = out.get(run, 0) + 1
    parts = []
    if made:
        parts.append(f"Bands made from {text.count(len(made), 'earlier run')}: {', '.join(made)}.")
    if out:
        named = ", ".join(f"{run} (on {text.count(count, 'point')})" for run, count in sorted(out.items()))
        parts.append(f"Left out of the history, more than {OUTLIER_FLOORS} run-to-run floors from the baseline: "
                     f"{named}; a "
                     "stored run that far from its board's or model's other runs is another setup, other software, "
                     "or an import that does not hold what was measured.")
    return " ".join(parts)


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


def _same_history(run, device: str, profile: str, before: pd.Timestamp | None) -> bool:
    """Whether a run (a frame's first row or a catalog row) belongs to a candidate's history: the same device
    model, the same profile family (precise runs are not judged by quick interactive ones), measured before it."""
    when = _when(run["timestamp"])
    return (str(run["device_name"]) == device and str(run["profile"]).split("/")[0] == profile.split("/")[0]
            and when is not None and before is not None and when < before)


def earlier_medians(baseline, candidate, earlier, keyed, board: frozenset[str] | None = None) -> dict:
    """Point key → (median, timer, run id) of each run in the candidate's history (of its model, or of the runs that
    name the boards ``board`` only). Empty when the baseline is of another device: a history of one device says nothing
    about the gap between two."""
    device, profile = _first(candidate, "device_name"), _first(candidate, "profile")
    if _first(baseline, "device_name") != device:
        return {}
    before = _when(_first(candidate, "timestamp"))
    runs = {_first(f, "run_id"): f for f in [baseline, *earlier] if not f.empty
            and _same_history(f.iloc[0], device, profile, before) and (board is None or boards_of(f) == board)
            and _first(f, "run_id") != _first(candidate, "run_id")}
    medians: dict = {}
    for frame in sorted(runs.values(), key=lambda f: _when(_first(f, "timestamp")))[-HISTORY_RUNS:]:
        for key, row in keyed(frame).items():
            medians.setdefault(key, []).append((float(row["median_ms"]), row.get("timer"), _first(frame, "run_id")))
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
    if same_board(baseline, candidate):
        on_board = list(mine[listed_boards(mine) == boards_of(candidate)].tail(HISTORY_RUNS)["run_id"])
        newest += [run_id for run_id in on_board if run_id not in newest]
    return [catalog.load(run_id) for run_id in newest]


def history(frames: list[pd.DataFrame], point: dict) -> pd.DataFrame:
    """One point of one device across runs in time order: median with min/max per run, and whether the run
    regressed beyond noise against the run before it (run-to-run noise judged from the runs before it of the same
    profile family and timer, as ``compare`` does)."""
    experiment = frames[0]["experiment"].iloc[0] if frames else None
    keys = key_columns(experiment) if experiment else []
    rows, previous, previous_frame, earlier = [], None, None, []
    for frame in sorted(frames, key=lambda f: _when(f["timestamp"].iloc[0]) or pd.Timestamp.min.tz_localize("UTC")):
        # element by element: an empty coordinate (None) matches an empty one, which pandas' == never does
        same = [frame[k].map(lambda v, want=_key(point[k]): _key(v) == want).astype(bool) for k in keys]
        match = frame[np.logical_and.reduce(same)] if keys else frame.iloc[0:0]
        if match.empty:
            continue
        row = match.iloc[0]
        if previous is None:
            result = {"verdict": "first", "change": math.nan, "p_value": math.nan, "run_to_run_source": None}
        else:
            mine = boards_of(frame)
            on_board = [r for r, theirs in earlier if mine and theirs == mine][-HISTORY_RUNS:]
            band = run_to_run_band(point_kind(experiment, row), float(np.median(previous["samples_ms"])),
                                   _same_method([r for r, _ in earlier][-HISTORY_RUNS:], row),
                                   same_board(previous_frame, frame),
                                   _same_method(on_board, row))
            result = verdict(previous["samples_ms"], row["samples_ms"], band=band)
        rows.append({"run_id": row["run_id"], "timestamp": row["timestamp"], "device_name": row["device_name"],
                     "gpu_uuid": board_of(frame), "median_ms": row["median_ms"], "min_ms": row["min_ms"],
                     "max_ms": row["max_ms"], "gbps": row["gbps"], "verdict": result["verdict"],
                     "change": result["change"], "regressed": result["verdict"] == SLOWER,
                     "run_to_run_source": result["run_to_run_source"]})
        previous, previous_frame = row, frame
        earlier.append((row, boards_of(frame)))
    return pd.DataFrame(rows)


def _same_method(rows, row) -> list[float]:
    """The medians of ``rows`` measured as ``row`` was: the same timer and profile family."""
    return [r["median_ms"] for r in rows if r["timer"] == row["timer"]
            and str(r["profile"]).split("/")[0] == str(row["profile"]).split("/")[0]]


def against_median(rows: pd.DataFrame, judged) -> None:
    """Each row's ``ratio`` to its ``median`` and its ``deviation`` from it in run-to-run floors (its ``floor``),
    NaN where not ``judged`` (too few to make a median): how a board's figure (``fleet``) and a node's link
    (``fleet_links``) are read against their peers, in place."""
    rows["ratio"] = rows["value"] / rows["median"]
    rows["deviation"] = np.where(judged, (rows["ratio"] - 1) / rows["floor"], np.nan)
