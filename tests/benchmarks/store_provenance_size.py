"""How much a run's provenance kept once saves in the runs store: every bundled recording stored as schema version 9
stored it (provenance on every point's row), its size measured, then migrated to version 10 and measured again. Prints
bytes per point: the SQLite file (after VACUUM) and the rows' JSON.

``python tests/benchmarks/store_provenance_size.py [--folder /tmp]`` (CPU only, about a minute).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))


def measure(path: Path) -> dict:
    """The file's bytes once vacuumed, its points, and the characters of their rows and of the runs' provenance."""
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.execute("VACUUM")
    points, rows = connection.execute("SELECT count(*), sum(length(row_json)) FROM points").fetchone()
    columns = [c[1] for c in connection.execute("PRAGMA table_info(runs)")]
    kept = connection.execute("SELECT coalesce(sum(length(provenance)), 0) FROM runs").fetchone()[0] \
        if "provenance" in columns else 0
    pages = connection.execute("PRAGMA page_count").fetchone()[0] * connection.execute("PRAGMA page_size").fetchone()[0]
    connection.close()
    return {"bytes": pages, "points": points, "row_chars": rows, "provenance_chars": kept}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", default=tempfile.gettempdir())
    args = parser.parse_args()

    from gpu.core.access import Actor
    from gpu.results.exchange.catalog import read_bundled
    from gpu.results.persistence import store
    from tests.old_stores import store_at_version

    frames, _, problems = read_bundled()
    if problems:
        raise SystemExit("; ".join(problems))
    path = Path(args.folder) / "pinpoint-provenance-size.sqlite"
    path.unlink(missing_ok=True)
    url = f"sqlite:///{path}"
    store_at_version(url, 9, list(frames.values()))
    before = measure(path)
    store.RunStore(url).migrate(Actor.local("cli"))
    after = measure(path)
    print(f"{len(frames)} bundled runs, {before['points']:,} points")
    for name, m in (("schema 9 (provenance on every row)", before), ("schema 10 (provenance once per run)", after)):
        print(f"{name:<38} file {m['bytes']:>12,} B = {m['bytes'] / m['points']:8,.0f} B/point; rows' JSON "
              f"{m['row_chars']:>12,} chars = {m['row_chars'] / m['points']:7,.0f}/point; runs' provenance "
              f"{m['provenance_chars']:,} chars")
    print(f"saved: {1 - after['bytes'] / before['bytes']:.1%} of the file, "
          f"{(before['row_chars'] - after['row_chars'] - after['provenance_chars']) / before['points']:,.0f} "
          "characters per point")
    path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
