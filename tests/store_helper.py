"""Runs in a separate process for the store's concurrency tests: import one file into a store.

``python tests/store_helper.py URL FILE [--stall MARKER]``: with --stall, the process writes MARKER once its
transaction has inserted the run row, then sleeps inside the transaction (the test kills it there).
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    import sqlalchemy as sa

    from gpu.results.exchange import imports
    from gpu.results.persistence.store import RunStore

    url, path = sys.argv[1], sys.argv[2]
    store = RunStore(url)
    if "--stall" in sys.argv:
        marker = Path(sys.argv[sys.argv.index("--stall") + 1])

        @sa.event.listens_for(store.engine, "before_cursor_execute")
        def stall(conn, cursor, statement, parameters, context, executemany):
            if statement.lstrip().upper().startswith("INSERT INTO POINTS"):
                marker.write_text("inside the transaction")
                time.sleep(60)

    frame = imports.read_upload(Path(path).name, path=path)
    for result in store.save(frame, "import"):
        print(result.message())


if __name__ == "__main__":
    main()
