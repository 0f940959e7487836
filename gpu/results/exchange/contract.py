"""The import contract: every value of a runs file (runner Parquet or CSV, or another store's points) coerced to its
schema type or refused, and the limits of the work before it (``gpu.results.exchange.imports`` reads files within
them; ``gpu.results.exchange.sqlite_store`` another store). No Streamlit, no CUDA.

Every value is coerced to its schema type or refused, with file, row, run, column and value (shortened to about 40
characters): text without NUL and at most ``MAX_TEXT_CHARS`` (run id ``MAX_RUN_ID_CHARS``), finite numbers within
range, samples a list of finite positive times whose count, median, min and max agree, ISO 8601 timestamps. A run has
one experiment, device and timestamp, and each point once. A file with a manifest (``gpu.results.exchange.runfiles``:
what PinPoint exports) must hold every point of each run, unchanged. What passes can be stored in SQLite and
PostgreSQL alike. Nothing is stored from a file that fails any check.

Column types are the schema's (``gpu.core.schema``: text, true/false, whole, signed, the rest numbers); this module
adds the limits and the checks. The limits are module constants, read when a file is read.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re

import numpy as np
import pandas as pd

from gpu.core import schema
from gpu.core.errors import ImportProblem
from gpu.core.text import shorten
from gpu.experiments import EXPERIMENTS, get_experiment
from gpu.results.exchange import runfiles
from gpu.results.persistence import legacy
from gpu.results.persistence.store import MAX_RUN_SPAN_S, run_times

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


CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


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
            if v is not None and CONTROL_CHARACTER.search(v):
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


def _mean_figures(frame) -> np.ndarray:
    """Per row, whether its experiment declares its ``median_ms`` may be the mean of its samples
    (``figure_is_mean``: the peer latency chase's mean over every SM) rather than their median."""
    means = np.zeros(len(frame), dtype=bool)
    for experiment, part in frame.groupby("experiment", sort=False):
        declared = getattr(get_experiment(str(experiment)), "figure_is_mean", None)
        if declared is not None:
            means[frame.index.get_indexer(part.index)] = [bool(declared(r)) for r in part.to_dict("records")]
    return means


def _samples_column(frame, where) -> None:
    kept, total = [], 0
    means = _mean_figures(frame)
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
            if what == "median_ms" and means[i] and _agrees(expected, float(values.mean())):
                continue
            if not _agrees(expected, got):
                raise where(i, what, expected, f"but the kept samples give {got}: the summary does not match its "
                            "samples")
        kept.append(values)
    frame["samples_ms"] = pd.Series(kept, index=frame.index, dtype=object)


def _agrees(summary: float, computed: float) -> bool:
    return math.isclose(summary, computed, rel_tol=SAMPLE_TOLERANCE, abs_tol=1e-9)


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
    legacy_columns = [c for c in schema.LEGACY_COLUMNS if c in frame.columns]  # an export from before schema 11
    if "param" in legacy_columns:
        _text_column(frame, "param", where)
    if "param_value" in legacy_columns:
        _number_column(frame, "param_value", where)
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
    if manifest is not None:  # on the file as written: an old export's hash counts its legacy columns
        _check_manifest(frame, name, manifest)
    try:
        frame = legacy.map_frame(frame, name)
    except schema.SchemaError as exc:
        raise ImportProblem(str(exc)) from None
    _check_runs(frame, name, where)
    try:
        return schema.validate(frame)
    except schema.SchemaError as exc:
        raise ImportProblem(f"{name}: {exc}") from None


def _check_runs(frame: pd.DataFrame, name: str, where) -> None:
    """One experiment, one device, one method version and one time (``gpu.results.persistence.store.run_times``) per
    run; each point once."""
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
        keys = list(get_experiment(str(part["experiment"].iloc[0])).KEY_COLUMNS)
        # Each cell made text itself: pandas' astype(str) leaves a missing value missing (a peer run's latency rows
        # have no peer), which the join cannot take.
        seen = part[keys].map(lambda v: str(schema.key_value(v))).agg("|".join, axis=1)
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
        if runfiles.content_hash(runfiles.rows_as_written(part)) != entry["sha256"]:
            raise ImportProblem(f"{name}: run {shorten(run_id)}'s points differ from its manifest's content hash: "
                                "the file was changed after export")
    extra = sorted(set(found) - set(manifest))
    if extra:
        raise ImportProblem(f"{name}: run {shorten(extra[0])} is not in the file's manifest")

