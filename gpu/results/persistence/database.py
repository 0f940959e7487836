"""The runs store's database engine: opening a SQLite file or a PostgreSQL server, its timeouts, and one line for
the person when the database fails. Tables, versions and migrations are ``gpu.results.persistence.migrations``; the runs
themselves ``gpu.results.persistence.store``. No Streamlit and no CUDA here.

``PINPOINT_DB_URL`` picks the database (``postgresql+psycopg://user@host/db`` for a team's shared server); without it
the store is a SQLite file in the user's data directory (platformdirs), created on first write. Connecting gives up
after ``CONNECT_TIMEOUT_S``; PostgreSQL statements after ``STATEMENT_TIMEOUT_S`` (the server's own limit); a
PostgreSQL server that goes silent mid-session after ``ANSWER_TIMEOUT_S`` (TCP keepalives and ``tcp_user_timeout``
for a link that drops; for a peer that still acknowledges packets but never answers, PinPoint shuts the connection's
socket when one reply is that late). A SQLite file in a place nobody may write is read as an unchanging file.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from urllib.parse import quote

import sqlalchemy as sa
from platformdirs import user_data_dir

from gpu.core.errors import StoreError
from gpu.core.text import shorten

APP_NAME = "pinpoint"
CONNECT_TIMEOUT_S = 5
STATEMENT_TIMEOUT_S = 20  # the server gives up on a statement after this (and says so)
# PinPoint gives up on a PostgreSQL server that sends nothing for this long while it waits for one statement's
# reply, ping or commit: a server (or a link) that went silent mid-session fails here, not after minutes.
ANSWER_TIMEOUT_S = 25


def default_url() -> str:
    """PINPOINT_DB_URL, else a SQLite file in the user's data directory."""
    url = os.environ.get("PINPOINT_DB_URL", "").strip()
    if url:
        return url
    folder = Path(user_data_dir(APP_NAME, appauthor=False))
    return f"sqlite:///{folder / 'runs.sqlite'}"


def _connect_args(url: sa.engine.URL) -> dict:
    if url.get_backend_name() == "sqlite":
        return {"timeout": 30}  # waiting for another writer's lock, not for a server
    if url.get_backend_name() == "postgresql" and url.get_driver_name() in ("psycopg", "psycopg2"):
        return {"connect_timeout": CONNECT_TIMEOUT_S,
                "options": f"-c statement_timeout={STATEMENT_TIMEOUT_S * 1000}",
                # A link that drops: keepalive probes after 10 s idle, 3 unanswered 5 s apart; data unacknowledged
                # for ANSWER_TIMEOUT_S closes the connection (Linux).
                "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
                "tcp_user_timeout": ANSWER_TIMEOUT_S * 1000}
    return {}


def _engine(url: str, parsed: sa.engine.URL) -> sa.engine.Engine:
    engine = sa.create_engine(url, future=True, pool_pre_ping=True, connect_args=_connect_args(parsed))
    if engine.dialect.name == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    elif engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg":
        _answer_deadlines(engine)
    return engine


def _shut(dbapi_connection) -> None:
    """End a wait on a silent server: shut the socket both ways (the blocked read returns at once; psycopg then
    raises OperationalError and the pool drops the connection)."""
    try:
        fd = dbapi_connection.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except Exception:  # already closed: nothing waits on it
        pass


class _Deadline:
    """A timer per wait on the server (a statement, the pool's ping, a commit or rollback)."""

    def __init__(self, dbapi_connection):
        self.timer = threading.Timer(ANSWER_TIMEOUT_S, _shut, (dbapi_connection,))
        self.timer.daemon = True

    def __enter__(self):
        self.timer.start()

    def __exit__(self, *_exc):
        self.timer.cancel()


def _answer_deadlines(engine: sa.engine.Engine) -> None:
    """Every wait for a PostgreSQL reply gets ANSWER_TIMEOUT_S: statements through the cursor events, the pool's
    ping and transaction ends by wrapping the dialect's calls."""
    dialect = engine.dialect

    def wrapped(call):
        def waits(dbapi_connection, *args, **kwargs):
            with _Deadline(dbapi_connection):
                return call(dbapi_connection, *args, **kwargs)
        return waits

    for name in ("do_ping", "do_commit", "do_rollback"):
        setattr(dialect, name, wrapped(getattr(dialect, name)))

    def before(conn, _cursor, _statement, _parameters, context, _executemany):
        deadline = _Deadline(conn.connection.dbapi_connection)
        conn.info["pinpoint_deadline"] = deadline
        deadline.__enter__()

    def after(conn, *_args):
        deadline = conn.info.pop("pinpoint_deadline", None)
        if deadline is not None:
            deadline.__exit__()

    sa.event.listen(engine, "before_cursor_execute", before)
    sa.event.listen(engine, "after_cursor_execute", after)
    sa.event.listen(engine, "handle_error", lambda context: after(context.connection) if context.connection
                    else None)


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    """Foreign keys make deletes cascade; wait, don't fail, on another writer's lock. (WAL, which lets readers
    work while a writer imports, is set by the first migration: setting it writes to the file.)"""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()



