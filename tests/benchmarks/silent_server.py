"""How long a PostgreSQL store takes to give up on a server that goes silent mid-session, with the defaults.

``PINPOINT_DB_URL=postgresql+psycopg://user@127.0.0.1:5432/db python tests/benchmarks/silent_server.py``
(an empty database you may write to; the test session's throwaway server will do)

Opens the store through a loopback proxy (``tests.test_store_attacks.SilencingProxy``), stores a run, lists it,
then silences the proxy (it keeps the sockets open and forwards nothing) and prints how long ``store.runs()``
and ``store.load()`` take to raise, and their one-line messages. The target: about 30 s each.
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import sqlalchemy as sa  # noqa: E402

from gpu.results.persistence import store  # noqa: E402
from tests.test_store_attacks import SilencingProxy, good  # noqa: E402


def main() -> None:
    address = sa.engine.make_url(os.environ["PINPOINT_DB_URL"])
    proxy = SilencingProxy((address.host or "127.0.0.1", address.port or 5432))
    runs = store.RunStore(address.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False))
    runs.save(good().assign(run_id="silent0001"), "import")
    print(f"stored and listed {len(runs.runs())} run(s) through the proxy; silencing it")
    proxy.silence()
    for name, call in (("runs()", runs.runs), ("load()", lambda: runs.load("silent0001"))):
        started = time.monotonic()
        try:
            call()
            print(f"{name}: answered?")
        except store.StoreError as exc:
            print(f"{name}: {time.monotonic() - started:.1f} s: {exc}")
    proxy.close()


if __name__ == "__main__":
    main()
