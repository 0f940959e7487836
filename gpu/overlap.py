"""Stream-overlap arithmetic and timelines, in pure Python (no CUDA): what the Streams page computes.

* ``issue_plan`` is the order in which a pipeline's operations are enqueued: chunk ``c`` goes to stream
  ``c % streams``; *depth-first* issues each chunk's H2D → kernel → D2H before the next chunk,
  *breadth-first* issues every H2D, then every kernel, then every D2H.
* ``pipeline_bound`` is the best a pipeline can do with the copy engines the device has (its
  ``ASYNC_ENGINE_COUNT``): with two or more, H2D, kernels and D2H all overlap and the bound is the largest
  of the three sums; with one, the two copy directions share it; with none, nothing overlaps.
* ``overlap_efficiency`` = (serial − pipeline) / (serial − bound): 0 when streams won nothing, 1 when the
  pipeline reached the bound.
* Timelines: the worker records a CUDA event before and after every operation, each on the operation's
  stream, relative to one origin event. An event *before* an operation completes when the stream reaches
  it, not when an engine takes it up, so two copies on different streams can look as if they ran at once
  on one copy engine. ``engine_schedule`` therefore starts a bar at the later of "ready" (its stream got
  there) and the end of the previous operation on the same engine, and keeps the waiting time apart.

Intervals travel in the results' ``intervals`` column as JSON: a list of
``[stream, op, chunk, ready_ms, end_ms, bytes]`` (documented in ``gpu.schema``).
"""

from __future__ import annotations

import json
import math

import pandas as pd

STAGES = ("h2d", "kernel", "d2h")
STAGE_LABELS = {"h2d": "copy H2D", "kernel": "kernel", "d2h": "copy D2H"}
ORDERS = ("depth_first", "breadth_first")
INTERVAL_FIELDS = ["stream", "op", "chunk", "ready_ms", "end_ms", "bytes"]


def issue_plan(chunks: int, streams: int, order: str = "depth_first",
               stages: tuple[str, ...] = STAGES) -> list[tuple[int, str, int]]:
    """``(stream, op, chunk)`` in the order the host enqueues them; round-robin chunks over streams."""
    if chunks < 1 or streams < 1:
        raise ValueError("a pipeline needs at least one chunk and one stream")
    if order not in ORDERS:
        raise ValueError(f"unknown issue order '{order}' (known: {', '.join(ORDERS)})")
    if order == "depth_first":
        return [(c % streams, op, c) for c in range(chunks) for op in stages]
    return [(c % streams, op, c) for op in stages for c in range(chunks)]


def pipeline_bound(h2d_ms: float, kernel_ms: float, d2h_ms: float, async_engines: int | None) -> float:
    """The shortest time the whole pipeline can take, from the three sums measured alone."""
    engines = 2 if async_engines is None or (isinstance(async_engines, float) and math.isnan(async_engines)) \
        else int(async_engines)
    if engines >= 2:
        return max(h2d_ms, kernel_ms, d2h_ms)
    if engines == 1:
        return max(h2d_ms + d2h_ms, kernel_ms)
    return h2d_ms + kernel_ms + d2h_ms


def overlap_efficiency(serial_ms: float, pipeline_ms: float, bound_ms: float) -> float:
    """(serial − pipeline) / (serial − bound); NaN when the bound leaves nothing to gain."""
    room = serial_ms - bound_ms
    if not room > 0:
        return math.nan
    return (serial_ms - pipeline_ms) / room


PIPELINE_KEYS = ["run_id", "host_memory", "elements", "chunks", "intensity"]


def pipeline_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per measured pipeline configuration, beside the serial time and the three sums of the same
    host memory, size, chunk count and intensity from the same run, with bound, efficiency and speedup."""
    columns = ["run_id", "host_memory", "bytes", "elements", "chunks", "streams", "issue_order", "intensity",
               "pipeline_ms", "serial_ms", "h2d_ms", "kernel_ms", "d2h_ms", "bound_ms", "efficiency", "speedup",
               "vs_bound", "cv", "intervals"]
    pipelines = frame[frame["variant"] == "pipeline"]
    if pipelines.empty:
        return pd.DataFrame(columns=columns)
    parts = {}
    for variant in ("serial", "h2d_alone", "kernel_alone", "d2h_alone"):
        part = frame[frame["variant"] == variant]
        parts[variant] = dict(zip(map(tuple, part[PIPELINE_KEYS].to_numpy().tolist()), part["median_ms"],
                                  strict=True))
    rows = []
    for row in pipelines.itertuples():
        key = tuple(getattr(row, k) for k in PIPELINE_KEYS)
        serial, h2d, kernel, d2h = (parts[v].get(key, math.nan) for v in
                                    ("serial", "h2d_alone", "kernel_alone", "d2h_alone"))
        engines = getattr(row, "async_engine_count", None)
        bound = pipeline_bound(h2d, kernel, d2h, engines)
        rows.append({
            "run_id": row.run_id, "host_memory": row.host_memory, "bytes": int(row.elements) * 4,
            "elements": int(row.elements), "chunks": int(row.chunks), "streams": int(row.streams),
            "issue_order": row.issue_order, "intensity": int(row.intensity), "pipeline_ms": row.median_ms,
            "serial_ms": serial, "h2d_ms": h2d, "kernel_ms": kernel, "d2h_ms": d2h, "bound_ms": bound,
            "efficiency": overlap_efficiency(serial, row.median_ms, bound),
            "speedup": serial / row.median_ms if row.median_ms > 0 else math.nan,
            "vs_bound": row.median_ms / bound if bound > 0 else math.nan, "cv": row.cv,
            "intervals": row.intervals,
        })
    return pd.DataFrame(rows, columns=columns)


def overlap_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per host memory (and intensity): the best pipeline, and the median overlap efficiency over every
    configuration that can overlap at all (≥ 2 streams and ≥ 2 chunks), which one noisy point cannot sway."""
    rows = []
    for (host, intensity), part in table.groupby(["host_memory", "intensity"], sort=False):
        best = part.sort_values("pipeline_ms").iloc[0]
        can = part[(part["streams"] >= 2) & (part["chunks"] >= 2)]
        rows.append({"host_memory": host, "intensity": intensity, "best_streams": int(best["streams"]),
                     "best_chunks": int(best["chunks"]), "best_order": best["issue_order"],
                     "best_ms": best["pipeline_ms"], "best_serial_ms": best["serial_ms"], "best_bound_ms":
                     best["bound_ms"], "best_efficiency": best["efficiency"], "best_speedup": best["speedup"],
                     "best_vs_bound": best["vs_bound"], "configurations": len(can),
                     "median_efficiency": float(can["efficiency"].median()) if len(can) else math.nan,
                     "median_speedup": float(can["speedup"].median()) if len(can) else math.nan,
                     "median_cv": float(part["cv"].median())})
    return pd.DataFrame(rows)


# --- timelines -----------------------------------------------------------------------------------------
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
