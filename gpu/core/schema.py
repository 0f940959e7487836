"""PinPoint's one results schema: every experiment returns, and every recording stores, this shape.

One row per measured point. Columns come in three groups:

* **point** – what was measured: ``run_id, experiment, variant, direction, bytes`` and the parameter
  columns (``PARAMETER_COLUMNS``; a column an experiment does not use is left empty): ``include_alloc``
  (transfers), ``group`` (a family of variants, e.g. strided or transpose), ``block_size``, ``elements``,
  ``param``/``param_value`` (the swept axis of a group and its value, e.g. stride 8),
  ``registers_per_thread``, ``shared_bytes_per_block``, ``theoretical_occupancy`` (gpu.core.occupancy) and
  ``rel_error`` (a reduction's result against float64); for the Streams page ``host_memory`` (pinned |
  pageable), ``chunks``, ``streams``, ``issue_order`` (depth_first | breadth_first | staged | serial | concurrent),
  ``intensity`` (fused multiply-adds per element) and ``intervals``, the timeline of one run of the point
  as JSON: ``[[stream, op, chunk, ready_ms, end_ms, bytes], …]`` with op in h2d | kernel | d2h and times
  from one origin event (``gpu.core.overlap`` reads it); for a measurement between two GPUs ``peer_index`` and
  ``peer_uuid`` (the ordinal and NVML UUID of the other GPU: a copy's destination, or the GPU whose memory a latency
  chase walks; the row's own device, ``gpu_index``/``gpu_uuid``, is the source) and ``link`` (what joins them, in
  words: "NVLink 4 ×18", "PCIe via host bridge", "through host (no peer access)"). For kernels ``direction`` is
  ``device`` and ``bytes`` counts the useful bytes read plus written once.
* **measurement** – ``median_ms, min_ms, max_ms, cv, samples, gbps`` (GB/s = 10^9 bytes/s of
  ``bytes`` over ``median_ms``), ``stop_reason`` (converged | budget | timeout | max_samples; budget: the
  profile's per-point time budget, scaled by the cost of one sample, was spent or one more sample would
  overrun it), ``profile``, ``timer`` (what the clock covered), ``verified`` (output checked; a wrong
  output is an error, never a row), ``sm_clock_mhz`` (median SM clock sampled by NVML while measuring),
  ``throttled`` (NVML reported a thermal/power slowdown during the point), ``samples_ms`` (every sample,
  in ms), ``conditions`` (what the GPU was doing besides PinPoint's work during the point, in words: ``clean``,
  ``not observed``, or its causes joined by ``; ``, e.g. "shared with pid 1039 (python3) for 100 % of samples; SW
  power cap in 38 % of samples"; written and read only through ``gpu.core.conditions``; empty, as in runs recorded
  before it existed, reads as ``not observed``) and ``witness`` (the raw NVML readings behind it as compact JSON text:
  sample count and interval, min/median/max SM and memory clocks and power, power limit, temperature, clock-event
  reason counts, other processes with the readings that listed them, PCIe link current and maximum, utilisation
  before the point, counter changes over it; ``gpu.device.witness`` writes it).
* **provenance** – where and when: ``device_name, compute_capability, sm_count, memory_total_bytes,
  driver_version, cuda_version, pycuda_version, pcie_gen, pcie_width, pcie_gbps_theoretical,
  hbm_gbps_theoretical, sm_clock_max_mhz, mem_clock_max_mhz, host, timestamp, git_commit, backend``,
  ``l2_bytes``, ``async_engine_count`` (the device's copy engines that run beside kernels), ``gpu_uuid`` (the
  board's UUID from NVML, ``GPU-…``: boards of one model differ by up to 12 % on some kernels, and host name,
  driver and clocks do not tell them apart), ``gpu_index`` (its CUDA ordinal in the measuring process: which GPU
  of a multi-GPU node the row measured) and ``method_version`` (a hash of the sources that measured the run: its
  sweep, kernels and the shared harness and timing code, ``gpu.experiments.method``; empty, as in runs recorded
  before it existed and in the bundled recordings, reads as unknown, never as a version; ``gpu.core.method_versions``
  reads it). A row names its own device: one run may span several boards of a node (a peer matrix), so a run's
  boards are those of its rows (``gpu.core.boards``), never its first row's. A frame has them on every row; Parquet
  files and the runs store keep what a run's rows share once per run (``gpu.core.provenance``), CSV on every row.

Parameter columns, ``l2_bytes``, ``async_engine_count``, ``gpu_uuid``, ``gpu_index``, ``method_version``,
``conditions`` and ``witness`` are optional when reading:
files recorded before a column existed load with it empty.

Column types (``TEXT_COLUMNS``, ``BOOL_COLUMNS``, ``WHOLE_COLUMNS``, ``SIGNED_COLUMNS``, the rest numbers) are
declared here once: validation, imports and the store read them from this module.

Theoretical figures come from the device itself: PCIe per direction from link generation × width
(after line encoding); HBM from memory clock × bus width × 2 (double data rate).
"""

