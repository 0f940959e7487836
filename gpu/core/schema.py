"""PinPoint's one results schema: every experiment returns, and every recording stores, this shape. It holds
one concern, over 400 lines: the schema's columns and types, and how files and the store keep its rows (cells, and
a run's provenance once).

One row per measured point. Columns come in three groups:

* **point** – what was measured: ``run_id, experiment, variant, direction, bytes`` and the parameter
  columns (``PARAMETER_COLUMNS``; a column an experiment does not use is left empty): ``include_alloc``
  (transfers), ``group`` (a family of variants, e.g. strided or transpose), ``block_size``, ``elements``,
  the coordinates named by axis (``COORDINATE_COLUMNS``: ``stride``, ``offset``, ``matrix_side``, ``chains``,
  ``working_set_bytes``, ``piece_bytes``, ``extra_registers``; each one thing in every experiment, empty where a point
  has none, never 0 for "none") and the measurement details (``DETAIL_COLUMNS``: ``copies_per_sample``,
  ``loads_per_sample``, ``passes_per_launch``: how a sample was made), which replace the overloaded
  ``param``/``param_value`` pair of rows recorded before schema version 11 (``LEGACY_COLUMNS``; mapped by
  ``gpu.results.persistence.legacy``, refused here),
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
  ``bytes`` over ``median_ms``), ``stop_reason`` (converged | min_time | budget | timeout | max_samples;
  min_time: batched samples stopped at the profile's minimum samples and time above ``max_noise``, within its
  ``hot_max_noise``, nvbench's hot rule; budget: the
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
  files and the runs store keep what a run's rows share once per run (below), CSV on every row.

Parameter columns, ``l2_bytes``, ``async_engine_count``, ``gpu_uuid``, ``gpu_index``, ``method_version``,
``conditions`` and ``witness`` are optional when reading:
files recorded before a column existed load with it empty.

Column types (``TEXT_COLUMNS``, ``BOOL_COLUMNS``, ``WHOLE_COLUMNS``, ``SIGNED_COLUMNS``, the rest numbers) are
declared here once: validation, imports and the store read them from this module.

Theoretical figures come from the device itself: PCIe per direction from link generation × width
(after line encoding); HBM from memory clock × bus width × 2 (double data rate).

A run's provenance is kept once: the provenance values every row of a run holds alike go with the run, each row keeps
only what differs (a peer run's rows name different GPUs, so ``gpu_index`` and ``gpu_uuid`` stay on them; so do the
timestamps of a run whose jobs started minutes apart). The runs store keeps them in ``runs.provenance`` (canonical
JSON of one object, since schema version 10; ``gpu.results.persistence.migrations``); a Parquet file in its key-value
metadata ``pinpoint.provenance`` (JSON of run id → that object; a column moves there only where every run of the file
holds it alike); a CSV for spreadsheets on every row. Reading puts them back on every row: the same frame, the same
content hash. A block read from a file or a store is checked first: an object of provenance columns, each value of its
column's type, at most ``MAX_PROVENANCE_CHARS`` characters per run, naming only runs that have rows, agreeing with any
value a row holds itself; otherwise ``SchemaError`` in one line that names the block.
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
# A point's coordinates named by their axis, each one thing in every experiment (a declaration's GRID names them);
# a point without one (a transpose's stride) leaves it empty. Measurement details: how a sample was made.
COORDINATE_COLUMNS = ["stride", "offset", "matrix_side", "chains", "working_set_bytes", "piece_bytes",
                      "extra_registers"]
DETAIL_COLUMNS = ["copies_per_sample", "loads_per_sample", "passes_per_launch"]
# What rows recorded before schema 11 held instead: one overloaded pair, the name of an axis or detail and its value;
# gpu.results.persistence.legacy maps them onto the columns above by each experiment's LEGACY_PARAMS.
LEGACY_COLUMNS = ["param", "param_value"]
# A coordinate or detail in words, where labels name it ("stride 8", "working set 4096").
AXIS_WORDS = {**{c: c.replace("_", " ") for c in COORDINATE_COLUMNS + DETAIL_COLUMNS},
              "working_set_bytes": "working set"}
SIZE_COLUMNS = ["bytes", "working_set_bytes", "piece_bytes"]  # sizes in bytes (Compare writes them as sizes)
PARAMETER_COLUMNS = [
    "include_alloc", "group", "block_size", "elements", *COORDINATE_COLUMNS, *DETAIL_COLUMNS,
    "registers_per_thread", "shared_bytes_per_block", "theoretical_occupancy", "rel_error", "host_memory", "chunks",
    "streams", "issue_order", "intensity", "intervals", "peer_index", "peer_uuid", "link",
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
                   "method_version", *COORDINATE_COLUMNS, *DETAIL_COLUMNS)
NUMERIC_COLUMNS = ["bytes", "median_ms", "min_ms", "max_ms", "cv", "samples", "gbps"]
OPTIONAL_NUMERIC_COLUMNS = ["block_size", "elements", *COORDINATE_COLUMNS, *DETAIL_COLUMNS, "registers_per_thread",
                            "shared_bytes_per_block",
                            "theoretical_occupancy", "rel_error", "l2_bytes", "chunks", "streams", "intensity",
                            "async_engine_count", "gpu_index", "peer_index"]
# Column types: text, true/false, JSON text (``intervals``, ``witness``), samples (a list of times); every other
# column is a number. Whole numbers are counts, sizes and ordinals; signed ones may be negative (every other number
# is a size, count, time or rate).
TEXT_COLUMNS = ["run_id", "experiment", "variant", "direction", "group", "host_memory", "issue_order",
                "stop_reason", "profile", "timer", "device_name", "compute_capability", "driver_version",
                "cuda_version", "pycuda_version", "host", "timestamp", "git_commit", "backend", "gpu_uuid",
                "peer_uuid", "link", "conditions", "method_version"]
BOOL_COLUMNS = ["include_alloc", "verified", "throttled"]
JSON_TEXT_COLUMNS = ["intervals", "witness"]
SAMPLE_COLUMNS = ["samples_ms"]
NUMBER_COLUMNS = [c for c in COLUMNS if c not in TEXT_COLUMNS + BOOL_COLUMNS + JSON_TEXT_COLUMNS + SAMPLE_COLUMNS]
WHOLE_COLUMNS = ["bytes", "samples", "block_size", "elements", *COORDINATE_COLUMNS, *DETAIL_COLUMNS,
                 "registers_per_thread", "shared_bytes_per_block",
                 "chunks", "streams", "sm_count", "memory_total_bytes", "pcie_gen", "pcie_width", "sm_clock_max_mhz",
                 "mem_clock_max_mhz", "l2_bytes", "async_engine_count", "gpu_index", "peer_index"]
SIGNED_COLUMNS = ["rel_error"]

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
    if held := [c for c in LEGACY_COLUMNS if c in frame.columns and frame[c].notna().any()]:
        raise SchemaError(f"results hold {', '.join(held)}, columns of rows recorded before schema version 11: read "
                          "them through gpu.results.persistence.legacy, which maps them onto their axis columns")
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
    """A recording as Parquet: each run's provenance once, in the file's metadata."""
    write_parquet(validate(frame), path)


def read_results(path) -> pd.DataFrame:
    """Read a recorded run (Parquet, or CSV whose ``samples_ms`` holds JSON lists) and validate it. A Parquet file
    keeps each run's provenance once (files written before keep it on every row): it is put back on every row. A
    file recorded before schema version 11 (``LEGACY_COLUMNS``) is read through
    ``gpu.results.persistence.legacy.read_results``."""
    return validate(read_frame(path))


def read_frame(path) -> pd.DataFrame:
    """A recorded run's frame as the file holds it (each run's provenance put back on its rows), not yet
    validated."""
    import pandas as pd

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
            block = read_provenance_block(path)
            if block is not None:
                frame = join_provenance_frame(frame, checked_provenance_block(block, frame["run_id"], path), path)
    except SchemaError:
        raise
    except Exception as exc:  # a damaged or foreign file must give a message, not a traceback
        raise SchemaError(f"cannot read results from {path}: {exc}") from exc
    return frame


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


# --- a run's provenance, kept once -------------------------------------------------------------------------
# Files and the store keep the provenance values that every row of a run holds alike once, with the run, and each
# row only what differs (a peer run's rows name different GPUs); reading puts them back on every row.
PROVENANCE_KEY = b"pinpoint.provenance"
MAX_PROVENANCE_CHARS = 16_384  # one run's block: ~1,000 characters in practice


def provenance_json(value) -> str:
    """A provenance block as JSON: keys sorted, no spaces, no NaN."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _alike(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def shared_provenance(rows: list[dict]) -> dict:
    """The provenance values every one of ``rows`` (JSON-ready dicts) holds alike; a column some row lacks, or holds
    otherwise, or whose value is not of its type (a block holding it would be refused), is left out: it stays on the
    rows."""
    if not rows:
        return {}
    first = rows[0]
    return {c: first[c] for c in PROVENANCE_COLUMNS
            if c in first and _typed(c, first[c]) and all(c in row and _alike(row[c], first[c]) for row in rows[1:])}


