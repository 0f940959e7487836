"""Run files that travel between machines: the per-run manifest (point count and content hash) and CSV cells made
safe for spreadsheets. No Streamlit, no CUDA.

A run's content hash is SHA-256 over its points in one canonical form (every schema column but ``run_id``; whole
floats as integers, missing values as null, rows in sorted order), so the same run read from Parquet, from
CSV or from the store hashes alike, and any changed, missing or added point changes it. A column added to the
schema after runs were hashed (``schema.HASHED_WHEN_SET``) counts only where a point has a value, so the runs
recorded before it keep their hash.

CSV cells of text columns that a spreadsheet would run as a formula (starting with ``= + - @``, tab or CR; the
OWASP rule) are written with a leading apostrophe; so is a cell that starts with an apostrophe, so that
reading strips exactly one back, and empty text is a lone apostrophe (an empty cell is a missing value). Only a
file that carries a manifest (a PinPoint export) is unescaped on import: in any other CSV a leading apostrophe is
the writer's own and kept. Numeric columns are numbers and are never prefixed.

A run's parameters (``runs.params``: the JSON its checked request's plain values make) travel in the manifest too,
when the writer knows them: as ``params`` in a run's Parquet manifest entry, and as a ``manifest_params`` column on
every row of a CSV; an import stores them with the run.

A Parquet file keeps each run's provenance once, in its metadata (``gpu.core.schema``); a CSV, made for
spreadsheets, keeps it on every row. Both import, and so do files written before, with provenance on every row.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from gpu.core import schema
from gpu.core.schema import ESCAPE, FORMULA_STARTS, escape_cell, frame_rows, unescape_cell  # noqa: F401

MANIFEST_KEY = b"pinpoint.manifest"
MANIFEST_COLUMNS = ["manifest_points", "manifest_sha256"]
PARAMS_COLUMN = "manifest_params"  # a CSV's run parameters, on every row of the run (when the writer knows them)


def _canonical(value):
    if isinstance(value, np.ndarray | list | tuple):
        return [_canonical(v) for v in value]
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        value = float(value)
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() else value
    return str(value)


def content_hash(rows: list[dict]) -> str:
    """SHA-256 of one run's points (rows of the results schema, as dicts) in canonical form. Rows recorded before
    schema version 11 hold its legacy columns (``schema.LEGACY_COLUMNS``): their hash, as written, counts them."""
    columns = [c for c in schema.COLUMNS if c != "run_id"]
    if rows and any(c in rows[0] for c in schema.LEGACY_COLUMNS):
        columns += schema.LEGACY_COLUMNS

    def point(row: dict) -> dict:
        values = {c: _canonical(row.get(c)) for c in columns}
        return {c: v for c, v in values.items() if v is not None or c not in schema.HASHED_WHEN_SET}

    canonical = sorted(json.dumps(point(row), sort_keys=True, separators=(",", ":")) for row in rows)
    return hashlib.sha256("\n".join(canonical).encode()).hexdigest()


def rows_as_written(part: pd.DataFrame) -> list[dict]:
    """A run's rows as a file holds them, for the content hash its manifest lists: the schema's columns, and the
    legacy ones (``schema.LEGACY_COLUMNS``) where the file holds them (written before schema version 11)."""
    held = [c for c in schema.LEGACY_COLUMNS if c in part.columns]
    rows = frame_rows(schema.validate(part.drop(columns=held)))
    for row, legacy_row in zip(rows, part[held].to_dict("records"), strict=True):
        row.update(legacy_row)  # content_hash puts every value in canonical form
    return rows


def manifest(frame: pd.DataFrame) -> dict[str, dict]:
    """run_id → {"points": n, "sha256": content hash} for every run of a results frame."""
    return {str(run_id): {"points": len(part), "sha256": content_hash(frame_rows(part))}
            for run_id, part in frame.groupby("run_id", sort=False)}


def to_csv_bytes(frame: pd.DataFrame, params: dict[str, str] | None = None) -> bytes:
    """A results frame as CSV: samples as JSON lists (exact floats), formula-like text escaped, and the manifest
    as two columns on every row (three with ``params``: run id → its parameters as JSON text)."""
    frame = schema.validate(frame)
    runs = manifest(frame)
    out = frame.copy()
    run_ids = frame["run_id"].astype(str)  # the manifest is keyed by the id as stored, before any cell is escaped
    out["samples_ms"] = out["samples_ms"].map(lambda s: json.dumps([float(v) for v in s]))
    for column in out.columns:
        if column != "samples_ms" and not pd.api.types.is_numeric_dtype(out[column]) \
                and not pd.api.types.is_bool_dtype(out[column]):
            out[column] = out[column].map(escape_cell)
    out["manifest_points"] = run_ids.map(lambda r: runs[r]["points"])
    out["manifest_sha256"] = run_ids.map(lambda r: runs[r]["sha256"])
    if params:
        out[PARAMS_COLUMN] = run_ids.map(lambda r: params.get(r)).map(lambda p: None if p is None else escape_cell(p))
    # CRLF row ends (RFC 4180): a cell holding a lone CR is then quoted, not read back as a row break.
    return out.to_csv(index=False, lineterminator="\r\n").encode()


def write_parquet(frame: pd.DataFrame, path, params: dict[str, str] | None = None) -> None:
    """A results frame as Parquet with the manifest in the file's metadata (each run's ``params`` in its entry), and
    each run's provenance once beside it (``gpu.core.schema``)."""
    frame = schema.validate(frame)
    runs = {r: {**e, **({"params": params[r]} if (params or {}).get(r) is not None else {})}
            for r, e in manifest(frame).items()}
    schema.write_parquet(frame, path, {MANIFEST_KEY: json.dumps(runs).encode()})


