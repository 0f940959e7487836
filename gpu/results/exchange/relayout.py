"""Rewrite Parquet recordings written with provenance on every row in the layout that keeps it once per run
(``gpu.core.schema``), changing nothing they hold (nor which columns they have): each file is read, written
beside itself, read back, and replaced only when the frame read back equals the one read before, column by column,
and so do its runs' content hashes. The file's other metadata (a run file's manifest) is kept. No Streamlit, no
CUDA.

``python -m gpu.results.exchange.relayout [FILE.parquet …]``: the files given, or every bundled recording
(``gpu.results.exchange.catalog.BUNDLED_DIRS``); files already in the new layout are left as they are.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from gpu.core import schema
from gpu.results.exchange import runfiles
from gpu.results.exchange.catalog import BUNDLED_DIRS

KEPT_AS_WRITTEN = (b"pandas", schema.PROVENANCE_KEY)  # metadata the writer makes again


def relayout(path: Path) -> tuple[int, int] | None:
    """Rewrite one recording in place; (bytes before, bytes after), or None when it is already in the new layout.
    AssertionError, and the file left as it was, when the rewritten file would read otherwise."""
    metadata = pq.read_schema(path).metadata or {}
    if schema.PROVENANCE_KEY in metadata:
        return None
    before = schema.read_results(path)
    extra = {k: v for k, v in metadata.items() if k not in KEPT_AS_WRITTEN}
    written = path.with_name(f".{path.name}.relayout")
    try:
        # its columns as they are: a column added to the schema since it was recorded stays absent (read as empty)
        schema.write_parquet(pd.read_parquet(path), written, extra)
        after = schema.read_results(written)
        pd.testing.assert_frame_equal(after, before, check_exact=True)
        assert runfiles.manifest(after) == runfiles.manifest(before), f"{path}: a run's content hash changed"
        assert {k: v for k, v in (pq.read_schema(written).metadata or {}).items() if k not in KEPT_AS_WRITTEN} \
            == extra, f"{path}: its metadata changed"
        size = path.stat().st_size
        os.replace(written, path)
    finally:
        written.unlink(missing_ok=True)
    return size, path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a) for a in args] or [p for d in BUNDLED_DIRS for p in sorted(Path(d).glob("*.parquet"))]
    total = [0, 0]
    for path in paths:
        sizes = relayout(path)
        if sizes is None:
            print(f"{path}: already keeps its provenance once")
            continue
        total = [total[0] + sizes[0], total[1] + sizes[1]]
        print(f"{path}: {sizes[0]:,} → {sizes[1]:,} bytes")
    print(f"rewritten: {total[0]:,} → {total[1]:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
