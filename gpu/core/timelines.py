"""A pipeline's timeline, in pure Python (no CUDA): the ``intervals`` the Streams worker records and how the Streams
page lays them on the copy engines.

The worker records a CUDA event before and after every operation, each on the operation's
stream, relative to one origin event. An event *before* an operation completes when the stream reaches
it, not when an engine takes it up, so two copies on different streams can look as if they ran at once
on one copy engine. ``engine_schedule`` therefore starts a bar at the later of "ready" (its stream got
there) and the end of the previous operation on the same engine, and keeps the waiting time apart.

Intervals travel in the results' ``intervals`` column as JSON: a list of
``[stream, op, chunk, ready_ms, end_ms, bytes]`` (documented in ``gpu.core.schema``).
"""

from __future__ import annotations

import json
import math

import pandas as pd

from gpu.core.overlap import STAGES

INTERVAL_FIELDS = ["stream", "op", "chunk", "ready_ms", "end_ms", "bytes"]


def encode_intervals(intervals) -> str:
    """JSON for the ``intervals`` column; times rounded to nanoseconds."""
    return json.dumps([[int(s), str(op), int(c), round(float(r), 6), round(float(e), 6), int(b)]
                       for s, op, c, r, e, b in intervals], separators=(",", ":"))


def decode_intervals(text) -> pd.DataFrame:
    """The intervals of one recorded run as a frame; ValueError (with the reason) for damaged data."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        raise ValueError("this point has no recorded timeline")
    try:
        items = json.loads(text) if isinstance(text, str | bytes) else list(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the recorded timeline is not valid JSON: {exc}") from None
    frame = pd.DataFrame(items, columns=INTERVAL_FIELDS) if items else pd.DataFrame(columns=INTERVAL_FIELDS)
    if frame.empty:
        raise ValueError("the recorded timeline is empty")
    bad_op = set(frame["op"]) - set(STAGES)
    if bad_op:
        raise ValueError(f"the recorded timeline has unknown operations: {', '.join(map(str, sorted(bad_op)))}")
    for column in ("ready_ms", "end_ms"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    if frame[["ready_ms", "end_ms"]].isna().any().any() or (frame["end_ms"] < frame["ready_ms"]).any() \
            or (frame["ready_ms"] < 0).any():
        raise ValueError("the recorded timeline has an operation that ends before it starts or before the origin")
    return frame.astype({"stream": int, "chunk": int, "bytes": int})


def engine_of(op: str, async_engines: int | None = None) -> str:
    """Which engine runs ``op``: one copy engine per direction when the device has two or more."""
    if op == "kernel":
        return "compute"
    if async_engines is not None and not (isinstance(async_engines, float) and math.isnan(async_engines)) \
            and int(async_engines) < 2:
        return "copy engine"
    return f"copy engine {'H2D' if op == 'h2d' else 'D2H'}"


def engine_schedule(intervals: pd.DataFrame, async_engines: int | None = None) -> pd.DataFrame:
    """Adds ``engine``, ``start_ms`` (the later of ready and the previous end on that engine), ``wait_ms``
    and ``run_ms``. Operations on one engine are taken in the order they finished."""
    frame = intervals.copy()
    frame["engine"] = [engine_of(op, async_engines) for op in frame["op"]]
    frame["start_ms"] = frame["ready_ms"].astype(float)
    for _, part in frame.sort_values(["end_ms", "ready_ms"]).groupby("engine", sort=False):
        previous_end = -math.inf
        for index in part.index:
            start = max(frame.at[index, "ready_ms"], min(previous_end, frame.at[index, "end_ms"]))
            frame.at[index, "start_ms"] = start
            previous_end = max(previous_end, frame.at[index, "end_ms"])
    frame["wait_ms"] = frame["start_ms"] - frame["ready_ms"]
    frame["run_ms"] = frame["end_ms"] - frame["start_ms"]
    return frame


def busy_fraction(schedule: pd.DataFrame) -> dict[str, float]:
    """Share of the timeline's span each engine spent running (from ``engine_schedule``)."""
    span = schedule["end_ms"].max() - schedule["ready_ms"].min()
    if not span > 0:
        return {}
    return {engine: float(part["run_ms"].sum() / span) for engine, part in schedule.groupby("engine")}


def both_busy_ms(intervals) -> float:
    """The time both directions' bytes take at the rate the link carries while both directions are busy: H2D and
    D2H copies in chunks on two streams, started together (``intervals`` as the worker records them). The phase ends
    when the first direction has finished; by then the other has moved its finished chunks and the elapsed share of
    the chunk in flight. Two whole copies timed together would also count the tail where one direction runs alone,
    at its solo rate (about 55 GB/s on PCIe 5 against about 95 together), so the bound built on them came out
    above what a chunked pipeline, whose directions overlap almost throughout, reached (0.978× on an H100)."""
    rows = [(int(s), str(op), float(r), float(e), int(b)) for s, op, _c, r, e, b in intervals]
    by_direction = {op: sorted((r, e, b) for _s, o, r, e, b in rows if o == op) for op in ("h2d", "d2h")}
    if not by_direction["h2d"] or not by_direction["d2h"]:
        raise ValueError("both directions are needed to time them while both are busy")
    both_until = min(chunks[-1][1] for chunks in by_direction.values())
    if not both_until > 0:
        return math.nan
    moved, total = 0.0, 0
    for chunks in by_direction.values():
        began = 0.0
        for ready, end, nbytes in chunks:
            total += nbytes
            start = max(ready, began)  # a stream runs its copies one after another
            if end <= both_until:
                moved += nbytes
            elif start < both_until:
                moved += nbytes * (both_until - start) / (end - start)
            began = end
    return total * both_until / moved
