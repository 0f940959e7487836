"""Rewrite Parquet recordings in the layout this version writes, changing nothing they hold: each run's provenance
kept once (``gpu.core.schema``, schema version 10), and a point's coordinates in the columns named by axis instead of
the legacy ``param``/``param_value`` pair (``gpu.results.persistence.legacy``, schema version 11). Each file is read,
written beside itself, read back, and replaced only when the frame read back equals the one read before (the old
frame with its legacy pair mapped), column by column, and so do its runs' content hashes. The file's other metadata
is kept; a run file's manifest gets its runs' new content hashes, each only after the file as written was found to
match the old one. Columns are kept as they were: a column the schema gained since stays absent (read as empty). No
Streamlit, no CUDA.

``python -m gpu.results.exchange.relayout [FILE.parquet …]``: the files given, or every bundled recording
(``gpu.results.exchange.catalog.BUNDLED_DIRS``); files already in this layout are left as they are.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from gpu.core import schema
from gpu.results.exchange import runfiles
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence import legacy

KEPT_AS_WRITTEN = (b"pandas", schema.PROVENANCE_KEY)  # metadata the writer makes again


def relayout(path: Path) -> tuple[int, int] | None:
    """Rewrite one recording in place; (bytes before, bytes after), or None when it is already in this layout.
    AssertionError, and the file left as it was, when the rewritten file would read otherwise."""
    arrow_schema = pq.read_schema(path)
    metadata = arrow_schema.metadata or {}
    held = [c for c in schema.LEGACY_COLUMNS if c in arrow_schema.names]
    if schema.PROVENANCE_KEY in metadata and not held:
        return None
    as_written = schema.read_frame(path)
    before = legacy.read_results(path)
    extra = {k: v for k, v in metadata.items() if k not in KEPT_AS_WRITTEN}
    if runfiles.MANIFEST_KEY in extra and held:
        extra[runfiles.MANIFEST_KEY] = _rehashed(extra[runfiles.MANIFEST_KEY], as_written, before, path)
    written = path.with_name(f".{path.name}.relayout")
    try:
        schema.write_parquet(legacy.map_frame(as_written, str(path)), written, extra)
        after = legacy.read_results(written)
        pd.testing.assert_frame_equal(after, before, check_exact=True)
        assert runfiles.manifest(after) == runfiles.manifest(before), f"{path}: a run's content hash changed"
        assert {k: v for k, v in (pq.read_schema(written).metadata or {}).items() if k not in KEPT_AS_WRITTEN} \
            == extra, f"{path}: its metadata changed"
        size = path.stat().st_size
        os.replace(written, path)
    finally:
        written.unlink(missing_ok=True)
    return size, path.stat().st_size


def _rehashed(raw: bytes, as_written: pd.DataFrame, mapped: pd.DataFrame, path: Path) -> bytes:
    """A run file's manifest with each run's content hash of its mapped rows, once the old hash is found to match
    the rows as written."""
    entries = json.loads(raw)
    hashes = runfiles.manifest(mapped)
    for run_id, entry in entries.items():
        part = as_written[as_written["run_id"].astype(str) == run_id]
        old = runfiles.content_hash(runfiles.rows_as_written(part))
        assert old == entry["sha256"], f"{path}: run {run_id} does not match its manifest's content hash"
        entry["sha256"] = hashes[run_id]["sha256"]
    return json.dumps(entries).encode()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a) for a in args] or [p for d in BUNDLED_DIRS for p in sorted(Path(d).glob("*.parquet"))]
    total = [0, 0]
    for path in paths:
        sizes = relayout(path)
        if sizes is None:
            print(f"{path}: already in this layout")
            continue
        total = [total[0] + sizes[0], total[1] + sizes[1]]
        print(f"{path}: {sizes[0]:,} → {sizes[1]:,} bytes")
    print(f"rewritten: {total[0]:,} → {total[1]:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
