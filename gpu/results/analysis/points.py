"""Compare's point vocabulary: which columns key a point of an experiment (its ``KEY_COLUMNS``: for a peer
experiment the pair, ``gpu_index`` and ``peer_index``, is part of every key), a point in words, the kind of path it
measures (which sets how far it moves between runs), its device's theoretical limit, and why two runs share no
point. Pure pandas: no Streamlit, no CUDA.
"""

from __future__ import annotations

import math

import pandas as pd

from gpu.core import schema, stats, text
from gpu.core.units import format_bytes
from gpu.experiments import get_experiment, registry

SMALL_COPY_BYTES = stats.SMALL_COPY_BYTES
# Kernels that take 100 µs and more moved ≤ 0.19 % between runs of one day (50 points); shorter ones 0.3–18 %.
SHORT_KERNEL_MS = 0.1
PAIR_COLUMNS = ("gpu_index", "peer_index")  # a point between two GPUs: 'GPU 2 → GPU 5'


def key_columns(experiment: str) -> list[str]:
    return list(get_experiment(experiment).KEY_COLUMNS)


def point_label(experiment: str, row) -> str:
    """A point in words: the experiment's own ``point_label(row)`` where it declares one ('64 KiB pageable D2H'),
    else the variant and its key parameters."""
    declared = getattr(get_experiment(experiment), "point_label", None)
    if declared is not None:
        return declared(row)
    parts = [str(row["variant"])]
    keys = key_columns(experiment)
    pair = [schema.key_value(row.get(c)) for c in PAIR_COLUMNS]
    if all(c in keys for c in PAIR_COLUMNS) and None not in pair:
        parts.append(f"GPU {pair[0]} → GPU {pair[1]}")  # the pair, in the order the copy goes
    for column in keys:
        value = schema.key_value(row.get(column))
        if column == "variant" or value is None or (column in PAIR_COLUMNS and None not in pair):
            continue
        if column in schema.SIZE_COLUMNS and registry.BY_NAME[experiment].byte_labels:
            parts.append(format_bytes(value))
        elif column in COUNT_COLUMNS:
            parts.append(text.count(int(value), COUNT_COLUMNS[column]))
        else:
            parts.append(LABEL_FORMATS.get(column, column + " {}").format(value))
    return " · ".join(parts)


COUNT_COLUMNS = {"chunks": "chunk", "streams": "stream"}  # key columns that count things: '16 chunks', '4 streams'
LABEL_FORMATS = {"block_size": "block {}", "elements": "{:,} elements", "host_memory": "{}", "issue_order": "{}",
                 "intensity": "intensity {}", "gpu_index": "GPU {}", "peer_index": "peer GPU {}", "timer": "{}",
                 "shared_bytes_per_block": "{} B shared"}


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


KEY_NAMES = {"bytes": "sizes", "variant": "modes", "direction": "directions", "block_size": "block sizes",
             "include_alloc": "allocation settings", "elements": "element counts", "stride": "strides",
             "offset": "offsets", "matrix_side": "matrix sides", "chains": "chain counts",
             "working_set_bytes": "working sets", "piece_bytes": "piece sizes", "extra_registers": "extra registers",
             "group": "groups", "host_memory": "host memory kinds",
             "chunks": "chunk counts", "streams": "stream counts", "issue_order": "issue orders",
             "intensity": "intensities", "shared_bytes_per_block": "shared memory sizes", "gpu_index": "GPUs",
             "peer_index": "peer GPUs", "timer": "timers"}


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
        shown = [format_bytes(v) if column in schema.SIZE_COLUMNS and v is not None else str(v) for v in ordered]
        return text.shorten(", ".join(shown[:4]) + (f" and {len(shown) - 4} more" if len(shown) > 4 else ""), 60)

    differing = [f"different {KEY_NAMES.get(c, c)} (baseline {values(baseline, c)}; candidate {values(candidate, c)})"
                 for c in keys if {schema.key_value(v) for v in baseline[c]} != {schema.key_value(v)
                                                                                 for v in candidate[c]}]
    return "These runs share no points: " + ("; ".join(differing) if differing else
                                             "different combinations of the same settings") + "."
