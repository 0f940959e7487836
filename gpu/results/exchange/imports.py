"""Reading runs from other machines (runner Parquet/CSV) for the store: bounded work first, then one contract
(``gpu.results.exchange.contract``; another store's SQLite file is read by ``gpu.results.exchange.sqlite_store``).

Bounded work before trust: only regular files are read (a FIFO or a link to ``/dev/zero`` is refused before it is
opened), at most the size limit is read, and a Parquet file's row and value counts are taken from its metadata
before any column is decoded; text columns stay dictionary-encoded until their lengths are checked, so decoding
is capped (``contract.MAX_DECODED_BYTES``). No Streamlit, no CUDA.
"""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pandas as pd

from gpu.core import schema
from gpu.core.errors import ImportProblem, StoreError
from gpu.core.text import shorten
from gpu.results.exchange import contract, runfiles
from gpu.results.exchange.contract import _shown, check
from gpu.results.persistence.store import checked_params

UNVERIFIED_HINT = "--unverified on the command line, or the Runs page's 'Store a CSV without a manifest' box"


def read_upload(name: str, data: bytes | None = None, path: str | Path | None = None,
                limit: int | None = None, unverified: bool = False) -> pd.DataFrame:
    """A results frame from a file's bytes (upload) or path (CLI), or ImportProblem.

    A CSV without a manifest is refused unless ``unverified``: a CSV cut at a row boundary is still a well-formed
    table, and only a manifest shows that rows are missing (Parquet's footer shows a cut file)."""
    limit = limit or contract.max_import_bytes()
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
    check_regular_file(shown, path, limit)
    try:
        with open(path, "rb") as f:
            return f.read(limit + 1)  # a file that grew (or a /proc file that claims 0 bytes) stops at the limit
    except OSError as exc:
        raise ImportProblem(f"{shown}: cannot be read ({exc.strerror or type(exc).__name__})") from None


def check_regular_file(shown: str, path: Path, limit: int) -> None:
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


def _read_csv(shown: str, data: bytes) -> tuple[pd.DataFrame, dict | None]:
    try:
        # Every cell as text: the contract below coerces each column itself and names what it cannot.
        frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, na_values=[""],
                            nrows=contract.MAX_ROWS + 1)
    except Exception as exc:  # binary junk, a CSV that is no table
        raise ImportProblem(f"{shown}: not a readable CSV file ({type(exc).__name__}: "
                            f"{shorten(str(exc), 120)})") from None
    manifest = None
    if set(runfiles.MANIFEST_COLUMNS) <= set(frame.columns):
        # A PinPoint export: its writer put an apostrophe before formula-like and empty text; one comes off.
        for column in frame.columns:
            if column not in contract.NUMBER_COLUMNS:
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
    if meta.num_rows > contract.MAX_ROWS:
        raise ImportProblem(f"{shown}: {meta.num_rows:,} rows (from the file's metadata) is over the limit of "
                            f"{contract.MAX_ROWS:,}: refused before decoding")
    values = sum(meta.row_group(g).column(c).num_values for g in range(meta.num_row_groups)
                 for c in range(meta.num_columns))
    if values > contract.MAX_VALUES:
        raise ImportProblem(f"{shown}: {values:,} values (from the file's metadata) is over the limit of "
                            f"{contract.MAX_VALUES:,}: refused before decoding")
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
    if declared > contract.MAX_DECODED_BYTES:
        raise ImportProblem(f"{shown}: its columns declare {declared / 1e6:,.0f} MB decoded (from the file's "
                            f"metadata), over the limit of {contract.MAX_DECODED_BYTES / 1e6:,.0f} MB: refused before "
                            "decoding")
    try:
        text = [name for name in wanted if _is_text(arrow_schema.field(name).type)]
        # Text stays dictionary-encoded until its decoded size is known: a short file can repeat one long
        # string in every row. Columns are read one at a time, the running size checked after each.
        parquet_file = pq.ParquetFile(io.BytesIO(data), read_dictionary=text)
        columns = []
        for name in wanted:
            columns.append(parquet_file.read(columns=[name]).column(0))
            if sum(c.nbytes for c in columns) > contract.MAX_DECODED_BYTES:
                raise ImportProblem(f"{shown}: decoding would take over {contract.MAX_DECODED_BYTES / 1e6:,.0f} MB, "
                                    "the limit: refused")
        table = pa.table(dict(zip(wanted, columns, strict=True))) if wanted else pa.table({})
        decoded = table.nbytes
        for name in text:
            column = table.column(name)
            for chunk in column.chunks:
                lengths = pc.binary_length(chunk.dictionary)
                decoded += int(pc.sum(pc.take(lengths, chunk.indices)).as_py() or 0)
            if decoded > contract.MAX_DECODED_BYTES:
                break
        if decoded > contract.MAX_DECODED_BYTES:
            raise ImportProblem(f"{shown}: decoding would take {decoded / 1e6:,.0f} MB, over the limit of "
                                f"{contract.MAX_DECODED_BYTES / 1e6:,.0f} MB: refused")
        for name in text:
            column = table.column(name)
            table = table.set_column(table.schema.get_field_index(name), name,
                                     pa.chunked_array([c.dictionary_decode() for c in column.chunks],
                                                      type=column.type.value_type))
        # Without the writer's pandas metadata: its claimed types are what the contract below checks.
        frame = table.replace_schema_metadata(None).to_pandas(timestamp_as_object=True, date_as_object=True)
        raw = (arrow_schema.metadata or {}).get(runfiles.MANIFEST_KEY)
        kept_once = (arrow_schema.metadata or {}).get(schema.PROVENANCE_KEY)
        if kept_once is not None:  # each run's provenance once (files written before keep it on every row)
            frame = schema.join_provenance_frame(frame, schema.checked_provenance_block(
                kept_once, frame["run_id"] if "run_id" in frame.columns else [], shown), shown)
    except ImportProblem:
        raise
    except schema.SchemaError as exc:
        raise ImportProblem(str(exc)) from None
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


_SCHEMA_COLUMNS = set(schema.COLUMNS + schema.LEGACY_COLUMNS)  # an export from before schema 11 holds the legacy pair
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