def split_provenance(rows: list[dict]) -> tuple[dict, list[dict]]:
    """A run's rows as kept: (its provenance, each row without it)."""
    common = shared_provenance(rows)
    return common, [{k: v for k, v in row.items() if k not in common} for row in rows]


def with_provenance(row: dict, provenance: dict, what: str) -> dict:
    """``row`` with its run's ``provenance`` put back; a value the row holds itself must agree with it."""
    for column, value in provenance.items():
        if column in row and not _agrees(row[column], value):
            raise SchemaError(f"{what}: its provenance block's {column} ({text.shorten(value)}) disagrees with a "
                              f"row's ({text.shorten(row[column])})")
    return {**provenance, **row}


def _agrees(a, b) -> bool:
    try:
        return key_value(a) == key_value(b)
    except (TypeError, ValueError):
        return False


def checked_provenance(value, what: str) -> dict:
    """One run's provenance block as read (JSON text, or an object from a file's block), checked; ``what`` names
    where it was read ("run ab12", a file and run)."""
    if isinstance(value, bytes | str):
        if len(value) > MAX_PROVENANCE_CHARS:
            raise SchemaError(f"{what}: its provenance block is {len(value):,} characters, over the limit of "
                              f"{MAX_PROVENANCE_CHARS:,}")
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as exc:
            raise SchemaError(f"{what}: its provenance block is not JSON ({text.shorten(str(exc), 80)})") from None
    if not isinstance(value, dict):
        raise SchemaError(f"{what}: its provenance block is {text.shorten(value)}, not an object of provenance "
                          "columns")
    for column, item in value.items():
        if column not in PROVENANCE_COLUMNS:
            raise SchemaError(f"{what}: its provenance block names {text.shorten(column)}, which is not a provenance "
                              "column")
        if not _typed(column, item):
            kind = "text" if column in TEXT_COLUMNS else "a finite number"
            raise SchemaError(f"{what}: its provenance block's {column} is {text.shorten(item)}, not {kind}")
    if len(provenance_json(value)) > MAX_PROVENANCE_CHARS:
        raise SchemaError(f"{what}: its provenance block is over the limit of {MAX_PROVENANCE_CHARS:,} characters")
    return value


