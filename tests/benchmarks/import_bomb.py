"""How long and how much memory the importer spends refusing a Parquet decompression bomb.

``python tests/benchmarks/import_bomb.py [--rows 300000000] [--file /tmp/pinpoint-bomb.parquet]``

Writes (once, in 10 M-row pieces) a small Parquet file whose metadata says it holds ``--rows`` rows of nulls, then
refuses it through ``gpu.results.imports.read_upload`` in a fresh process and prints the wall time of the refusal and
the process's peak memory before and after it (ru_maxrss). The target: under 1 s and under 200 MB more.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import resource, sys, time
sys.path.insert(0, {root!r})
from gpu.results import imports
path = {path!r}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
started = time.perf_counter()
try:
    imports.read_upload("bomb.parquet", path=path)
    print("ACCEPTED")
except imports.ImportProblem as exc:
    print("refused:", exc)
print(f"refusal {{time.perf_counter() - started:.3f}} s; peak memory {{before:.0f}} MB before, "
      f"{{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}} MB after")
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=300_000_000)
    parser.add_argument("--file", default="/tmp/pinpoint-bomb.parquet")
    args = parser.parse_args()
    path = Path(args.file)
    if not path.exists():
        started = time.perf_counter()
        write_bomb(path, args.rows)
        print(f"wrote {path} ({args.rows:,} rows, {path.stat().st_size / 1e6:.1f} MB) in "
              f"{time.perf_counter() - started:.0f} s")
    print(f"{path}: {path.stat().st_size / 1e6:.2f} MB on disk")
    done = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT), path=str(path))], capture_output=True,
                          text=True, timeout=600, env={**os.environ})
    print(done.stdout.strip() or done.stderr.strip()[-2000:])


if __name__ == "__main__":
    main()
