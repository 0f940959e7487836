"""A run's provenance kept once: the provenance values (``schema.PROVENANCE_COLUMNS``) that every row of a run holds
alike are kept with the run, and each row keeps only what differs from them. No Streamlit, no CUDA; pandas and
PyArrow are imported where a frame or a file is made.

Where it is kept: in the runs store, ``runs.provenance`` (canonical JSON of one object, since schema version 10;
``gpu.results.persistence.migrations``); in a Parquet recording or run file, the file's key-value metadata
``pinpoint.provenance``: JSON of run id → that object, and a column moves there only where every run of the file
holds it alike on all of its rows (a peer run's rows name different GPUs: its ``gpu_index`` and ``gpu_uuid`` stay on
the rows; so do the timestamps of a run whose jobs started minutes apart). Reading puts the values back on every
row: the same frame, the same content hash. A CSV for spreadsheets keeps provenance on every row.

A provenance block read from a file or a store is checked before it is used: an object of provenance columns, each
value of its column's type (text, or a finite number), at most ``MAX_PROVENANCE_CHARS`` characters per run, naming
only runs that have rows, and agreeing with any value a row holds itself; otherwise ``SchemaError`` in one line that
names the block.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from gpu.core import text
from gpu.core.errors import SchemaError
from gpu.core.schema import PROVENANCE_COLUMNS, TEXT_COLUMNS, key_value

if TYPE_CHECKING:
    import pandas as pd

PROVENANCE_KEY = b"pinpoint.provenance"
MAX_PROVENANCE_CHARS = 16_384  # one run's block: ~1,000 characters in practice


def canonical(value) -> str:
    """A provenance block as JSON: keys sorted, no spaces, no NaN."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _alike(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def shared(rows: list[dict]) -> dict:
    """The provenance values every one of ``rows`` (JSON-ready dicts) holds alike; a column some row lacks, or holds
    otherwise, or whose value is not of its type (a block holding it would be refused), is left out: it stays on the
    rows."""
    if not rows:
        return {}
    first = rows[0]
    return {c: first[c] for c in PROVENANCE_COLUMNS
            if c in first and _typed(c, first[c]) and all(c in row and _alike(row[c], first[c]) for row in rows[1:])}


def split(rows: list[dict]) -> tuple[dict, list[dict]]:
    """A run's rows as kept: (its provenance, each row without it)."""
    common = shared(rows)
    return common, [{k: v for k, v in row.items() if k not in common} for row in rows]


def joined(row: dict, provenance: dict, what: str) -> dict:
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


def checked(value, what: str) -> dict:
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
    if len(canonical(value)) > MAX_PROVENANCE_CHARS:
        raise SchemaError(f"{what}: its provenance block is over the limit of {MAX_PROVENANCE_CHARS:,} characters")
    return value


def _typed(column: str, value) -> bool:
    if value is None:
        return True
    if column in TEXT_COLUMNS:
        return isinstance(value, str)
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def checked_block(raw, run_ids, what: str) -> dict[str, dict]:
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
    return {run_id: checked(entry, f"{what}: run {text.shorten(run_id)}") for run_id, entry in block.items()}


# --- frames and Parquet files ---------------------------------------------------------------------------------
def split_frame(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, dict]]:
    """``frame`` (results schema; a file recorded before a column existed may lack it) without the provenance columns
    that every run holds alike on all of its rows, and run id → those values: what a Parquet file keeps."""
    from gpu.core.schema import _json_value  # a cell as JSON holds it, as frame_rows makes it

    present = [c for c in PROVENANCE_COLUMNS if c in frame.columns]
    by_run = {str(run_id): shared([{c: _json_value(v) for c, v in row.items()}
                                   for row in part[present].to_dict("records")])
              for run_id, part in frame.groupby("run_id", sort=False)}
    moved = [c for c in present if by_run and all(c in p for p in by_run.values())]
    return frame.drop(columns=moved), {run_id: {c: p[c] for c in moved} for run_id, p in by_run.items()}


def join_frame(frame: pd.DataFrame, block: dict[str, dict], what: str) -> pd.DataFrame:
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

    points, block = split_frame(frame)
    table = pa.Table.from_pandas(points, preserve_index=False)
    kept = {**(table.schema.metadata or {}), **(metadata or {}), PROVENANCE_KEY: canonical(block).encode()}
    pq.write_table(table.replace_schema_metadata(kept), path)


def read_block(path) -> bytes | None:
    """A Parquet file's provenance block as written (None: a file written before, with provenance on every row)."""
    import pyarrow.parquet as pq

    return (pq.read_schema(path).metadata or {}).get(PROVENANCE_KEY)
