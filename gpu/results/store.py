"""The runs store: every run a team measures, with every sample, in SQLite (default) or PostgreSQL.

No Streamlit and no CUDA here. SQLAlchemy Core; ``PINPOINT_DB_URL`` picks the database
(``postgresql+psycopg://user@host/db`` for a team's shared server); without it the store is a SQLite file in
the user's data directory (platformdirs), created on first use.

Tables (schema version ``SCHEMA_VERSION``, in ``pinpoint_meta``):

* ``runs`` – one row per run: ``run_id`` (primary key), ``experiment``, device, driver, CUDA and PyCUDA
  versions, host, ``timestamp`` (when it was measured), git commit, profile, ``label`` and ``notes`` (stored
  verbatim, always passed as bound parameters), ``source`` (live | runner | import), ``stored_at``, ``points``;
* ``points`` – one row per measured point: ``run_id``, ``idx``, the point's ``variant``, ``direction``,
  ``bytes``, ``median_ms``, ``gbps`` for queries, and ``row_json``: the whole row of the results schema
  (``gpu.core.schema``), every sample included.

Migrations are a short list of versioned steps (``MIGRATIONS``), applied in one transaction, one migrator at a
time (PostgreSQL: an advisory lock; SQLite: ``BEGIN IMMEDIATE``): two tables need no migration framework, and an
embedded store must upgrade itself on a user's machine without tooling. Opening never writes: listing, loading
and exporting work on a read-only file or a SELECT-only role; migrations run before the first write (or
``python -m gpu.bench migrate``). A store written by a newer PinPoint (a version this code does not know) is
refused, never altered.

A file's runs are saved in one transaction: stored whole or not at all. A run is its content (``gpu.results.runfiles``
content hash): saving a run_id that is stored with the same content changes nothing and says so (imports are
idempotent, also when two processes race for it); with different content it is refused, saying so, unless
``replace`` is asked for, which swaps it in the same transaction. One run is one experiment, one device and
one timestamp. Connecting gives up after ``CONNECT_TIMEOUT_S``; PostgreSQL statements after
``STATEMENT_TIMEOUT_S`` (the server's own limit); a PostgreSQL server that goes silent mid-session after
``ANSWER_TIMEOUT_S`` (TCP keepalives and ``tcp_user_timeout`` for a link that drops; for a peer that still
acknowledges packets but never answers, PinPoint shuts the connection's socket when one reply is that late).
Database failures become ``StoreError`` with one line for the person.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pandas as pd
import sqlalchemy as sa
from platformdirs import user_data_dir

from gpu.core import schema
from gpu.core.errors import StoreError
from gpu.core.schema import frame_rows
from gpu.core.text import shorten
from gpu.results import runfiles

SCHEMA_VERSION = 2
APP_NAME = "pinpoint"
CONNECT_TIMEOUT_S = 5
STATEMENT_TIMEOUT_S = 20  # the server gives up on a statement after this (and says so)
# PinPoint gives up on a PostgreSQL server that sends nothing for this long while it waits for one statement's
# reply, ping or commit: a server (or a link) that went silent mid-session fails here, not after minutes.
ANSWER_TIMEOUT_S = 25
MAX_LABEL_CHARS = 256
MAX_NOTES_CHARS = 4096
MAX_RUN_SPAN_S = 6 * 3600
METADATA = sa.MetaData()

META = sa.Table("pinpoint_meta", METADATA, sa.Column("key", sa.String(64), primary_key=True),
                sa.Column("value", sa.Text, nullable=False))
RUNS = sa.Table(
    "runs", METADATA,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("experiment", sa.String(64), nullable=False, index=True),
    sa.Column("device_name", sa.Text), sa.Column("driver_version", sa.Text), sa.Column("cuda_version", sa.Text),
    sa.Column("pycuda_version", sa.Text), sa.Column("host", sa.Text), sa.Column("timestamp", sa.Text, index=True),
    sa.Column("git_commit", sa.Text), sa.Column("profile", sa.Text), sa.Column("label", sa.Text),
    sa.Column("notes", sa.Text), sa.Column("source", sa.String(16), nullable=False),
    sa.Column("stored_at", sa.Text, nullable=False), sa.Column("points", sa.Integer, nullable=False),
    # Added by step 2: the board that measured (NVML UUID), and for fleet runs the fleet and its suite.
    sa.Column("gpu_uuid", sa.Text), sa.Column("fleet_id", sa.String(64)), sa.Column("suite", sa.Text),
)
POINTS = sa.Table(
    "points", METADATA,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("idx", sa.Integer, primary_key=True),
    sa.Column("variant", sa.Text), sa.Column("direction", sa.Text), sa.Column("bytes", sa.BigInteger),
    sa.Column("median_ms", sa.Float), sa.Column("gbps", sa.Float), sa.Column("row_json", sa.Text, nullable=False),
)
FLEET_INDEX = sa.Index("ix_runs_fleet_id", RUNS.c.fleet_id)
RUN_COLUMNS = [c.name for c in RUNS.columns]


ADDED_IN_V2 = ("gpu_uuid", "fleet_id", "suite")


def _create_v1(connection) -> None:
    """The tables as version 1 had them (``runs`` without the columns later steps add)."""
    v1 = sa.MetaData()
    sa.Table(RUNS.name, v1, *(c._copy() for c in RUNS.columns if c.name not in ADDED_IN_V2))
    POINTS.to_metadata(v1)
    v1.create_all(connection)


def _add_boards_and_fleets_v2(connection) -> None:
    """Runs name their board and, when a fleet measured them, the fleet and suite; stored runs get their board
    from their first point (the runs-level column lets a board's history be found without reading points)."""
    dialect = connection.dialect
    for name in ADDED_IN_V2:
        column = RUNS.c[name]
        connection.execute(sa.text(f"ALTER TABLE {RUNS.name} ADD COLUMN {name} {column.type.compile(dialect)}"))
    FLEET_INDEX.create(connection)
    first_points = connection.execute(sa.select(POINTS.c.run_id, POINTS.c.row_json).where(POINTS.c.idx == 0)).all()
    for run_id, row_json in first_points:
        board = json.loads(row_json).get("gpu_uuid")
        if isinstance(board, str) and board:
            connection.execute(RUNS.update().where(RUNS.c.run_id == run_id).values(gpu_uuid=board))


# Each step takes a store from version n-1 to n; a new schema appends a step, never edits an old one.
MIGRATIONS = [(1, _create_v1), (2, _add_boards_and_fleets_v2)]


@dataclass(frozen=True)
class SaveResult:
    run_id: str
    stored: bool  # False: that run_id was already in the store with the same content, nothing was written
    points: int
    replaced: bool = False

    def message(self) -> str:
        if self.replaced:
            return f"replaced run {self.run_id} ({self.points} points)"
        return (f"stored run {self.run_id} ({self.points} points)" if self.stored else
                f"run {self.run_id} is already in the store with the same content: nothing was written")


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


class RunStore:
    """One store (a database URL). Thread-safe through SQLAlchemy's pool; every write is one transaction.
    Opening only reads; the first write migrates."""

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
                self.version = 0
                return
            try:
                self.version = self._read_version()
            except sa.exc.OperationalError:
                # A WAL-mode file in a place nobody may write (a read-only mount) cannot get its shared-memory
                # file: read it as an unchanging file instead (writes are then refused as read-only).
                database = parsed.database if parsed.get_backend_name() == "sqlite" else None
                if not database or self.in_memory or not Path(database).is_file():
                    raise
                self.engine.dispose()
                self.engine = _engine(f"sqlite:///file:{quote(str(Path(database).resolve()))}?mode=ro&immutable=1"
                                      "&uri=true", parsed)
                self.version = self._read_version()
        except StoreError:
            raise
        except Exception as exc:  # a wrong URL, an unreachable server, a damaged file: say which
            raise self._failure(exc, "opening it") from None

    def _sqlite_file(self) -> Path | None:
        """The SQLite database's file (None: PostgreSQL, or a database in memory)."""
        parsed = sa.engine.make_url(self.url)
        if parsed.get_backend_name() != "sqlite" or self.in_memory or not parsed.database:
            return None
        return Path(parsed.database.removeprefix("file:").split("?")[0]).expanduser()

    def _refuse_foreign(self, connection) -> None:
        """A database without ``pinpoint_meta`` that already holds tables of our names (or, for SQLite, any table:
        a file of another application) is not a PinPoint store: refused before anything is written to it."""
        tables = set(sa.inspect(connection).get_table_names())
        if META.name in tables:
            return
        ours = sorted(tables & {t.name for t in METADATA.sorted_tables})
        foreign = ours or (sorted(tables) if self.dialect == "sqlite" else [])
        if foreign:
            raise StoreError(f"{self.describe()} is not a PinPoint runs store: it holds "
                             f"{', '.join(shorten(t) for t in foreign[:5])}{' …' if len(foreign) > 5 else ''} "
                             f"and no {META.name} table; left untouched (point PINPOINT_DB_URL at a new database "
                             "or file)")

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

    def _failure(self, exc: Exception, doing: str) -> StoreError:
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
        if any(s in lowered for s in ("readonly", "read-only", "permission denied", "unable to open database")):
            return StoreError(f"the runs store at {self.describe()} refuses this ({doing}): it is read-only here "
                              f"({shorten(text, 120)}); nothing was written")
        kind = type(getattr(exc, "orig", None) or exc).__name__
        if doing == "opening it":
            return StoreError(f"cannot open the runs store at {self.describe()}: {kind}: {shorten(text, 200)}")
        return StoreError(f"the runs store at {self.describe()} failed while {doing}: {kind}: {shorten(text, 200)}")

    def _read_version(self) -> int:
        """The store's schema version without writing anything (0: a new, empty store)."""
        with self.engine.connect() as connection:
            if not sa.inspect(connection).has_table(META.name):
                self._refuse_foreign(connection)
                return 0
            found = connection.execute(sa.select(META.c.value).where(META.c.key == "schema_version")).scalar()
        version = int(found) if found is not None else 0
        if version > SCHEMA_VERSION:
            raise StoreError(f"the runs store at {self.describe()} has schema version {version}, made by a newer "
                             f"PinPoint; this one knows versions up to {SCHEMA_VERSION} and leaves it untouched")
        return version

    def migrate(self) -> int:
        """Bring the store to SCHEMA_VERSION (one migrator at a time across processes); the version reached."""
        if self.version >= SCHEMA_VERSION:
            return self.version
        try:
            if self._sqlite_file() is not None:
                self._sqlite_file().parent.mkdir(parents=True, exist_ok=True)
            with self.engine.connect() as connection:
                if self.dialect == "sqlite":
                    # pysqlite opens no transaction before DDL: take the write lock now, so a second
                    # process waits here and then sees the first one's tables.
                    connection.exec_driver_sql("BEGIN IMMEDIATE")
                elif self.dialect == "postgresql":
                    connection.execute(sa.text("SELECT pg_advisory_xact_lock(7318)"))
                self._refuse_foreign(connection)  # under the lock, before the first write
                METADATA.create_all(connection, tables=[META])
                found = connection.execute(sa.select(META.c.value).where(META.c.key == "schema_version")).scalar()
                version = int(found) if found is not None else 0
                if version > SCHEMA_VERSION:
                    raise StoreError(f"the runs store at {self.describe()} has schema version {version}, made by a "
                                     f"newer PinPoint; this one knows versions up to {SCHEMA_VERSION} and leaves it "
                                     "untouched")
                for target, step in MIGRATIONS:
                    if target > version:
                        step(connection)
                        version = target
                if found is None:
                    connection.execute(META.insert().values(key="schema_version", value=str(version)))
                else:
                    connection.execute(META.update().where(META.c.key == "schema_version")
                                       .values(value=str(version)))
                connection.commit()
            if self.dialect == "sqlite" and not self.in_memory:
                self._use_wal()
        except StoreError:
            raise
        except sa.exc.SQLAlchemyError as exc:
            raise self._failure(exc, "migrating it") from None
        self.version = version
        return version

    def _use_wal(self) -> None:
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

    # --- writing ---------------------------------------------------------------------------------------------
    def save(self, frame: pd.DataFrame, source: str, label: str | None = None, notes: str | None = None,
             replace: bool = False, fleet: tuple[str, str] | None = None) -> list[SaveResult]:
        """Store every run of ``frame`` (validated against the schema) in one transaction: all or nothing.
        A run stored with the same content is reported and left as it is; with different content it is
        refused unless ``replace``. ``fleet``: (fleet id, suite name) when a fleet measured the run."""
        _check_text("label", label, MAX_LABEL_CHARS)
        _check_text("notes", notes, MAX_NOTES_CHARS)
        if fleet is not None:
            _check_text("fleet id", fleet[0], RUNS.c.fleet_id.type.length)
            _check_text("suite", fleet[1], MAX_LABEL_CHARS)
        frame = schema.validate(frame)
        prepared = [self._prepare(str(run_id), part.reset_index(drop=True), source, label, notes, fleet)
                    for run_id, part in frame.groupby("run_id", sort=False)]
        self.migrate()
        for attempt in range(2):
            try:
                with self.engine.begin() as connection:
                    return [self._save_one(connection, run, points, digest, replace)
                            for run, points, digest in prepared]
            except sa.exc.IntegrityError:
                # Another process stored one of these run_ids between our check and our insert; our
                # transaction rolled back whole. Once more, now seeing theirs.
                if attempt:
                    raise StoreError("another process kept storing the same runs at the same moment: nothing "
                                     "was written; try again") from None
            except sa.exc.SQLAlchemyError as exc:
                raise self._failure(exc, "storing runs") from None
        raise AssertionError("unreachable")

    def _save_one(self, connection, run: dict, points: list[dict], digest: str, replace: bool) -> SaveResult:
        run_id = run["run_id"]
        stored = connection.execute(sa.select(POINTS.c.row_json).where(POINTS.c.run_id == run_id)
                                    .order_by(POINTS.c.idx)).scalars().all()
        exists = bool(stored) or connection.execute(sa.select(RUNS.c.run_id).where(RUNS.c.run_id == run_id)).first()
        if exists:
            if runfiles.content_hash([json.loads(t) for t in stored]) == digest:
                return SaveResult(run_id, False, run["points"])
            if not replace:
                raise StoreError(f"run {run_id} is already in the store with different content (stored: "
                                 f"{len(stored)} points, new: {run['points']} points): it differs, so nothing was "
                                 "written; replace it explicitly (--replace, or the Runs page's replace box)")
            connection.execute(POINTS.delete().where(POINTS.c.run_id == run_id))
            connection.execute(RUNS.delete().where(RUNS.c.run_id == run_id))
        connection.execute(RUNS.insert(), [run])
        connection.execute(POINTS.insert(), points)
        return SaveResult(run_id, True, run["points"], replaced=bool(exists))

    @staticmethod
    def _prepare(run_id: str, part: pd.DataFrame, source: str, label, notes, fleet=None) \
            -> tuple[dict, list[dict], str]:
        if len(run_id) > RUNS.c.run_id.type.length or "\x00" in run_id:
            raise StoreError(f"run id {shorten(run_id)} is longer than {RUNS.c.run_id.type.length} characters or "
                             "holds a NUL character")
        for column, what in (("experiment", "experiments"), ("device_name", "devices")):
            values = {str(v) for v in part[column]}
            if len(values) != 1:
                raise StoreError(f"run {shorten(run_id)} mixes {what} ({', '.join(shorten(v) for v in sorted(values))}"
                                 f"): one run is one experiment on one device at one time")
        start, furthest, span = run_times(part["timestamp"])
        if span > MAX_RUN_SPAN_S:
            raise StoreError(f"run {shorten(run_id)} has points measured {span / 3600:,.1f} h apart "
                             f"({shorten(part['timestamp'].iloc[furthest])}): one run is one time")
        first = part.iloc[0]
        run = {"run_id": run_id, "experiment": str(first["experiment"]), "source": source, "timestamp": start,
               "stored_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "points": len(part),
               "label": label, "notes": notes, "fleet_id": fleet[0] if fleet else None,
               "suite": fleet[1] if fleet else None,
               **{c: None if pd.isna(first[c]) or first[c] == "" else str(first[c]) for c in
                  ("device_name", "driver_version", "cuda_version", "pycuda_version", "host", "git_commit",
                   "profile", "gpu_uuid")}}
        for column, value in run.items():
            if isinstance(value, str) and "\x00" in value:
                raise StoreError(f"run {shorten(run_id)}: {column} holds a NUL character")
        rows = frame_rows(part)
        points = [{"run_id": run_id, "idx": i, "variant": row["variant"], "direction": row["direction"],
                   "bytes": row["bytes"], "median_ms": row["median_ms"], "gbps": row["gbps"],
                   "row_json": json.dumps(row, separators=(",", ":"), allow_nan=False)} for i, row in enumerate(rows)]
        return run, points, runfiles.content_hash(rows)

    def delete(self, run_id: str) -> bool:
        if self.version == 0:
            return False
        try:
            with self.engine.begin() as connection:
                connection.execute(POINTS.delete().where(POINTS.c.run_id == run_id))
                return connection.execute(RUNS.delete().where(RUNS.c.run_id == run_id)).rowcount > 0
        except sa.exc.SQLAlchemyError as exc:
            raise self._failure(exc, "deleting a run") from None

    # --- reading (never writes) ------------------------------------------------------------------------------
    def has_run(self, run_id: str) -> bool:
        if self.version == 0:
            return False
        try:
            with self.engine.connect() as connection:
                return connection.execute(sa.select(RUNS.c.run_id).where(RUNS.c.run_id == run_id)).first() \
                    is not None
        except sa.exc.SQLAlchemyError as exc:
            raise self._failure(exc, "reading it") from None

    def runs(self, experiment: str | None = None, fleet_id: str | None = None) -> pd.DataFrame:
        """The stored runs, newest first; of one experiment and/or one fleet when asked."""
        if self.version == 0:
            return pd.DataFrame(columns=RUN_COLUMNS)
        # Opening never writes, so a store of an older version is read as it is: its missing columns stay empty.
        columns = [c for c in RUNS.columns if self.version >= 2 or c.name not in ADDED_IN_V2]
        query = sa.select(*columns).order_by(RUNS.c.timestamp.desc())
        if experiment:
            query = query.where(RUNS.c.experiment == experiment)
        if fleet_id is not None:
            if self.version < 2:
                return pd.DataFrame(columns=RUN_COLUMNS)
            query = query.where(RUNS.c.fleet_id == fleet_id)
        try:
            with self.engine.connect() as connection:
                rows = connection.execute(query).mappings().all()
        except sa.exc.SQLAlchemyError as exc:
            raise self._failure(exc, "listing runs") from None
        return pd.DataFrame([dict(r) for r in rows], columns=RUN_COLUMNS)

    def load(self, run_id: str) -> pd.DataFrame:
        """A stored run as a results frame (every sample included)."""
        texts = []
        if self.version:
            try:
                with self.engine.connect() as connection:
                    texts = connection.execute(sa.select(POINTS.c.row_json).where(POINTS.c.run_id == run_id)
                                               .order_by(POINTS.c.idx)).scalars().all()
            except sa.exc.SQLAlchemyError as exc:
                raise self._failure(exc, "loading a run") from None
        if not texts:
            raise StoreError(f"no stored run with id {shorten(run_id)}")
        try:
            rows = [json.loads(t) for t in texts]
            for i, row in enumerate(rows):  # stored before imports checked samples: say so, not crash later
                samples = row.get("samples_ms")
                if not isinstance(samples, list) or not samples or not all(
                        isinstance(v, int | float) and not isinstance(v, bool) for v in samples):
                    raise ValueError(f"point {i + 1}: samples_ms is {shorten(samples)}, not a list of sample times; "
                                     "import the run again from its file")
            return schema.validate(pd.DataFrame(rows))
        except (ValueError, schema.SchemaError) as exc:  # a row written by hand or by a damaged copy
            raise StoreError(f"stored run {shorten(run_id)} cannot be read: {shorten(str(exc), 200)}") from None

    def close(self) -> None:
        self.engine.dispose()


def run_times(timestamps: pd.Series) -> tuple[str | None, int, float]:
    """A run's time: its earliest timestamp (as written), the position of the one furthest from it, and the
    span in seconds. A runner invocation stamps each of its jobs with that job's start, so a run's points may
    carry a few times minutes apart; rows further apart than ``MAX_RUN_SPAN_S`` are two recordings under one
    id. Missing times count as none."""
    parsed = pd.to_datetime(timestamps.astype(object).where(timestamps.notna(), None), utc=True, errors="coerce",
                            format="ISO8601")
    if parsed.isna().all():
        return None, 0, 0.0
    earliest, latest = parsed.idxmin(), parsed.idxmax()
    position = timestamps.index.get_loc
    return (str(timestamps.loc[earliest]), position(latest),
            float((parsed.max() - parsed.min()).total_seconds()))


def _check_text(what: str, value: str | None, limit: int) -> None:
    if value is None:
        return
    if not isinstance(value, str) or "\x00" in value or len(value) > limit:
        raise StoreError(f"the {what} must be text of at most {limit:,} characters without NUL; got "
                         f"{shorten(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # bytes from a command line that are not UTF-8 (kept by Python as surrogates)
        shown = value.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        raise StoreError(f"the {what} is not valid UTF-8 text: {shorten(shown)}") from None


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    """Foreign keys make deletes cascade; wait, don't fail, on another writer's lock. (WAL, which lets readers
    work while a writer imports, is set by the first migration: setting it writes to the file.)"""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()