from __future__ import annotations

import json
import math
import sys
from typing import TYPE_CHECKING

import numpy as np

from gpu.core import text
from gpu.core.errors import SchemaError

if TYPE_CHECKING:  # imported where a frame is made or read: the declarations import this module, pandas stays unloaded
    import pandas as pd

POINT_COLUMNS = ["run_id", "experiment", "variant", "direction", "bytes"]
PARAMETER_COLUMNS = [
    "include_alloc", "group", "block_size", "elements", "param", "param_value", "registers_per_thread",
    "shared_bytes_per_block", "theoretical_occupancy", "rel_error", "host_memory", "chunks", "streams",
    "issue_order", "intensity", "intervals", "peer_index", "peer_uuid", "link",
]
MEASUREMENT_COLUMNS = [
    "median_ms", "min_ms", "max_ms", "cv", "samples", "gbps", "stop_reason", "profile", "timer",
    "verified", "sm_clock_mhz", "throttled", "samples_ms", "conditions", "witness",
]
PROVENANCE_COLUMNS = [
    "device_name", "compute_capability", "sm_count", "memory_total_bytes", "driver_version",
    "cuda_version", "pycuda_version", "pcie_gen", "pcie_width", "pcie_gbps_theoretical",
    "hbm_gbps_theoretical", "sm_clock_max_mhz", "mem_clock_max_mhz", "host", "timestamp",
    "git_commit", "backend", "l2_bytes", "async_engine_count", "gpu_uuid", "gpu_index", "method_version",
]
COLUMNS = POINT_COLUMNS + PARAMETER_COLUMNS + MEASUREMENT_COLUMNS + PROVENANCE_COLUMNS
WITNESS_COLUMNS = ["conditions", "witness"]
OPTIONAL_COLUMNS = PARAMETER_COLUMNS + ["l2_bytes", "async_engine_count", "gpu_uuid", "gpu_index", "method_version"] \
    + WITNESS_COLUMNS
# Columns added after runs carried a content hash: hashed only where a run has them, so older runs keep theirs.
HASHED_WHEN_SET = ("gpu_uuid", "gpu_index", "peer_index", "peer_uuid", "link", "conditions", "witness",
                   "method_version")
NUMERIC_COLUMNS = ["bytes", "median_ms", "min_ms", "max_ms", "cv", "samples", "gbps"]
OPTIONAL_NUMERIC_COLUMNS = ["block_size", "elements", "param_value", "registers_per_thread", "shared_bytes_per_block",
                            "theoretical_occupancy", "rel_error", "l2_bytes", "chunks", "streams", "intensity",
                            "async_engine_count", "gpu_index", "peer_index"]
# Column types: text, true/false, JSON text (``intervals``, ``witness``), samples (a list of times); every other
# column is a number. Whole numbers are counts, sizes and ordinals; signed ones may be negative (every other number
# is a size, count, time or rate).
TEXT_COLUMNS = ["run_id", "experiment", "variant", "direction", "group", "param", "host_memory", "issue_order",
                "stop_reason", "profile", "timer", "device_name", "compute_capability", "driver_version",
                "cuda_version", "pycuda_version", "host", "timestamp", "git_commit", "backend", "gpu_uuid",
                "peer_uuid", "link", "conditions", "method_version"]
BOOL_COLUMNS = ["include_alloc", "verified", "throttled"]
JSON_TEXT_COLUMNS = ["intervals", "witness"]
SAMPLE_COLUMNS = ["samples_ms"]
NUMBER_COLUMNS = [c for c in COLUMNS if c not in TEXT_COLUMNS + BOOL_COLUMNS + JSON_TEXT_COLUMNS + SAMPLE_COLUMNS]
WHOLE_COLUMNS = ["bytes", "samples", "block_size", "elements", "registers_per_thread", "shared_bytes_per_block",
                 "chunks", "streams", "sm_count", "memory_total_bytes", "pcie_gen", "pcie_width", "sm_clock_max_mhz",
                 "mem_clock_max_mhz", "l2_bytes", "async_engine_count", "gpu_index", "peer_index"]
SIGNED_COLUMNS = ["param_value", "rel_error"]

# PCIe transfer rate per lane (GT/s) and line-encoding efficiency, by generation (PCI-SIG specifications).
_PCIE_RATE = {1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130),
              5: (32.0, 128 / 130), 6: (64.0, 242 / 256)}