FORMATS = (".parquet", ".csv")  # what a run file's suffix names


def out_problem(out: str) -> str | None:
    """Why a run file cannot be written at ``out``, in one line, or None: its suffix must name a format (.parquet or
    .csv), its folder must exist, and it must be a regular file that can be created or appended to. Asked before
    anything is measured; a file it creates to find out is removed again (nothing existing is changed)."""
    if Path(out).suffix.lower() not in FORMATS:
        return f"--out {shorten_path(out)}: the name must end in {' or '.join(FORMATS)}, the format it is written in"
    return writable_problem(out)


def writable_problem(out: str) -> str | None:
    """Why a file cannot be written at ``out`` (its folder missing, not a regular file, no permission), or None.
    Nothing existing is changed: a file created to find out is removed again, and a pipe is never opened."""
    path = Path(out)
    try:
        info = path.stat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        return f"--out {shorten_path(out)} cannot be written: {exc.strerror or exc}"
    if info is not None and not stat.S_ISREG(info.st_mode):
        return f"--out {shorten_path(out)} is not a regular file (a folder, a device or a pipe)"
    try:
        if info is None:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            path.unlink()
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
    except OSError as exc:
        reason = "no such folder" if isinstance(exc, FileNotFoundError) else exc.strerror or str(exc)
        return f"--out {shorten_path(out)} cannot be written: {reason}"
    return None


def shorten_path(out: str) -> str:
    text = str(out)
    return text if len(text) <= 120 else f"{text[:120]}…"


def write_or_keep(frame: pd.DataFrame, out: str, params: dict[str, str] | None = None) -> tuple[str, str | None]:
    """Write the run file at ``out``; when that fails after the measurement (the disk filled, the folder went away),
    keep it in a file of the temporary folder instead: (the path written, why ``out`` was not, or None)."""
    try:
        write(frame, out, params)
        return out, None
    except OSError as exc:
        reason = shorten_path(" ".join(str(exc.strerror or exc).split()))
    suffix = Path(out).suffix.lower()
    return keep(frame, params, suffix if suffix in FORMATS else ".parquet"), reason


def keep(frame: pd.DataFrame, params: dict[str, str] | None = None, suffix: str = ".parquet") -> str:
    """Write a measured run that has nowhere else to go to the temporary folder, named by its run id; its path."""
    run_id = str(frame["run_id"].iloc[0]) if "run_id" in frame.columns and not frame.empty else "run"
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in run_id)[:64]
    kept = Path(tempfile.gettempdir()) / f"pinpoint-{safe}{suffix}"
    write(frame, str(kept), params)
    return str(kept)


def write(frame: pd.DataFrame, out: str, params: dict[str, str] | None = None) -> None:
    """Parquet, or CSV when ``out`` ends in .csv; both carry the manifest (and each run's ``params``, when given)."""
    if str(out).lower().endswith(".csv"):
        with open(out, "wb") as f:
            f.write(to_csv_bytes(frame, params))
    else:
        write_parquet(frame, out, params)
