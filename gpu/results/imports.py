"""Reading runs from other machines (runner Parquet/CSV) for the store: bounded work first, then one contract.

Bounded work before trust: only regular files are read (a FIFO or a link to ``/dev/zero`` is refused before it is
opened), at most the size limit is read, and a Parquet file's row and value counts are taken from its metadata
before any column is decoded; text columns stay dictionary-encoded until their lengths are checked, so decoding
is capped (``MAX_DECODED_BYTES``).

The contract: every value is coerced to its schema type or refused, with file, row, run, column and value (shortened
to about 40 characters): text without NUL and at most ``MAX_TEXT_CHARS`` (run id ``MAX_RUN_ID_CHARS``), finite
numbers within range, samples a list of finite positive times whose count, median, min and max agree, ISO 8601
timestamps. A run has one experiment, device and timestamp, and each point once. A file with a manifest
(``gpu.results.runfiles``: what PinPoint exports) must hold every point of each run, unchanged. What passes can be
stored in SQLite and PostgreSQL alike. Nothing is stored from a file that fails any check. No Streamlit, no CUDA.

Column types are the schema's (``gpu.core.schema``: text, true/false, whole, signed, the rest numbers); this module
adds the limits and the checks. It holds one concern, over 400 lines: the import contract, from reading a file within
its limits to the checked frame (the limits are module constants, read when a file is read).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import os
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd

from gpu.core import schema
from gpu.core.errors import ImportProblem, StoreError
from gpu.core.schema import frame_rows
from gpu.core.text import shorten
from gpu.experiments import EXPERIMENTS
from gpu.results import runfiles
from gpu.results.compare import key_columns
from gpu.results.store import (
    GPUS,
    MAX_LABEL_CHARS,
    MAX_NOTES_CHARS,
    MAX_PARAMS_CHARS,
    MAX_RUN_SPAN_S,
    RUNS,
    RunStore,
    checked_params,
    run_times,
)

DEFAULT_MAX_BYTES = 256 * 1024**2
MAX_ROWS = 200_000
MAX_VALUES = 20_000_000  # every decoded value of a Parquet file, samples included (160 MB as floats)
MAX_DECODED_BYTES = 512 * 1024**2
MAX_SAMPLES_PER_POINT = 100_000
MAX_TEXT_CHARS = 256
MAX_RUN_ID_CHARS = 64
MAX_INTERVALS_CHARS = 1_000_000  # a Streams point's timeline (JSON), about 8 KB in practice
MAX_CONDITIONS_CHARS = 1024  # a point's conditions in words: ~100 characters in practice
MAX_WITNESS_CHARS = 8192  # a point's witness readings (JSON): ~300 characters in practice
MAX_NUMBER = 1e18  # fits a 64-bit integer column and any JSON reader
MAX_POINT_BYTES = 1 << 40  # 1 TiB: no PinPoint point moves more
SAMPLE_TOLERANCE = 1e-6

# Column types come from the schema; only what the contract adds is named here.
TEXT_COLUMNS, BOOL_COLUMNS, NUMBER_COLUMNS = schema.TEXT_COLUMNS, schema.BOOL_COLUMNS, schema.NUMBER_COLUMNS
WHOLE_COLUMNS, SIGNED_COLUMNS = schema.WHOLE_COLUMNS, schema.SIGNED_COLUMNS
REQUIRED_TEXT = ["run_id", "experiment", "variant", "direction"]
TRUE_TEXT, FALSE_TEXT = {"true", "1"}, {"false", "0"}


def max_import_bytes() -> int:
    try:
        return int(os.environ.get("PINPOINT_IMPORT_MAX_BYTES", DEFAULT_MAX_BYTES))
    except ValueError:
        return DEFAULT_MAX_BYTES


UNVERIFIED_HINT = "--unverified on the command line, or the Runs page's 'Store a CSV without a manifest' box"


def read_upload(name: str, data: bytes | None = None, path: str | Path | None = None,
                limit: int | None = None, unverified: bool = False) -> pd.DataFrame:
    """A results frame from a file's bytes (upload) or path (CLI), or ImportProblem.

    A CSV without a manifest is refused unless ``unverified``: a CSV cut at a row boundary is still a well-formed
    table, and only a manifest shows that rows are missing (Parquet's footer shows a cut file)."""
    limit = limit or max_import_bytes()
    shown = shorten(name)
    if not name.lower().endswith((".parquet", ".csv")):
        raise ImportProblem(f"{shown}: PinPoint imports runner output as .parquet or .csv")
    if data is None:
        data = _read_regular_file(shown, Path(path), limit)
    if len(data) > limit:
        raise ImportProblem(f"{shown}: {len(data) / 1e6:,.1f} MB is over the import limit of {limit / 1e6:,.0f} MB "
                            "(PINPOINT_IMPORT_MAX_BYTES sets it)")
    if name.lower().endswith(".csv"):
        frame, manifest = _read_csv(shown, data)
    else:
        frame, manifest = _read_parquet(shown, data)
    checked = check(frame, shown, manifest)
    checked.attrs["params"] = _manifest_params(shown, manifest)
    if manifest is None and name.lower().endswith(".csv") and not unverified:
        raise ImportProblem(f"{shown}: a CSV without a manifest (not a PinPoint export): a cut copy would be "
                            f"stored as a shorter run without a word; refused ({UNVERIFIED_HINT} stores it "
                            "as it is)")
    return checked


def params_of(frame: pd.DataFrame) -> dict[str, str]:
    """run id → the parameters (JSON text) a read file's manifest carries for its runs (none for a file without)."""
    return dict(frame.attrs.get("params") or {})


def _manifest_params(shown: str, manifest: dict | None) -> dict[str, str]:
    """Each run's parameters from the manifest, checked as the store keeps them; ImportProblem naming the run."""
    found = {}
    for run_id, entry in (manifest or {}).items():
        value = entry.get("params")
        if value is None:
            continue
        if not isinstance(value, str):
            raise ImportProblem(f"{shown}: run {shorten(run_id)}, manifest params: {_shown(value)} is not JSON text")
        try:
            found[run_id] = checked_params(run_id, value)
        except StoreError as exc:
            raise ImportProblem(f"{shown}: {exc}") from None
    return found


def _read_regular_file(shown: str, path: Path, limit: int) -> bytes:
    """The file's bytes, at most ``limit`` + 1 of them; a FIFO, device, socket or directory (also behind a link)
    is refused before it is opened: reading one could hang or never end."""
    _check_regular_file(shown, path, limit)
    try:
        with open(path, "rb") as f:
            return f.read(limit + 1)  # a file that grew (or a /proc file that claims 0 bytes) stops at the limit
    except OSError as exc:
        raise ImportProblem(f"{shown}: cannot be read ({exc.strerror or type(exc).__name__})") from None


def _check_regular_file(shown: str, path: Path, limit: int) -> None:
    """A regular file (also behind a link) of at most ``limit`` bytes, or ImportProblem."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise ImportProblem(f"{shown}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(info.st_mode) else "a device" if stat.S_ISCHR(info.st_mode)
                or stat.S_ISBLK(info.st_mode) else "a directory" if stat.S_ISDIR(info.st_mode) else "not a file")
        raise ImportProblem(f"{shown}: is {kind}, not a regular file: refused")
    if info.st_size > limit:
        raise ImportProblem(f"{shown}: {info.st_size / 1e6:,.1f} MB is over the import limit of {limit / 1e6:,.0f} MB "
                            "(PINPOINT_IMPORT_MAX_BYTES sets it)")


def read_store(name: str, path: str | Path, limit: int | None = None) -> list[tuple]:
    """Every run of another PinPoint runs store (a SQLite file, e.g. a fleet's from a GPU machine) through the
    same contract and limits as a Parquet or CSV file: ``check`` over all of its rows at once (row N counts the
    file's points in run order), and each run's label, notes, fleet id, suite and suite text checked as the store
    keeps them. (frame, label, notes, fleet, suite text) per run, for ``RunStore.save_batches``; ImportProblem
    naming the file, run and column of the first problem. The file is opened read-only and never written."""
    limit = limit or max_import_bytes()
    shown = shorten(name)
    _check_regular_file(shown, Path(path), limit)
    source = RunStore(f"sqlite:///{Path(path).resolve()}")  # opening never writes
    try:
        if source.version < 1:
            raise ImportProblem(f"{shown}: not a PinPoint runs store (schema version {source.version})" if
                                source.version else f"{shown}: not a PinPoint runs store (it has no runs and no "
                                "schema version)")
        counted = source.count_points()
        if counted[0] > MAX_ROWS:
            raise ImportProblem(f"{shown}: over {MAX_ROWS:,} points, the limit")
        if counted[1] > MAX_DECODED_BYTES:
            raise ImportProblem(f"{shown}: its points hold {counted[1] / 1e6:,.0f} MB of text, over the limit of "
                                f"{MAX_DECODED_BYTES / 1e6:,.0f} MB")
        runs = source.runs()
        if runs.empty:
            raise ImportProblem(f"{shown}: the store holds no runs")
        try:
            rows = source.points(list(runs["run_id"]))
        except (ValueError, TypeError, AttributeError, StoreError) as exc:  # JSON by hand or by a damaged copy
            raise ImportProblem(f"{shown}: a stored point cannot be read: {shorten(str(exc), 200)}") from None
        total = sum(len(v) for v in rows.get("samples_ms", pd.Series(dtype=object)) if isinstance(v, list))
        if total > MAX_VALUES:
            raise ImportProblem(f"{shown}: {total:,} sample values, over the limit of {MAX_VALUES:,}")
        kept = {r.fleet_id: source.fleet_suite(r.fleet_id) for r in runs.itertuples() if _is_id(r.fleet_id)}
        asked = source.run_params(list(runs["run_id"])).set_index("run_id")
    finally:
        source.close()
    frame = check(rows, shown)
    unlisted = sorted(set(frame["run_id"]) - set(runs["run_id"]))
    if unlisted:
        raise ImportProblem(f"{shown}: run {shorten(unlisted[0])}, column run_id: its points name a run the store "
                            "does not list")
    batches = []
    for row in runs.itertuples():
        run = shorten(str(row.run_id))
        texts = {}
        for column, limit_chars in (("label", MAX_LABEL_CHARS), ("notes", MAX_NOTES_CHARS),
                                    ("fleet_id", RUNS.c.fleet_id.type.length), ("suite", MAX_LABEL_CHARS)):
            value = getattr(row, column)
            texts[column] = value if isinstance(value, str) else None
            if texts[column] is not None and ("\x00" in value or len(value) > limit_chars or (
                    column in ("fleet_id", "suite") and _CONTROL_CHARACTER.search(value))):
                raise ImportProblem(f"{shown}: run {run}, column {column}: value {_shown(value)} is longer than "
                                    f"{limit_chars:,} characters or holds a control character")
        part = frame[frame["run_id"] == row.run_id]
        if part.empty:
            raise ImportProblem(f"{shown}: run {run}, column run_id: the run has no points")
        fleet = (texts["fleet_id"], texts["suite"] or "") if texts["fleet_id"] else None
        suite = kept.get(texts["fleet_id"]) if fleet else None
        params, gpus = (asked.loc[row.run_id, "params"], asked.loc[row.run_id, "gpus"]) if row.run_id in asked.index \
            else (None, None)
        chars = asked.loc[row.run_id, "params_chars"] if row.run_id in asked.index else None
        if not pd.isna(chars) and chars > MAX_PARAMS_CHARS:
            raise ImportProblem(f"{shown}: run {run}, column params: {int(chars):,} characters, over the limit of "
                                f"{MAX_PARAMS_CHARS:,}")
        if not pd.isna(gpus) and gpus not in GPUS:
            raise ImportProblem(f"{shown}: run {run}, column gpus: value {_shown(gpus)} is not one of "
                                f"{', '.join(GPUS)}")
        try:
            params = checked_params(str(row.run_id), None if pd.isna(params) else params)
        except StoreError as exc:
            raise ImportProblem(f"{shown}: {exc}") from None
        batches.append((part, texts["label"], texts["notes"], fleet, suite[1] if suite else None,
                        {str(row.run_id): params} if params else None, None if pd.isna(gpus) else gpus))
    return batches


def _is_id(value) -> bool:
    return isinstance(value, str) and bool(value)


def _read_csv(shown: str, data: bytes) -> tuple[pd.DataFrame, dict | None]:
    try:
        # Every cell as text: the contract below coerces each column itself and names what it cannot.
        frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, na_values=[""],
                            nrows=MAX_ROWS + 1)
    except Exception as exc:  # binary junk, a CSV that is no table
        raise ImportProblem(f"{shown}: not a readable CSV file ({type(exc).__name__}: "
                            f"{shorten(str(exc), 120)})") from None
    manifest = None
    if set(runfiles.MANIFEST_COLUMNS) <= set(frame.columns):
        # A PinPoint export: its writer put an apostrophe before formula-like and empty text; one comes off.
        for column in frame.columns:
            if column not in NUMBER_COLUMNS:
                frame[column] = frame[column].astype(object).map(runfiles.unescape_cell)
        manifest = {}
        given = frame[runfiles.PARAMS_COLUMN] if runfiles.PARAMS_COLUMN in frame.columns else [None] * len(frame)
        for i, (run_id, points, digest, params) in enumerate(zip(frame["run_id"], frame["manifest_points"],
                                                                 frame["manifest_sha256"], given, strict=True)):
            entry = {"points": points, "sha256": digest, "params": None if pd.isna(params) else params}
            if manifest.setdefault(str(run_id), entry) != entry:
                raise ImportProblem(f"{shown}: row {i + 1} (run {shorten(run_id)}), column manifest_points/"
                                    f"manifest_sha256{'/' + runfiles.PARAMS_COLUMN if params is not None else ''}: "
                                    "differs from the run's first row: the manifest was edited")
        try:
            manifest = {r: {"points": int(e["points"]), "sha256": str(e["sha256"]), "params": e["params"]}
                        for r, e in manifest.items()}
        except (TypeError, ValueError):
            raise ImportProblem(f"{shown}: column manifest_points holds a value that is not a count") from None
    return frame, manifest


def _read_parquet(shown: str, data: bytes) -> tuple[pd.DataFrame, dict | None]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(io.BytesIO(data)).metadata
    except Exception as exc:  # truncated, binary junk
        raise ImportProblem(f"{shown}: not a readable Parquet file ({type(exc).__name__}: "
                            f"{shorten(str(exc), 120)})") from None
    if meta.num_rows > MAX_ROWS:
        raise ImportProblem(f"{shown}: {meta.num_rows:,} rows (from the file's metadata) is over the limit of "
                            f"{MAX_ROWS:,}: refused before decoding")
    values = sum(meta.row_group(g).column(c).num_values for g in range(meta.num_row_groups)
                 for c in range(meta.num_columns))
    if values > MAX_VALUES:
        raise ImportProblem(f"{shown}: {values:,} values (from the file's metadata) is over the limit of "
                            f"{MAX_VALUES:,}: refused before decoding")
    try:
        arrow_schema = pq.read_schema(io.BytesIO(data))
    except Exception as exc:
        raise ImportProblem(f"{shown}: not a readable Parquet file ({type(exc).__name__}: "
                            f"{shorten(str(exc), 120)})") from None
    # Only the schema's columns are read (others are never decoded), and only in types whose decoded size the
    # metadata bounds: a fixed-size binary of 5 MB a row, or a list of text, is refused from the schema alone.
    wanted = [f.name for f in arrow_schema if f.name in _SCHEMA_COLUMNS]
    for name in wanted:
        field = arrow_schema.field(name)
        if not _bounded_type(name, field.type):
            raise ImportProblem(f"{shown}: column {shorten(name)} has type {shorten(str(field.type), 60)}, which "
                                f"PinPoint does not write: refused before decoding")
    declared = _declared_bytes(meta, wanted)
    if declared > MAX_DECODED_BYTES:
        raise ImportProblem(f"{shown}: its columns declare {declared / 1e6:,.0f} MB decoded (from the file's "
                            f"metadata), over the limit of {MAX_DECODED_BYTES / 1e6:,.0f} MB: refused before decoding")
    try:
        text = [name for name in wanted if _is_text(arrow_schema.field(name).type)]
        # Text stays dictionary-encoded until its decoded size is known: a short file can repeat one long
        # string in every row. Columns are read one at a time, the running size checked after each.
        parquet_file = pq.ParquetFile(io.BytesIO(data), read_dictionary=text)
        columns = []
        for name in wanted:
            columns.append(parquet_file.read(columns=[name]).column(0))
            if sum(c.nbytes for c in columns) > MAX_DECODED_BYTES:
                raise ImportProblem(f"{shown}: decoding would take over {MAX_DECODED_BYTES / 1e6:,.0f} MB, the "
                                    "limit: refused")
        table = pa.table(dict(zip(wanted, columns, strict=True))) if wanted else pa.table({})
        decoded = table.nbytes
        for name in text:
            column = table.column(name)
            for chunk in column.chunks:
                lengths = pc.binary_length(chunk.dictionary)
                decoded += int(pc.sum(pc.take(lengths, chunk.indices)).as_py() or 0)
            if decoded > MAX_DECODED_BYTES:
                break
        if decoded > MAX_DECODED_BYTES:
            raise ImportProblem(f"{shown}: decoding would take {decoded / 1e6:,.0f} MB, over the limit of "
                                f"{MAX_DECODED_BYTES / 1e6:,.0f} MB: refused")
        for name in text:
            column = table.column(name)
            table = table.set_column(table.schema.get_field_index(name), name,
                                     pa.chunked_array([c.dictionary_decode() for c in column.chunks],
                                                      type=column.type.value_type))
        # Without the writer's pandas metadata: its claimed types are what the contract below checks.
        frame = table.replace_schema_metadata(None).to_pandas(timestamp_as_object=True, date_as_object=True)
        raw = (arrow_schema.metadata or {}).get(runfiles.MANIFEST_KEY)
    except ImportProblem:
        raise
    except Exception as exc:
        raise ImportProblem(f"{shown}: not a readable Parquet file ({type(exc).__name__}: "
                            f"{shorten(str(exc), 120)})") from None
    manifest = None
    if raw is not None:
        try:
            manifest = {str(r): {"points": int(e["points"]), "sha256": str(e["sha256"]), "params": e.get("params")}
                        for r, e in json.loads(raw).items()}
        except (ValueError, TypeError, KeyError, AttributeError):
            raise ImportProblem(f"{shown}: its manifest (Parquet metadata {runfiles.MANIFEST_KEY.decode()}) is "
                                "not readable") from None
    return frame, manifest


_SCHEMA_COLUMNS = set(schema.COLUMNS)
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
MAX_FIXED_WIDTH = 64  # bytes a value of a fixed-size binary column may declare (PinPoint writes none)


def _is_text(arrow_type) -> bool:
    import pyarrow as pa

    return (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_binary(arrow_type)
            or pa.types.is_large_binary(arrow_type))


def _is_scalar(arrow_type) -> bool:
    """A value whose decoded size is fixed and small, or text (held dictionary-encoded until measured)."""
    import pyarrow as pa

    if pa.types.is_fixed_size_binary(arrow_type):
        return arrow_type.byte_width <= MAX_FIXED_WIDTH
    if pa.types.is_dictionary(arrow_type):
        return _is_text(arrow_type.value_type)
    return (_is_text(arrow_type) or pa.types.is_null(arrow_type) or pa.types.is_boolean(arrow_type)
            or pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_temporal(arrow_type)
            or pa.types.is_decimal(arrow_type))


def _bounded_type(name: str, arrow_type) -> bool:
    """Whether a schema column may be decoded in this type: scalars everywhere; lists of numbers for samples."""
    import pyarrow as pa

    if name == "samples_ms" and (pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)):
        value = arrow_type.value_type
        return pa.types.is_integer(value) or pa.types.is_floating(value) or pa.types.is_null(value)
    return _is_scalar(arrow_type)


def _declared_bytes(meta, columns: list[str]) -> int:
    """What the file's metadata says the chosen columns take once decompressed (page bytes, dictionary pages
    included), and at least values × width for fixed-size columns."""
    wanted = set(columns)
    total = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            if chunk.path_in_schema.split(".")[0] not in wanted:
                continue
            total += max(int(chunk.total_uncompressed_size or 0), 0)
            physical = meta.schema.column(c)
            if physical.physical_type == "FIXED_LEN_BYTE_ARRAY":
                total += int(chunk.num_values) * int(physical.length or 0)
    return total


def _shown(value) -> str:
    value = value.item() if isinstance(value, np.generic) else value.tolist() if isinstance(value, np.ndarray) \
        else value
    return shorten(repr(value) if isinstance(value, str | bytes) else value)


class _Where:
    """'run.csv: row 5 (run ab12), column median_ms: …' for the first bad cell."""

    def __init__(self, name: str, frame: pd.DataFrame):
        self.name, self.run_ids = name, frame["run_id"].tolist()

    def __call__(self, i: int, column: str, value, problem: str) -> ImportProblem:
        run = self.run_ids[i]  # as the file holds it, so a row is named even when its run id is the problem
        run = shorten(run.replace("\x00", "\\0")) if isinstance(run, str) else _shown(run)
        return ImportProblem(f"{self.name}: row {i + 1} (run {run}), column {column}: value {_shown(value)} "
                             f"{problem}")


def _missing(value) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float | np.floating) and math.isnan(value)


def _as_text(value, limit: int, where, i: int, column: str):
    if _missing(value):
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise where(i, column, value, "is binary data, not UTF-8 text") from None
    elif isinstance(value, dt.datetime | dt.date | pd.Timestamp):
        value = value.isoformat()
    elif isinstance(value, bool | np.bool_ | int | np.integer):
        value = str(int(value)) if not isinstance(value, bool | np.bool_) else str(bool(value))
    elif isinstance(value, float | np.floating):
        if not math.isfinite(value):
            raise where(i, column, value, "is not text")
        value = str(int(value)) if float(value).is_integer() else repr(float(value))
    elif not isinstance(value, str):
        raise where(i, column, value, f"is a {type(value).__name__}, not text")
    if "\x00" in value:
        raise where(i, column, value, "holds a NUL character")
    if len(value) > limit:
        raise where(i, column, value, f"is longer than {limit:,} characters")
    return value


def _text_column(frame, column: str, where) -> None:
    limit = {"run_id": MAX_RUN_ID_CHARS, "intervals": MAX_INTERVALS_CHARS, "conditions": MAX_CONDITIONS_CHARS,
             "witness": MAX_WITNESS_CHARS}.get(column, MAX_TEXT_CHARS)
    values = [_as_text(v, limit, where, i, column) for i, v in enumerate(frame[column])]
    if column in ("run_id", "conditions"):  # typed, linked, printed on one line: no tab, newline or other control
        for i, v in enumerate(values):
            if v is not None and _CONTROL_CHARACTER.search(v):
                raise where(i, column, v, f"holds a control character (tab, newline, …): a "
                            f"{'run id' if column == 'run_id' else 'point' + chr(39) + 's conditions'} is one line "
                            "of printable text")
    if column in REQUIRED_TEXT:
        for i, v in enumerate(values):
            if v is None or not v.strip():
                raise where(i, column, frame[column].iloc[i], "is empty: every row needs one")
    if column == "timestamp":
        for i, v in enumerate(values):
            try:
                if v is not None:
                    dt.datetime.fromisoformat(v)
            except ValueError:
                raise where(i, column, v, "is not an ISO 8601 timestamp (2026-11-22T13:08:10+00:00)") from None
    if column == "intervals":
        for i, v in enumerate(values):
            try:
                if v is not None and not isinstance(json.loads(v), list):
                    raise ValueError
            except ValueError:
                raise where(i, column, v, "is not a JSON list (a Streams timeline)") from None
    if column == "witness":
        for i, v in enumerate(values):
            try:
                if v is not None and not isinstance(json.loads(v), dict):
                    raise ValueError
            except (ValueError, RecursionError):
                raise where(i, column, v, "is not a JSON object (a point's witness readings)") from None
    frame[column] = pd.Series(values, index=frame.index, dtype=object)


def _bool_column(frame, column: str, where) -> None:
    values = []
    for i, v in enumerate(frame[column]):
        if _missing(v):
            values.append(None)
        elif isinstance(v, bool | np.bool_):
            values.append(bool(v))
        elif isinstance(v, str) and v.strip().lower() in TRUE_TEXT | FALSE_TEXT:
            values.append(v.strip().lower() in TRUE_TEXT)
        elif isinstance(v, int | float | np.integer | np.floating) and v in (0, 1):
            values.append(bool(v))
        else:
            raise where(i, column, v, "is not true or false")
    frame[column] = pd.Series(values, index=frame.index, dtype=object)


def _number_column(frame, column: str, where) -> None:
    original = frame[column]
    if original.dtype == object or pd.api.types.is_string_dtype(original):
        bad_type = [i for i, v in enumerate(original) if isinstance(v, bytes | bool | np.bool_ | list | np.ndarray
                                                                    | dict)]
        if bad_type:
            i = bad_type[0]
            raise where(i, column, original.iloc[i], "is not a number")
    numbers = pd.to_numeric(original, errors="coerce").astype(float)
    array = numbers.to_numpy()
    present = ~original.map(_missing).to_numpy(dtype=bool)
    required = column in schema.NUMERIC_COLUMNS
    for mask, problem in ((present & ~np.isfinite(array), "is not a finite number"),
                          (~present if required else np.zeros(len(array), bool), "is missing"),
                          (np.isfinite(array) & (np.abs(array) > MAX_NUMBER), f"is beyond ±{MAX_NUMBER:.0e}"),
                          (np.isfinite(array) & (array < 0) if column not in SIGNED_COLUMNS
                           else np.zeros(len(array), bool), "is negative"),
                          (np.isfinite(array) & (array != np.round(array)) if column in WHOLE_COLUMNS
                           else np.zeros(len(array), bool), "is not a whole number")):
        bad = np.flatnonzero(mask)
        if bad.size:
            i = int(bad[0])
            raise where(i, column, original.iloc[i], problem)
    frame[column] = numbers


def _samples_column(frame, where) -> None:
    kept, total = [], 0
    for i, (raw, median, low, high, count) in enumerate(zip(frame["samples_ms"], frame["median_ms"], frame["min_ms"],
                                                            frame["max_ms"], frame["samples"], strict=True)):
        value = raw
        if isinstance(value, str):
            total += value.count(",") + 1  # before parsing: a CSV's samples are capped like a Parquet file's values
            if total > MAX_VALUES:
                raise where(i, "samples_ms", raw, f"brings the file's sample values past {MAX_VALUES:,}: refused")
            try:
                value = json.loads(value)
            except ValueError:
                raise where(i, "samples_ms", raw, "is not JSON (a list of sample times in ms)") from None
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "fiu" and not all(isinstance(v, int | float) and not isinstance(v, bool)
                                                         for v in value.tolist()):
                raise where(i, "samples_ms", raw, "is not a list of numbers")
        elif isinstance(value, list):
            if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
                raise where(i, "samples_ms", raw, "is not a list of numbers")
        else:
            raise where(i, "samples_ms", raw, f"is a {type(value).__name__}, not a list of sample times")
        values = np.asarray(value, dtype=float).reshape(-1)
        if values.size > MAX_SAMPLES_PER_POINT:
            raise where(i, "samples_ms", raw, f"holds {values.size:,} samples, over the limit of "
                        f"{MAX_SAMPLES_PER_POINT:,}")
        if values.size == 0 or values.size != int(count):
            raise where(i, "samples_ms", raw, f"holds {values.size} samples but samples = {int(count)}")
        if not np.isfinite(values).all() or (values <= 0).any():
            raise where(i, "samples_ms", raw, "holds a non-positive or non-finite time")
        for what, expected, got in (("median_ms", median, float(np.median(values))), ("min_ms", low, values.min()),
                                    ("max_ms", high, values.max())):
            if not math.isclose(expected, got, rel_tol=SAMPLE_TOLERANCE, abs_tol=1e-9):
                raise where(i, what, expected, f"but the kept samples give {got}: the summary does not match its "
                            "samples")
        kept.append(values)
    frame["samples_ms"] = pd.Series(kept, index=frame.index, dtype=object)


def check(frame: pd.DataFrame, name: str, manifest: dict | None = None) -> pd.DataFrame:
    """Everything the store relies on, or ImportProblem naming the first problem."""
    if len(frame) == 0:
        raise ImportProblem(f"{name}: the file holds no rows")
    if len(frame) > MAX_ROWS:
        raise ImportProblem(f"{name}: over {MAX_ROWS:,} rows, the limit")
    missing = [c for c in schema.COLUMNS if c not in frame.columns and c not in schema.OPTIONAL_COLUMNS]
    if missing:
        raise ImportProblem(f"{name}: missing column(s) {', '.join(missing)}: is this PinPoint runner output?")
    frame = frame.reset_index(drop=True).copy()
    for column in schema.OPTIONAL_COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    where = _Where(name, frame)
    for column in TEXT_COLUMNS + schema.JSON_TEXT_COLUMNS:
        _text_column(frame, column, where)
    for column in NUMBER_COLUMNS:
        _number_column(frame, column, where)
    for column in BOOL_COLUMNS:
        _bool_column(frame, column, where)
    bad = np.flatnonzero(frame["bytes"].to_numpy() > MAX_POINT_BYTES)
    if bad.size:
        raise where(int(bad[0]), "bytes", frame["bytes"].iloc[int(bad[0])], "is beyond any PinPoint measurement "
                    "(1 TiB)")
    for column in ("median_ms", "min_ms", "max_ms", "bytes"):
        bad = np.flatnonzero(frame[column].to_numpy() <= 0)
        if bad.size:
            raise where(int(bad[0]), column, frame[column].iloc[int(bad[0])], "must be positive")
    unknown = [i for i, e in enumerate(frame["experiment"]) if e not in EXPERIMENTS]
    if unknown:
        raise where(unknown[0], "experiment", frame["experiment"].iloc[unknown[0]],
                    f"is not a PinPoint experiment (known: {', '.join(EXPERIMENTS)})")
    _samples_column(frame, where)
    _check_runs(frame, name, where)
    if manifest is not None:
        _check_manifest(frame, name, manifest)
    try:
        return schema.validate(frame)
    except schema.SchemaError as exc:
        raise ImportProblem(f"{name}: {exc}") from None


def _check_runs(frame: pd.DataFrame, name: str, where) -> None:
    """One experiment, one device, one method version and one time (``gpu.results.store.run_times``) per run; each
    point once."""
    for _, part in frame.groupby("run_id", sort=False):
        for column in ("experiment", "device_name"):
            values = part[column].map(lambda v: None if _missing(v) else v)
            if values.nunique(dropna=False) > 1:
                i = int(part.index[(values != values.iloc[0]).to_numpy()][0])
                raise where(i, column, part[column].loc[i], f"differs from the run's first row "
                            f"({_shown(values.iloc[0])}): one run is one experiment on one device at one time")
        versions = part["method_version"].map(lambda v: None if _missing(v) else v)
        if versions.nunique(dropna=False) > 1:  # one worker measured the run, with one method
            first = versions.iloc[0]
            i = next(i for i, v in versions.items() if v != first)
            raise where(i, "method_version", part["method_version"].loc[i], f"differs from the run's first row "
                        f"({_shown(first)}): one run is measured by one method")
        _, furthest, span = run_times(part["timestamp"])
        if span > MAX_RUN_SPAN_S:
            i = int(part.index[furthest])
            raise where(i, "timestamp", part["timestamp"].loc[i], f"is {span / 3600:,.1f} h from the run's earliest "
                        f"point: one run is one time (at most {MAX_RUN_SPAN_S // 3600} h between its points)")
        keys = key_columns(str(part["experiment"].iloc[0]))
        seen = part[keys].map(schema.key_value).astype(str).agg("|".join, axis=1)
        repeated = seen.duplicated()
        if repeated.any():
            i = int(part.index[repeated.to_numpy()][0])
            raise where(i, "variant", part["variant"].loc[i], "repeats a point already in this run "
                        f"({', '.join(keys)} the same)")


def _check_manifest(frame: pd.DataFrame, name: str, manifest: dict) -> None:
    """Each run in the file is whole and unchanged, as its manifest lists it."""
    found = {str(r): part for r, part in frame.groupby("run_id", sort=False)}
    for run_id, entry in manifest.items():
        part = found.get(run_id)
        if part is None:
            raise ImportProblem(f"{name}: run {shorten(run_id)} is listed in the file's manifest but has no rows: "
                                "a cut or partial file")
        if len(part) != entry["points"]:
            raise ImportProblem(f"{name}: run {shorten(run_id)} has {len(part)} of the {entry['points']} points its "
                                "manifest lists: a cut or partial file")
        if runfiles.content_hash(frame_rows(schema.validate(part))) != entry["sha256"]:
            raise ImportProblem(f"{name}: run {shorten(run_id)}'s points differ from its manifest's content hash: "
                                "the file was changed after export")
    extra = sorted(set(found) - set(manifest))
    if extra:
        raise ImportProblem(f"{name}: run {shorten(extra[0])} is not in the file's manifest")