def key_value(value):
    """A point-key value in one form, so keys read from Parquet (floats, NaN, NumPy types) and from JSON or
    parameters (ints, None) match: whole floats become ints, missing values None."""
    if value is None or _is_pandas(value, "NA") or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
        if isinstance(value, float) and math.isnan(value):
            return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _is_pandas(value, *names: str) -> bool:
    """Whether ``value`` is one of pandas' missing-value singletons (``NA``, ``NaT``). None of them exists before
    pandas is imported, so this never imports it (``pinpoint --help`` loads no pandas)."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and any(value is getattr(pandas, name) for name in names)


def pcie_gbps_per_direction(generation, width) -> float:
    """Theoretical PCIe bandwidth per direction in GB/s (10^9 B/s) after line encoding."""
    try:
        rate, efficiency = _PCIE_RATE[int(generation)]
        return rate * int(width) * efficiency / 8
    except (KeyError, TypeError, ValueError):
        return math.nan


def hbm_gbps(mem_clock_mhz, bus_width_bits) -> float:
    """Theoretical DRAM bandwidth in GB/s: memory clock × 2 (DDR) × bus width."""
    try:
        return float(mem_clock_mhz) * 1e6 * 2 * float(bus_width_bits) / 8 / 1e9
    except (TypeError, ValueError):
        return math.nan


def make_frame(rows: list[dict], provenance: dict) -> pd.DataFrame:
    """Build a schema-conforming DataFrame from point rows and the run's provenance."""
    import pandas as pd

    frame = pd.DataFrame([{**provenance, **row} for row in rows])
    for column in COLUMNS:
        if column not in frame:
            frame[column] = None
    return validate(frame[COLUMNS])


def validate(frame: pd.DataFrame) -> pd.DataFrame:
    """Check columns and basic sanity; return the frame with numeric columns typed."""
    import pandas as pd

    missing = [c for c in COLUMNS if c not in frame.columns and c not in OPTIONAL_COLUMNS]
    if missing:
        raise SchemaError(f"results are missing {text.plural('column', len(missing))}: {', '.join(missing)}")
    frame = frame.copy()
    for column in OPTIONAL_COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    frame = frame[COLUMNS]
    for column in NUMERIC_COLUMNS + OPTIONAL_NUMERIC_COLUMNS:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    # Tables of several experiments mix True/False with empty cells: keep it a (nullable) boolean.
    frame["include_alloc"] = frame["include_alloc"].astype("boolean")
    bad = frame[NUMERIC_COLUMNS].isna().any(axis=1) | (frame["bytes"] <= 0) | (frame["median_ms"] <= 0)
    if bad.any():
        raise SchemaError(f"{text.count(int(bad.sum()), 'row')} with missing or non-positive measurements")
    if not frame["verified"].astype(bool).all():
        raise SchemaError("results contain unverified rows: a wrong result is never a figure")
    return frame


def to_parquet(frame: pd.DataFrame, path) -> None:
    """A recording as Parquet: each run's provenance once, in the file's metadata (``gpu.core.provenance``)."""
    from gpu.core import provenance

    provenance.write_parquet(validate(frame), path)


def read_results(path) -> pd.DataFrame:
    """Read a recorded run (Parquet, or CSV whose ``samples_ms`` holds JSON lists) and validate it. A Parquet file
    keeps each run's provenance once (``gpu.core.provenance``; files written before keep it on every row): it is put
    back on every row."""
    import pandas as pd

    from gpu.core import provenance

    path = str(path)
    try:
        if path.endswith(".csv"):
            frame = pd.read_csv(path)
            frame["samples_ms"] = frame["samples_ms"].map(lambda s: json.loads(s) if isinstance(s, str) else s)
            for column in frame.columns:
                if not pd.api.types.is_numeric_dtype(frame[column]) and not pd.api.types.is_bool_dtype(frame[column]):
                    frame[column] = frame[column].map(unescape_cell)
        else:
            frame = pd.read_parquet(path)
            block = provenance.read_block(path)
            if block is not None:
                frame = provenance.join_frame(frame, provenance.checked_block(block, frame["run_id"], path), path)
    except SchemaError:
        raise
    except Exception as exc:  # a damaged or foreign file must give a message, not a traceback
        raise SchemaError(f"cannot read results from {path}: {exc}") from exc
    return validate(frame)


# --- cells and rows as files and stores keep them --------------------------------------------------------------
# CSV cells that a spreadsheet would run as a formula are written with a leading quote (OWASP), and read back.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
ESCAPE = "'"


# Empty text is written as a lone quote: an empty CSV cell reads back as a missing value, and a run whose host is
# "" must come back as "" (its manifest hashes it so). A value that is itself "'" is written "''".


def escape_cell(value):
    if isinstance(value, str) and (value == "" or value.startswith((*FORMULA_STARTS, ESCAPE))):
        return ESCAPE + value
    return value


def unescape_cell(value):
    if isinstance(value, str) and value.startswith(ESCAPE) and (value[1:2] == "" or value[1] in "=+-@\t\r'"):
        return value[1:]
    return value


def _json_value(value):
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value.tolist()  # samples: many floats, none NaN (the schema refuses those)
    if isinstance(value, np.ndarray | list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        return None if math.isnan(value) else float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if _is_pandas(value, "NA", "NaT"):
        return None
    return value


def frame_rows(frame: pd.DataFrame) -> list[dict]:
    """The frame's rows as JSON-ready dicts of the results schema (samples as lists)."""
    return [{column: _json_value(row[column]) for column in COLUMNS}
            for row in frame[COLUMNS].to_dict("records")]
