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
  (``gpu.schema``), every sample included.

Migrations are a short list of versioned steps (``MIGRATIONS``), applied in one transaction on open: two
tables need no migration framework, and an embedded store must upgrade itself on a user's machine without
tooling. A store written by a newer PinPoint (a version this code does not know) is refused, never altered.

A file's runs are saved in one transaction: stored whole or not at all. Saving a run_id that is already stored
changes nothing and says so (imports are idempotent), also when two processes race for it.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import sqlalchemy as sa

from gpu import schema

SCHEMA_VERSION = 1
APP_NAME = "pinpoint"
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
)
POINTS = sa.Table(
    "points", METADATA,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.run_id", ondelete="CASCADE"), primary_key=True),
    sa.Column("idx", sa.Integer, primary_key=True),
    sa.Column("variant", sa.Text), sa.Column("direction", sa.Text), sa.Column("bytes", sa.BigInteger),
    sa.Column("median_ms", sa.Float), sa.Column("gbps", sa.Float), sa.Column("row_json", sa.Text, nullable=False),
)
RUN_COLUMNS = [c.name for c in RUNS.columns]


def _create_v1(connection) -> None:
    METADATA.create_all(connection, tables=[RUNS, POINTS])


# Each step takes a store from version n-1 to n; a new schema appends a step, never edits an old one.
MIGRATIONS = [(1, _create_v1)]


class StoreError(RuntimeError):
    """A store that cannot be opened or used (with the reason, for the person at the page)."""


@dataclass(frozen=True)
class SaveResult:
    run_id: str
    stored: bool  # False: that run_id was already in the store, nothing was written
    points: int

    def message(self) -> str:
        return (f"stored run {self.run_id} ({self.points} points)" if self.stored else
                f"run {self.run_id} is already in the store: nothing was written")


def default_url() -> str:
    """PINPOINT_DB_URL, else a SQLite file in the user's data directory."""
    url = os.environ.get("PINPOINT_DB_URL", "").strip()
    if url:
        return url
    from platformdirs import user_data_dir

    folder = Path(user_data_dir(APP_NAME, appauthor=False))
    return f"sqlite:///{folder / 'runs.sqlite'}"


