"""Stream-overlap arithmetic and timelines, in pure Python (no CUDA): what the Streams page computes.

* ``issue_plan`` is the order in which a pipeline's operations are enqueued: chunk ``c`` goes to stream
  ``c % streams``; *depth-first* issues each chunk's H2D → kernel → D2H before the next chunk,
  *breadth-first* issues every H2D, then every kernel, then every D2H. *Staged* gives each stage its own
  stream instead (all H2D on one, kernels on a second, D2H on a third; ``STAGED_STREAMS``), and the worker
  chains a chunk's stages with events: each copy engine then works through its direction in chunk order,
  never waiting behind the other direction's copy on a shared stream. On the H200 that brings a copy-bound
  pipeline within ~5–6 % of the duplex-aware bound, against ~9 % for the best round-robin configuration.
* ``pipeline_bound`` is the best a pipeline can do with the copy engines the device has (its
  ``ASYNC_ENGINE_COUNT``): with two or more, H2D, kernels and D2H all overlap and the bound is the largest
  of the three sums; with one, the two copy directions share it; with none, nothing overlaps.
* ``duplex_bound`` adds what the link can carry with both directions busy: H2D and D2H share PCIe, so
  together they move less than twice one direction alone (on the H200 100 GB/s, not 2 × 55). The bound used
  for efficiency is the larger of the two. The duplex rate is measured in the same sitting as the
  pipelines and while both directions are busy: the whole size both ways after each of their samples, each
  direction in 8 timed copies (a ``bidir_paired`` row per chunk count, its samples from
  ``timelines.both_busy_ms``), read at the fastest tenth of those samples (``duplex_ms``) and stated with their
  spread (``duplex_cv``). A run recorded before those rows uses its ``bidir_both`` point instead
  (``duplex_paired`` false); a run with neither falls back to the copy-engine bound and says so
  (``bound_kind``). Measured apart from the pipelines and over the tail where one direction runs alone, the bound
  was beaten by 4 % (0.962× on an H100); built this way, 40 pipelines over 20 reruns on an H100 and an H200 came
  out at 1.036× to 1.108× of it.
* ``overlap_efficiency`` = (serial − pipeline) / (serial − bound): 0 when streams won nothing, 1 when the
  pipeline reached the bound.
* ``overlap_summary`` names the best pipeline among the configurations that can overlap (≥ 2 chunks and
  ≥ 2 streams) and whether it beats serial beyond the noise (``gain_measurable``): a two-sided Mann-Whitney
  test on both points' samples and a difference beyond both CVs, as ``gpu.results.compare.verdict`` decides.

The timelines of a pipeline's operations (``intervals``) are read in ``gpu.core.timelines``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from gpu.core import stats, text

if TYPE_CHECKING:  # imported where a table is built: the Streams declaration imports this, and loads no pandas
    import pandas as pd

STAGES = ("h2d", "kernel", "d2h")
STAGE_LABELS = {"h2d": "copy H2D", "kernel": "kernel", "d2h": "copy D2H"}
ORDERS = ("depth_first", "breadth_first", "staged")
STAGED_STREAMS = len(STAGES)  # a staged pipeline uses one stream per stage, whatever stream counts were asked


def issue_plan(chunks: int, streams: int, order: str = "depth_first",
               stages: tuple[str, ...] = STAGES) -> list[tuple[int, str, int]]:
    """``(stream, op, chunk)`` in the order the host enqueues them; round-robin chunks over streams."""
    if chunks < 1 or streams < 1:
        raise ValueError("a pipeline needs at least one chunk and one stream")
    if order not in ORDERS:
        raise ValueError(f"unknown issue order '{order}' (known: {', '.join(ORDERS)})")
    if order == "depth_first":
        return [(c % streams, op, c) for c in range(chunks) for op in stages]
    if order == "staged":
        return [(STAGES.index(op), op, c) for c in range(chunks) for op in stages]
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


def duplex_bound(h2d_bytes: float, d2h_bytes: float, duplex_gbps: float) -> float:
    """The time both directions' bytes need at the rate the link reaches with both directions busy (NaN
    without a measured rate)."""
    if not duplex_gbps or not math.isfinite(duplex_gbps) or duplex_gbps <= 0:
        return math.nan
    return (h2d_bytes + d2h_bytes) / (duplex_gbps * 1e9) * 1e3


def pipeline_configs(stream_counts, orders) -> list[tuple[int, str]]:
    """The (streams, order) pipelines measured for each chunk count: every stream count in each round-robin order,
    and one staged pipeline (its stream count is its stage count)."""
    configs = []
    for order in orders:
        if order == "staged":
            configs.append((STAGED_STREAMS, order))
        else:
            configs += [(s, order) for s in stream_counts]
    return sorted(dict.fromkeys(configs), key=lambda c: (c[0], ORDERS.index(c[1]) if c[1] in ORDERS else 99))


def handoffs(plan) -> tuple[dict[int, int], set[int]]:
    """Where a chunk's next stage (H2D → kernel → D2H) runs on another stream than the stage before it: ``waits``
    maps an operation's index to the index of the operation it must wait for (through an event), ``records`` lists
    the operations after which that event is recorded. Empty for round-robin plans, whose chunks stay on one
    stream, and for two copies that are not consecutive stages (the bidirectional pair runs at once)."""
    last: dict[int, int] = {}
    waits, records = {}, set()
    for i, (stream, op, chunk) in enumerate(plan):
        previous = last.get(chunk)
        if previous is not None and plan[previous][0] != stream \
                and STAGES.index(op) == STAGES.index(plan[previous][1]) + 1:
            waits[i] = previous
            records.add(previous)
        last[chunk] = i
    return waits, records


def config_text(streams: int, chunks: int, order: str | None = None) -> str:
    """'4 streams × 32 chunks', or '3 streams (one per stage) × 32 chunks' for a staged pipeline."""
    per_stage = " (one per stage)" if order == "staged" else ""
    return f"{text.count(int(streams), 'stream')}{per_stage} × {text.count(int(chunks), 'chunk')}"


def can_overlap(chunks: int, streams: int) -> bool:
    """One chunk waits for itself at every stage; one stream runs everything in order: neither can overlap."""
    return chunks >= 2 and streams >= 2


def overlap_efficiency(serial_ms: float, pipeline_ms: float, bound_ms: float) -> float:
    """(serial − pipeline) / (serial − bound); NaN when the bound leaves nothing to gain."""
    room = serial_ms - bound_ms
    if not room > 0:
        return math.nan
    return (serial_ms - pipeline_ms) / room


PIPELINE_KEYS = ["run_id", "host_memory", "elements", "chunks", "intensity"]
BOUND_KINDS = {"duplex": "both directions at the measured duplex rate",
               "engines": "the slowest stage alone (the link's duplex rate allows more)",
               "engines_only": "the slowest stage alone (no duplex rate measured in this run)"}
BOUNDS_EXPLAINED = ("Two bounds: the copy-engine bound (the slowest of all H2D, all kernels, all D2H, each measured "
                    "alone) assumes each copy direction keeps its solo speed while the other runs; the duplex-aware "
                    "bound also divides both directions' bytes by the rate measured with H2D and D2H at once in this "
                    "run (its fastest tenth of samples: the link's combined rate comes and goes), since the two "
                    "directions share the link. Efficiency and × bound use the larger.")
NO_DUPLEX_EXPLAINED = ("This run has no bidirectional points, so the bound is the copy-engine bound alone (each "
                       "direction at its solo speed); with H2D and D2H sharing the link the real floor can be higher. "
                       "Measure with bidirectional copies for the duplex-aware bound.")


DUPLEX_QUANTILE = 0.1  # the duplex rate is read at this quantile of the bidirectional samples' times


def duplex_ms(row) -> float:
    """The time of both directions at once that the bound uses: the fastest tenth of its samples (interpolated),
    not their median. The link's combined rate comes and goes for seconds at a time (5.28 ms in one spell, up to
    6.3 ms in the next, on the same H200 and buffers; docs, "Live answers"), while a pipeline's chunked copies
    are hit less: against the median of a slow spell a staged pipeline "beat" its bound (0.955× on an H200,
    0.932× on an H100). What the link can carry is what it carried in its fast spells. Without samples: the
    fastest sample (``min_ms``), else the median."""
    samples = getattr(row, "samples_ms", None)
    if samples is not None and len(samples) > 0:
        return float(np.quantile(np.asarray(samples, dtype=float), DUPLEX_QUANTILE))
    fastest = getattr(row, "min_ms", None)
    return float(fastest) if fastest is not None and fastest == fastest and fastest > 0 else float(row.median_ms)


def duplex_gbps(row) -> float:
    """GB/s of a ``bidir_both`` row (both directions' bytes) at ``duplex_ms``; NaN without a positive time."""
    ms = duplex_ms(row)
    return float(row.bytes) / (ms * 1e-3) / 1e9 if ms > 0 else math.nan


def duplex_rates(frame: pd.DataFrame) -> dict[tuple, float]:
    """GB/s of H2D and D2H at once (the ``bidir_both`` point, at ``duplex_ms``) per run, host memory and size."""
    both = frame[frame["variant"] == "bidir_both"]
    return {(r.run_id, r.host_memory, int(r.elements)): rate for r in both.itertuples()
            if (rate := duplex_gbps(r)) == rate}


PAIRED_VARIANT = "bidir_paired"  # gpu.experiments.streams: both ways while both run, between the pipelines' samples


def paired_rates(frame: pd.DataFrame) -> dict[tuple, tuple[float, float]]:
    """Per run, host memory, size, chunk count and intensity (``PIPELINE_KEYS``): GB/s of both directions at once,
    sampled between those pipelines' own samples (at ``duplex_ms``), and the spread (cv) of those samples. A bound
    built from them was measured in the same sitting as the pipelines it bounds, so the link's drift over seconds
    cannot put it above them."""
    paired = frame[frame["variant"] == PAIRED_VARIANT] if "variant" in frame else frame.iloc[0:0]
    return {tuple(getattr(r, k) for k in PIPELINE_KEYS): (rate, float(r.cv)) for r in paired.itertuples()
            if (rate := duplex_gbps(r)) == rate}


def pipeline_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per measured pipeline configuration, beside the serial time and the three sums of the same
    host memory, size, chunk count and intensity from the same run, with bound, efficiency and speedup."""
    import pandas as pd

    columns = ["run_id", "host_memory", "bytes", "elements", "chunks", "streams", "issue_order", "intensity",
               "pipeline_ms", "serial_ms", "h2d_ms", "kernel_ms", "d2h_ms", "engine_bound_ms", "duplex_gbps",
               "duplex_cv", "duplex_paired", "duplex_bound_ms", "bound_ms", "bound_kind", "efficiency",
               "engine_efficiency", "speedup", "vs_bound", "vs_engine_bound", "cv", "serial_cv", "samples_ms",
               "serial_samples_ms", "intervals", "conditions"]
    pipelines = frame[frame["variant"] == "pipeline"]
    if pipelines.empty:
        return pd.DataFrame(columns=columns)
    parts = {}
    for variant in ("serial", "h2d_alone", "kernel_alone", "d2h_alone"):
        part = frame[frame["variant"] == variant]
        parts[variant] = dict(zip(map(tuple, part[PIPELINE_KEYS].to_numpy().tolist()),
                                  part[["median_ms", "cv", "samples_ms"]].to_numpy().tolist()
                                  if "samples_ms" in part else part[["median_ms", "cv"]].to_numpy().tolist(),
                                  strict=True))
    duplex, paired = duplex_rates(frame), paired_rates(frame)
    rows = []
    for row in pipelines.itertuples():
        key = tuple(getattr(row, k) for k in PIPELINE_KEYS)
        serial_row = parts["serial"].get(key) or [math.nan, math.nan, None]
        serial = serial_row[0]
        h2d, kernel, d2h = (parts[v].get(key, [math.nan])[0] for v in ("h2d_alone", "kernel_alone", "d2h_alone"))
        engines = getattr(row, "async_engine_count", None)
        engine_bound = pipeline_bound(h2d, kernel, d2h, engines)
        size = int(row.elements) * 4
        same_sitting = paired.get(key)
        rate, rate_cv = same_sitting or (duplex.get((row.run_id, row.host_memory, int(row.elements)), math.nan),
                                         math.nan)
        both = duplex_bound(size, size, rate)
        bound = max(engine_bound, both) if math.isfinite(both) else engine_bound
        rows.append({
            "run_id": row.run_id, "host_memory": row.host_memory, "bytes": size,
            "elements": int(row.elements), "chunks": int(row.chunks), "streams": int(row.streams),
            "issue_order": row.issue_order, "intensity": int(row.intensity), "pipeline_ms": row.median_ms,
            "serial_ms": serial, "h2d_ms": h2d, "kernel_ms": kernel, "d2h_ms": d2h, "engine_bound_ms": engine_bound,
            "duplex_gbps": rate, "duplex_cv": rate_cv, "duplex_paired": same_sitting is not None,
            "duplex_bound_ms": both, "bound_ms": bound,
            "bound_kind": BOUND_KINDS["duplex" if math.isfinite(both) and both > engine_bound else
                                      "engines" if math.isfinite(both) else "engines_only"],
            "efficiency": overlap_efficiency(serial, row.median_ms, bound),
            "engine_efficiency": overlap_efficiency(serial, row.median_ms, engine_bound),
            "speedup": serial / row.median_ms if row.median_ms > 0 else math.nan,
            "vs_bound": row.median_ms / bound if bound > 0 else math.nan,
            "vs_engine_bound": row.median_ms / engine_bound if engine_bound > 0 else math.nan, "cv": row.cv,
            "serial_cv": serial_row[1], "samples_ms": getattr(row, "samples_ms", None),
            "serial_samples_ms": serial_row[2] if len(serial_row) > 2 else None, "intervals": row.intervals,
            "conditions": getattr(row, "conditions", None),  # the pipeline point's, as its witness saw it
        })
    return pd.DataFrame(rows, columns=columns)


def gain_beyond_noise(row) -> bool:
    """Whether a pipeline beats its serial run beyond the noise of both (``stats.verdict`` on their samples, as
    Compare judges; without samples, the medians must differ by more than either CV and 1 %)."""
    pipeline, serial = row.get("samples_ms"), row.get("serial_samples_ms")
    if not hasattr(pipeline, "__len__") or not hasattr(serial, "__len__") or len(pipeline) == 0 or len(serial) == 0:
        pipeline, serial = [row["pipeline_ms"]], [row["serial_ms"]]
        noise = max(float(row.get("cv") or 0), float(row.get("serial_cv") or 0), 0.01)
        return bool(row["pipeline_ms"] < row["serial_ms"] * (1 - noise))
    return stats.verdict(serial, pipeline, row.get("serial_cv"), row.get("cv"))["verdict"] == "faster"


def best_pipeline(table: pd.DataFrame) -> pd.Series:
    """The fastest pipeline among those that can overlap anything (``can_overlap``); the fastest of all only when
    none can."""
    can = table[[can_overlap(c, s) for c, s in zip(table["chunks"], table["streams"], strict=True)]]
    return (can if not can.empty else table).sort_values("pipeline_ms").iloc[0]


def overlap_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per host memory (and intensity): the best pipeline among the configurations that can overlap at all
    (≥ 2 streams and ≥ 2 chunks; none of them: ``best_ms`` NaN), whether its gain over serial is beyond the noise
    (``gain_measurable``), and the median overlap efficiency over those configurations, which one noisy point
    cannot sway."""
    import pandas as pd

    rows = []
    for (host, intensity), part in table.groupby(["host_memory", "intensity"], sort=False):
        can = part[[can_overlap(c, s) for c, s in zip(part["chunks"], part["streams"], strict=True)]]
        row = {"host_memory": host, "intensity": intensity, "configurations": len(can),
               "median_efficiency": float(can["efficiency"].median()) if len(can) else math.nan,
               "median_speedup": float(can["speedup"].median()) if len(can) else math.nan,
               "median_cv": float(part["cv"].median())}
        if len(can):
            best = best_pipeline(can)
            row.update({"best_streams": int(best["streams"]), "best_chunks": int(best["chunks"]),
                        "best_order": best["issue_order"], "best_ms": best["pipeline_ms"],
                        "best_serial_ms": best["serial_ms"], "best_bound_ms": best["bound_ms"],
                        "best_engine_bound_ms": best["engine_bound_ms"],
                        "best_duplex_bound_ms": best["duplex_bound_ms"], "bound_kind": best["bound_kind"],
                        "best_duplex_cv": best["duplex_cv"], "best_duplex_paired": bool(best["duplex_paired"]),
                        "best_efficiency": best["efficiency"], "best_speedup": best["speedup"],
                        "best_vs_bound": best["vs_bound"], "best_vs_engine_bound": best["vs_engine_bound"],
                        "best_cv": best["cv"], "gain_measurable": gain_beyond_noise(best)})
        rows.append(row)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


SUMMARY_COLUMNS = ["host_memory", "intensity", "configurations", "median_efficiency", "median_speedup", "median_cv",
                   "best_streams", "best_chunks", "best_order", "best_ms", "best_serial_ms", "best_bound_ms",
                   "best_engine_bound_ms", "best_duplex_bound_ms", "bound_kind", "best_duplex_cv",
                   "best_duplex_paired", "best_efficiency", "best_speedup",
                   "best_vs_bound", "best_vs_engine_bound", "best_cv", "gain_measurable"]


def beyond_bound_notes(table: pd.DataFrame) -> list[str]:
    """Why some pipelines beat their bound, by which bound it was: a bound is a measurement too."""
    notes = []
    beyond = table[table["efficiency"] > 1]
    if (beyond["bound_ms"] == beyond["kernel_ms"]).any():
        notes.append("Efficiency above 100 % where the kernels set the bound: kernels of different streams ran side by "
                     "side and filled each other's last wave, which kernels queued on one stream cannot; the bound, "
                     "built from each stage measured alone, is then not a hard floor.")
    if (beyond["bound_kind"] == BOUND_KINDS["duplex"]).any():
        notes.append("Efficiency above 100 % where the link sets the bound: the duplex rate comes from whole-size "
                     "copies both ways at once, so the bound carries their noise (its spread is given as cv).")
    return notes


def gain_text(summary_row) -> str:
    """'overlap efficiency 91 %' when the best pipeline beats serial beyond the noise, else 'no measurable
    overlap' (a percentage of noise would be a number without meaning)."""
    if not summary_row.get("gain_measurable"):
        return "no measurable overlap"
    return f"overlap efficiency {text.percent(summary_row['best_efficiency'])}"


def headline(summary_row) -> str:
    """One Markdown line per host memory for the Streams page: the best pipeline that can overlap against serial
    and both bounds, or why there is no best."""
    r = summary_row
    host = f"**{r['host_memory']}**"
    if not r["configurations"]:
        return f"{host}: no configuration here can overlap: choose at least 2 chunks and 2 streams"
    best = config_text(r["best_streams"], r["best_chunks"], r["best_order"])
    many = r["configurations"] > 1
    spread = (f"; across the {r['configurations']} configurations with ≥ 2 streams and ≥ 2 chunks the median "
              f"efficiency is {text.percent(r['median_efficiency'])} ({r['median_speedup']:.2f}× serial)") \
        if many else ""
    if not r["gain_measurable"]:
        spread = (f"; the median of the {r['configurations']} configurations that can overlap is "
                  f"{r['median_speedup']:.2f}× serial") if many else ""
        return (f"{host}: **no measurable overlap**: the fastest configuration that can overlap, {best}, takes "
                f"{r['best_ms']:.2f} ms against {r['best_serial_ms']:.2f} ms serial, within the noise of the two "
                f"(cv {text.percent(r['best_cv'], 1)}){spread}")
    duplex = r["best_duplex_bound_ms"]
    sitting = (f" (the link both ways between its own samples, spread cv {text.percent(r['best_duplex_cv'], 1)})"
               if r.get("best_duplex_paired") else "")
    bounds = (f"{r['best_vs_bound']:.2f}× the duplex-aware bound of {r['best_bound_ms']:.2f} ms{sitting}, "
              f"{r['best_vs_engine_bound']:.2f}× the copy-engine bound of {r['best_engine_bound_ms']:.2f} ms"
              if duplex == duplex else f"{r['best_vs_bound']:.2f}× the copy-engine bound of "
              f"{r['best_bound_ms']:.2f} ms; no duplex rate was measured in this run, so the bound assumes each "
              "direction keeps its solo speed")
    return (f"{host}: the best, {best}, takes **{r['best_ms']:.2f} ms** against {r['best_serial_ms']:.2f} ms serial "
            f"({r['best_speedup']:.2f}×): {bounds}; overlap efficiency **{text.percent(r['best_efficiency'])}**"
            f"{spread}; "
            f"typical noise cv {text.percent(r['median_cv'], 1)}")
