"""Reading runs from other machines (runner Parquet/CSV) for the store, checked before anything is written.

Every check names the first problem it finds (file, row, column and value), so a person can fix the file;
nothing is stored from a file that fails any check. No Streamlit, no CUDA.
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from gpu import schema

DEFAULT_MAX_BYTES = 256 * 1024**2
MAX_ROWS = 200_000
MAX_POINT_BYTES = 1 << 40  # 1 TiB: no PinPoint point moves more
SAMPLE_TOLERANCE = 1e-6


class ImportProblem(ValueError):
    """A file that cannot be imported; the message names the first problem."""


def max_import_bytes() -> int:
    try:
        return int(os.environ.get("PINPOINT_IMPORT_MAX_BYTES", DEFAULT_MAX_BYTES))
    except ValueError:
        return DEFAULT_MAX_BYTES


def read_upload(name: str, data: bytes | None = None, path: str | Path | None = None,
                limit: int | None = None) -> pd.DataFrame:
    """A results frame from a file's bytes (upload) or path (CLI), or ImportProblem."""
    limit = limit or max_import_bytes()
    size = len(data) if data is not None else Path(path).stat().st_size
    if size > limit:
        raise ImportProblem(f"{name}: {size / 1e6:,.1f} MB is over the import limit of {limit / 1e6:,.0f} MB "
                            "(PINPOINT_IMPORT_MAX_BYTES sets it)")
    if not name.lower().endswith((".parquet", ".csv")):
        raise ImportProblem(f"{name}: PinPoint imports runner output as .parquet or .csv")
    source = io.BytesIO(data) if data is not None else str(path)
    kind = "CSV" if name.lower().endswith(".csv") else "Parquet"
    try:
        if name.lower().endswith(".csv"):
            frame = pd.read_csv(source)
            if "samples_ms" in frame:
                import json

                frame["samples_ms"] = frame["samples_ms"].map(lambda s: json.loads(s) if isinstance(s, str) else s)
        else:
            frame = pd.read_parquet(source)
    except Exception as exc:  # truncated Parquet, binary junk, a CSV that is no table
        raise ImportProblem(f"{name}: not a readable {kind} file ({type(exc).__name__}: {str(exc)[:200]})") from None
    return check(frame, name)


def _shown(value) -> str:
    return repr(value.item() if isinstance(value, np.generic) else value)


def _where(frame: pd.DataFrame, i: int) -> str:
    row = frame.iloc[i]
    return f"row {i + 1} (run {row.get('run_id')}, {row.get('variant')}, {row.get('bytes')} B)"


def check(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """Everything the store relies on, or ImportProblem naming the first problem."""
    from gpu.experiments import EXPERIMENTS

    if len(frame) == 0:
        raise ImportProblem(f"{name}: the file holds no rows")
    if len(frame) > MAX_ROWS:
        raise ImportProblem(f"{name}: {len(frame):,} rows is over the limit of {MAX_ROWS:,}")
    missing = [c for c in schema.COLUMNS if c not in frame.columns and c not in schema.OPTIONAL_COLUMNS]
    if missing:
        raise ImportProblem(f"{name}: missing column(s) {', '.join(missing)}: is this PinPoint runner output?")
    for column in schema.NUMERIC_COLUMNS:
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = np.flatnonzero(~np.isfinite(values.to_numpy(dtype=float)))
        if bad.size:
            i = int(bad[0])
            raise ImportProblem(f"{name}: {_where(frame, i)}: {column} is {_shown(frame[column].iloc[i])}, "
                                "not a finite number")
        frame[column] = values
    for column in ("median_ms", "min_ms", "max_ms", "bytes"):
        bad = np.flatnonzero(frame[column].to_numpy() <= 0)
        if bad.size:
            i = int(bad[0])
            raise ImportProblem(f"{name}: {_where(frame, i)}: {column} = {frame[column].iloc[i]} must be positive")
    for column in ("cv", "samples", "gbps"):
        bad = np.flatnonzero(frame[column].to_numpy() < 0)
        if bad.size:
            i = int(bad[0])
            raise ImportProblem(f"{name}: {_where(frame, i)}: {column} = {frame[column].iloc[i]} is negative")
    bad = np.flatnonzero(frame["bytes"].to_numpy() > MAX_POINT_BYTES)
    if bad.size:
        i = int(bad[0])
        raise ImportProblem(f"{name}: {_where(frame, i)}: bytes = {frame['bytes'].iloc[i]:,.0f} is beyond any "
                            "PinPoint measurement (1 TiB)")
    unknown = sorted(set(frame["experiment"].astype(str)) - set(EXPERIMENTS))
    if unknown:
        raise ImportProblem(f"{name}: unknown experiment(s) {', '.join(unknown)} (known: {', '.join(EXPERIMENTS)})")
    if frame["run_id"].isna().any() or (frame["run_id"].astype(str).str.strip() == "").any():
        raise ImportProblem(f"{name}: every row needs a run_id")
    mixed = frame.groupby("run_id")["experiment"].nunique()
    if (mixed > 1).any():
        raise ImportProblem(f"{name}: run {mixed[mixed > 1].index[0]} mixes experiments: one run is one experiment")
    for i, (samples, median, low, high, count) in enumerate(zip(frame["samples_ms"], frame["median_ms"],
                                                              frame["min_ms"], frame["max_ms"], frame["samples"],
                                                              strict=True)):
        try:
            values = np.asarray(samples, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise ImportProblem(f"{name}: {_where(frame, i)}: samples_ms is not a list of numbers") from None
        if values.size == 0 or values.size != int(count):
            raise ImportProblem(f"{name}: {_where(frame, i)}: {values.size} samples kept but samples = {int(count)}")
        if not np.isfinite(values).all() or (values <= 0).any():
            raise ImportProblem(f"{name}: {_where(frame, i)}: samples_ms holds a non-positive or non-finite time")
        for what, expected, got in (("median_ms", median, float(np.median(values))), ("min_ms", low, values.min()),
                                    ("max_ms", high, values.max())):
            if not math.isclose(expected, got, rel_tol=SAMPLE_TOLERANCE, abs_tol=1e-9):
                raise ImportProblem(f"{name}: {_where(frame, i)}: {what} = {expected} but the kept samples give "
                                    f"{got}: the summary does not match its samples")
    try:
        return schema.validate(frame)
    except schema.SchemaError as exc:
        raise ImportProblem(f"{name}: {exc}") from None