def _json_value(value):
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value.tolist()  # samples: many floats, none NaN (the schema refuses those)
    if isinstance(value, np.ndarray | list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        return None if math.isnan(value) else float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def frame_rows(frame: pd.DataFrame) -> list[dict]:
    """The frame's rows as JSON-ready dicts of the results schema (samples as lists)."""
    return [{column: _json_value(row[column]) for column in schema.COLUMNS}
            for row in frame[schema.COLUMNS].to_dict("records")]


class RunStore:
    """One store (a database URL). Thread-safe through SQLAlchemy's pool; every write is one transaction."""

    def __init__(self, url: str | None = None):
        self.url = url or default_url()
        try:
            if self.url.startswith("sqlite:///"):
                Path(self.url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
            self.engine = sa.create_engine(self.url, future=True, pool_pre_ping=True,
                                           connect_args={"timeout": 30} if self.url.startswith("sqlite") else {})
            if self.engine.dialect.name == "sqlite":
                sa.event.listen(self.engine, "connect", _sqlite_pragmas)
            self.version = self._migrate()
        except StoreError:
            raise
        except Exception as exc:  # a wrong URL, an unreachable server, a damaged file: say which
            raise StoreError(f"cannot open the runs store at {self.describe()}: {exc}") from exc

    def describe(self) -> str:
        """The URL without a password, for messages."""
        try:
            return sa.engine.make_url(self.url).render_as_string(hide_password=True)
        except Exception:
            return "(an unreadable database URL)"

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def _migrate(self) -> int:
        with self.engine.begin() as connection:
            if self.dialect == "postgresql":  # one migrator at a time across processes
                connection.execute(sa.text("SELECT pg_advisory_xact_lock(7318)"))
            METADATA.create_all(connection, tables=[META])
            found = connection.execute(sa.select(META.c.value).where(META.c.key == "schema_version")).scalar()
            version = int(found) if found is not None else 0
            if version > SCHEMA_VERSION:
                raise StoreError(f"the runs store at {self.describe()} has schema version {version}, made by a newer "
                                 f"PinPoint; this one knows versions up to {SCHEMA_VERSION} and leaves it untouched")
            for target, step in MIGRATIONS:
                if target > version:
                    step(connection)
                    version = target
            if found is None:
                connection.execute(META.insert().values(key="schema_version", value=str(version)))
            else:
                connection.execute(META.update().where(META.c.key == "schema_version").values(value=str(version)))
        return version

    # --- writing ---------------------------------------------------------------------------------------------
    def save(self, frame: pd.DataFrame, source: str, label: str | None = None, notes: str | None = None) -> \
            list[SaveResult]:
        """Store every run of ``frame`` (validated against the schema) in one transaction: all or nothing.
        Runs already stored are reported and left as they are."""
        frame = schema.validate(frame)
        prepared = [self._prepare(str(run_id), part.reset_index(drop=True), source, label, notes)
                    for run_id, part in frame.groupby("run_id", sort=False)]
        for attempt in range(2):
            try:
                with self.engine.begin() as connection:
                    results = []
                    for run, points in prepared:
                        exists = connection.execute(sa.select(RUNS.c.run_id).where(RUNS.c.run_id == run["run_id"]))
                        if exists.first():
                            results.append(SaveResult(run["run_id"], False, run["points"]))
                            continue
                        connection.execute(RUNS.insert(), [run])
                        connection.execute(POINTS.insert(), points)
                        results.append(SaveResult(run["run_id"], True, run["points"]))
                return results
            except sa.exc.IntegrityError:
                # Another process stored one of these run_ids between our check and our insert; our
                # transaction rolled back whole. Once more, now seeing theirs.
                if attempt:
                    raise
        raise AssertionError("unreachable")

    @staticmethod
    def _prepare(run_id: str, part: pd.DataFrame, source: str, label, notes) -> tuple[dict, list[dict]]:
        first = part.iloc[0]
        experiments = set(part["experiment"])
        if len(experiments) != 1:
            raise StoreError(f"run {run_id} mixes experiments ({', '.join(sorted(experiments))}): one run is one "
                             "experiment")
        run = {"run_id": run_id, "experiment": str(first["experiment"]), "source": source,
               "stored_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "points": len(part),
               "label": label, "notes": notes,
               **{c: None if pd.isna(first[c]) else str(first[c]) for c in
                  ("device_name", "driver_version", "cuda_version", "pycuda_version", "host", "timestamp",
                   "git_commit", "profile")}}
        points = [{"run_id": run_id, "idx": i, "variant": row["variant"], "direction": row["direction"],
                   "bytes": row["bytes"], "median_ms": row["median_ms"], "gbps": row["gbps"],
                   "row_json": json.dumps(row, separators=(",", ":"))} for i, row in enumerate(frame_rows(part))]
        return run, points

    def delete(self, run_id: str) -> bool:
        with self.engine.begin() as connection:
            connection.execute(POINTS.delete().where(POINTS.c.run_id == run_id))
            return connection.execute(RUNS.delete().where(RUNS.c.run_id == run_id)).rowcount > 0

    def set_label(self, run_id: str, label: str | None, notes: str | None) -> None:
        with self.engine.begin() as connection:
            connection.execute(RUNS.update().where(RUNS.c.run_id == run_id).values(label=label, notes=notes))

    # --- reading ---------------------------------------------------------------------------------------------
    def has_run(self, run_id: str) -> bool:
        with self.engine.connect() as connection:
            return connection.execute(sa.select(RUNS.c.run_id).where(RUNS.c.run_id == run_id)).first() is not None

    def runs(self, experiment: str | None = None) -> pd.DataFrame:
        query = sa.select(RUNS).order_by(RUNS.c.timestamp.desc())
        if experiment:
            query = query.where(RUNS.c.experiment == experiment)
        with self.engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        return pd.DataFrame([dict(r) for r in rows], columns=RUN_COLUMNS)

    def load(self, run_id: str) -> pd.DataFrame:
        """A stored run as a results frame (every sample included)."""
        with self.engine.connect() as connection:
            texts = connection.execute(sa.select(POINTS.c.row_json).where(POINTS.c.run_id == run_id)
                                       .order_by(POINTS.c.idx)).scalars().all()
        if not texts:
            raise StoreError(f"no stored run with id {run_id}")
        return schema.validate(pd.DataFrame([json.loads(t) for t in texts]))

    def load_many(self, run_ids: Iterable[str]) -> pd.DataFrame:
        frames = [self.load(r) for r in run_ids]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=schema.COLUMNS)

    def close(self) -> None:
        self.engine.dispose()


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    """WAL lets readers work while a writer imports; foreign keys make deletes cascade; wait, don't fail, on locks."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()