def _typed(column: str, value) -> bool:
    if value is None:
        return True
    if column in TEXT_COLUMNS:
        return isinstance(value, str)
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def checked_provenance_block(raw, run_ids, what: str) -> dict[str, dict]:
    """A file's provenance block (``PROVENANCE_KEY``'s value: run id → provenance), checked against the runs the
    file holds (``run_ids``); ``what`` names the file."""
    runs = {str(r) for r in run_ids}
    limit = MAX_PROVENANCE_CHARS * max(len(runs), 1)
    if len(raw) > limit:
        raise SchemaError(f"{what}: its provenance block is {len(raw):,} bytes, over the limit of {limit:,} for "
                          f"{text.count(len(runs), 'run')}")
    try:
        block = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise SchemaError(f"{what}: its provenance block is not JSON ({text.shorten(str(exc), 80)})") from None
    if not isinstance(block, dict):
        raise SchemaError(f"{what}: its provenance block is {text.shorten(block)}, not an object of runs")
    for run_id in block:
        if run_id not in runs:
            raise SchemaError(f"{what}: its provenance block names run {text.shorten(run_id)}, which has no rows in "
                              "the file")
    return {run_id: checked_provenance(entry, f"{what}: run {text.shorten(run_id)}") for run_id, entry in block.items()}


# --- frames and Parquet files ---------------------------------------------------------------------------------
def split_provenance_frame(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, dict]]:
    """``frame`` (results schema; a file recorded before a column existed may lack it) without the provenance columns
    that every run holds alike on all of its rows, and run id → those values: what a Parquet file keeps."""
    present = [c for c in PROVENANCE_COLUMNS if c in frame.columns]
    by_run = {str(run_id): shared_provenance([{c: _json_value(v) for c, v in row.items()}
                                              for row in part[present].to_dict("records")])
              for run_id, part in frame.groupby("run_id", sort=False)}
    moved = [c for c in present if by_run and all(c in p for p in by_run.values())]
    return frame.drop(columns=moved), {run_id: {c: p[c] for c in moved} for run_id, p in by_run.items()}


def join_provenance_frame(frame: pd.DataFrame, block: dict[str, dict], what: str) -> pd.DataFrame:
    """``frame`` with each run's provenance (``block``, checked) put back on its rows, as the columns were."""
    if not block:
        return frame
    frame = frame.copy()
    run_ids = frame["run_id"].map(str)
    for column in [c for c in PROVENANCE_COLUMNS if any(c in entry for entry in block.values())]:
        given = run_ids.map(lambda r, c=column: block.get(r, {}).get(c))
        named = run_ids.map(lambda r, c=column: c in block.get(r, {}))
        if column in frame.columns:
            for i, (have, value, is_named) in enumerate(zip(frame[column], given, named, strict=True)):
                if is_named and key_value(have) is not None and not _agrees(have, value):
                    raise SchemaError(f"{what}: run {text.shorten(run_ids.iloc[i])}: its provenance block's {column} "
                                      f"({text.shorten(value)}) disagrees with row {i + 1}'s "
                                      f"({text.shorten(key_value(have))})")
            frame[column] = frame[column].where(~named.to_numpy(), given)
        else:
            frame[column] = given
    return frame


def write_parquet(frame: pd.DataFrame, path, metadata: dict[bytes, bytes] | None = None) -> None:
    """A results frame as Parquet, each run's provenance once in the file's metadata (and ``metadata`` beside it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    points, block = split_provenance_frame(frame)
    table = pa.Table.from_pandas(points, preserve_index=False)
    kept = {**(table.schema.metadata or {}), **(metadata or {}), PROVENANCE_KEY: provenance_json(block).encode()}
    pq.write_table(table.replace_schema_metadata(kept), path)


def read_provenance_block(path) -> bytes | None:
    """A Parquet file's provenance block as written (None: a file written before, with provenance on every row)."""
    import pyarrow.parquet as pq

    return (pq.read_schema(path).metadata or {}).get(PROVENANCE_KEY)
