"""How long and how much memory the importer spends refusing Parquet decompression bombs.

``python tests/benchmarks/import_bomb.py [--rows 300000000] [--file /tmp/pinpoint-bomb.parquet] [--only NAME]``

Writes (once each, in pieces, under /tmp) small Parquet files that decode to gigabytes, then refuses each through
``gpu.results.exchange.imports.read_upload`` in a fresh process and prints the wall time of the refusal and the
process's peak memory (VmHWM) before and after it. The bombs:

- ``rows``: metadata says ``--rows`` rows of nulls (the target: under 1 s and under 200 MB more);
- ``fixed-600`` / ``fixed-1500``: a 5 MB fixed-size binary ``host`` column over 600 / 1,500 rows beside a real
  run's columns (before bounded column reads: 3.2 GB / 7.5 GB peak);
- ``fixed-extra``: the same 5 MB × 600 column under a name outside the schema (never read: the file is then
  judged on its other columns, here refused for its repeated points);
- ``text-600``: a 5 MB text ``host`` value on each of 600 rows (kept dictionary-encoded until measured);
- ``list-text``: ``samples_ms`` as a ``list<string>`` of 1 MB strings over 600 rows (before: 5.2 GB, then an error).
The target for every refused file: peak under 500 MB.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import sys, time
sys.path.insert(0, {root!r})
from gpu.results.exchange import imports
path = {path!r}
def peak_mb():  # this process's own high-water mark (ru_maxrss would carry over the parent's across exec)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024
before = peak_mb()
started = time.perf_counter()
try:
    imports.read_upload("bomb.parquet", path=path)
    print("ACCEPTED")
except imports.ImportProblem as exc:
    print("refused:", exc)
print(f"refusal {{time.perf_counter() - started:.3f}} s; peak memory {{before:.0f}} MB before, "
      f"{{peak_mb():.0f}} MB after")
"""


def write_bomb(path: Path, rows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("run_id", pa.string()), ("bytes", pa.int64())])
    piece = 10_000_000
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for start in range(0, rows, piece):
            n = min(piece, rows - start)
            writer.write_table(pa.table({"run_id": pa.nulls(n, pa.string()), "bytes": pa.nulls(n, pa.int64())}))


def write_wide_bomb(path: Path, rows: int, column: str, width: int = 5_000_000, as_text_list: bool = False,
                    as_text: bool = False) -> None:
    """A real run's columns repeated to ``rows`` rows, plus ``column`` holding ``width`` bytes a row (a fixed-size
    binary, or a list of one text value for ``samples_ms``); written 10 rows at a time, zstd-compressed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, str(ROOT))
    from gpu.core import schema as results_schema
    from gpu.results.exchange.catalog import BUNDLED_DIRS

    base = pa.Table.from_pandas(results_schema.read_results(next(BUNDLED_DIRS[1].glob("managed_*.parquet"))),
                                preserve_index=False).replace_schema_metadata(None)
    if column in base.column_names:
        base = base.drop_columns([column])
    piece_rows = 10
    base = base.take([i % base.num_rows for i in range(piece_rows)])
    value = b"\x00" * width
    piece = (pa.array([["x" * width]] * piece_rows, pa.list_(pa.string())) if as_text_list
             else pa.array(["x" * width] * piece_rows, pa.string()) if as_text
             else pa.array([value] * piece_rows, pa.binary(width)))
    table = base.append_column(column, piece)
    with pq.ParquetWriter(path, table.schema, compression="zstd") as writer:
        for _ in range(rows // piece_rows):
            writer.write_table(table)


BOMBS = {
    "fixed-600": lambda path: write_wide_bomb(path, 600, "host"),
    "fixed-1500": lambda path: write_wide_bomb(path, 1500, "host"),
    "fixed-extra": lambda path: write_wide_bomb(path, 600, "attachment"),
    "text-600": lambda path: write_wide_bomb(path, 600, "host", as_text=True),
    "list-text": lambda path: write_wide_bomb(path, 600, "samples_ms", width=1_000_000, as_text_list=True),
}


def refuse(path: Path) -> None:
    print(f"{path}: {path.stat().st_size / 1e6:.2f} MB on disk")
    done = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT), path=str(path))], capture_output=True,
                          text=True, timeout=600, env={**os.environ})
    print(done.stdout.strip() or done.stderr.strip()[-2000:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=300_000_000)
    parser.add_argument("--file", default="/tmp/pinpoint-bomb.parquet")
    parser.add_argument("--only", choices=["rows", *BOMBS], help="one bomb (default: all)")
    args = parser.parse_args()
    if args.only in (None, "rows"):
        path = Path(args.file)
        if not path.exists():
            started = time.perf_counter()
            write_bomb(path, args.rows)
            print(f"wrote {path} ({args.rows:,} rows, {path.stat().st_size / 1e6:.1f} MB) in "
                  f"{time.perf_counter() - started:.0f} s")
        refuse(path)
    for name, write in BOMBS.items():
        if args.only not in (None, name):
            continue
        path = Path(f"/tmp/pinpoint-bomb-{name}.parquet")
        if not path.exists():
            started = time.perf_counter()
            write(path)
            print(f"wrote {path} in {time.perf_counter() - started:.0f} s")
        refuse(path)


if __name__ == "__main__":
    main()