class Database:
    """One database URL and its engine (thread-safe through SQLAlchemy's pool). Opening connects and reads only:
    a SQLite file that is not there stays absent until the first write."""

    def __init__(self, url: str | None = None):
        self.url = url or default_url()
        try:
            parsed = sa.engine.make_url(self.url)
        except Exception:
            raise StoreError(f"cannot open the runs store: {shorten(self.url)} is not a database URL "
                             "(sqlite:///path or postgresql+psycopg://user@host/db)") from None
        try:
            self.engine = _engine(self.url, parsed)
            if self._sqlite_file() is not None and not self._sqlite_file().exists():
                # Opening only reads: a file that is not there is a new, empty store, made by the first write
                # (folders included), never by listing or loading.
                self._opened(exists=False)
                return
            try:
                self._opened(exists=True)
            except sa.exc.OperationalError:
                # A WAL-mode file in a place nobody may write (a read-only mount) cannot get its shared-memory
                # file: read it as an unchanging file instead (writes are then refused as read-only).
                database = parsed.database if parsed.get_backend_name() == "sqlite" else None
                if not database or self.in_memory or not Path(database).is_file():
                    raise
                self.engine.dispose()
                self.engine = _engine(f"sqlite:///file:{quote(str(Path(database).resolve()))}?mode=ro&immutable=1"
                                      "&uri=true", parsed)
                self._opened(exists=True)
        except StoreError:
            raise
        except Exception as exc:  # a wrong URL, an unreachable server, a damaged file: say which
            raise self.failure(exc, "opening it") from None

    def _opened(self, exists: bool) -> None:
        """What a store reads once it is open (``exists``: False for a SQLite file not there yet); nothing here."""

    def _sqlite_file(self) -> Path | None:
        """The SQLite database's file (None: PostgreSQL, or a database in memory)."""
        parsed = sa.engine.make_url(self.url)
        if parsed.get_backend_name() != "sqlite" or self.in_memory or not parsed.database:
            return None
        return Path(parsed.database.removeprefix("file:").split("?")[0]).expanduser()

    @property
    def in_memory(self) -> bool:
        """A SQLite database in memory: it keeps nothing once the process ends."""
        parsed = sa.engine.make_url(self.url)
        return parsed.get_backend_name() == "sqlite" and (
            parsed.database in (None, "", ":memory:") or "mode=memory" in self.url)

    def describe(self) -> str:
        """The URL without a password, for messages."""
        try:
            return sa.engine.make_url(self.url).render_as_string(hide_password=True)
        except Exception:
            return "(an unreadable database URL)"

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def failure(self, exc: Exception, doing: str) -> StoreError:
        """One line for the person: timeouts and read-only stores by name, anything else with its type."""
        text = " ".join(str(getattr(exc, "orig", None) or exc).split())
        lowered = text.lower()
        if "server closed the connection" in lowered or "consuming input failed" in lowered \
                or "connection is lost" in lowered or "bad file descriptor" in lowered:
            return StoreError(f"the runs store at {self.describe()} stopped answering ({doing}): no reply within "
                              f"{ANSWER_TIMEOUT_S} s, or the server closed the connection")
        if "statement timeout" in lowered:
            return StoreError(f"the runs store at {self.describe()} did not finish within {STATEMENT_TIMEOUT_S} s "
                              f"({doing}): nothing was written")
        if ("timeout" in lowered or "timed out" in lowered) and doing != "opening it":
            # mid-session: a reply that never came (ANSWER_TIMEOUT_S), then the pool's new connection timed out
            return StoreError(f"the runs store at {self.describe()} stopped answering ({doing}): no reply within "
                              f"{ANSWER_TIMEOUT_S} s, and no new connection within {CONNECT_TIMEOUT_S} s")
        if "timeout" in lowered or "timed out" in lowered:
            return StoreError(f"the runs store at {self.describe()} did not answer within {CONNECT_TIMEOUT_S} s "
                              f"({doing})")
        if "postgresql" in self.url.split(":", 1)[0] and ("permission denied" in lowered or "must be owner" in lowered):
            # The server's roles decide (python -m gpu.bench db-roles): name the role and what it may not do.
            role = sa.engine.make_url(self.url).username or "this connection's role"
            if "must be owner" in lowered or "for schema" in lowered:
                return StoreError(f"the runs store at {self.describe()} refuses this ({doing}): role {role} does not "
                                  f"own the tables; migrating needs the owner role ({shorten(text, 80)}); nothing "
                                  "was written")
            return StoreError(f"the runs store at {self.describe()} refuses this ({doing}): role {role} may not do "
                              f"it, it is read-only here ({shorten(text, 80)}); nothing was written")
        if any(s in lowered for s in ("readonly", "read-only", "permission denied", "unable to open database")):
            return StoreError(f"the runs store at {self.describe()} refuses this ({doing}): it is read-only here "
                              f"({shorten(text, 120)}); nothing was written")
        kind = type(getattr(exc, "orig", None) or exc).__name__
        if doing == "opening it":
            return StoreError(f"cannot open the runs store at {self.describe()}: {kind}: {shorten(text, 200)}")
        return StoreError(f"the runs store at {self.describe()} failed while {doing}: {kind}: {shorten(text, 200)}")

    def use_wal(self) -> None:
        """WAL lets readers work while a writer imports. It is a property of the file, set once by a writer; the
        switch needs the file to itself and does not wait for other openers, so it is retried here."""
        for _ in range(100):
            try:
                with self.engine.connect() as connection:
                    if connection.exec_driver_sql("PRAGMA journal_mode").scalar() != "wal":
                        connection.exec_driver_sql("PRAGMA journal_mode=WAL")
                    return
            except sa.exc.OperationalError as exc:
                if "locked" not in str(exc):
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        self.engine.dispose()
