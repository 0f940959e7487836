"""The runs store's changes after a run is saved, in one room: moving runs to the trash, restoring and purging them,
relabelling, each checked against the actor (``gpu.core.access.require``) and written with its audit row in one
transaction, and the reads of the trash and the trail. ``CheckedChanges`` is the part of ``RunStore``
(``gpu.results.persistence.store``) that holds them; the row moves between ``runs`` and ``trash`` are the
functions at the end. No Streamlit and no CUDA here."""

from __future__ import annotations

import datetime as dt
import json
import os

import pandas as pd
import sqlalchemy as sa

from gpu.core.access import Actor, require
from gpu.core.errors import StoreError
from gpu.core.text import shorten
from gpu.results.persistence.migrations import (
    AUDIT,
    AUDITED_SINCE,
    BOARDS,
    POINTS,
    RUNS,
    TRASH,
    TRASH_POINTS,
    now_text,
    record,
)

MAX_LABEL_CHARS = 256
TRASH_DAYS = 30  # how long a trashed run can be restored, unless PINPOINT_TRASH_DAYS says otherwise
TRASH_COLUMNS = ["trash_id", "run_id", "experiment", "device_name", "timestamp", "points", "label", "reason",
                 "trashed_at", "trashed_by", "expires_at"]
AUDIT_COLUMNS = ["at", "who", "role", "source", "action", "run_ids", "what"]
DOING = {"trash": "moving runs to the trash", "restore": "restoring runs", "purge": "purging runs",
         "label": "changing a label"}
POINT_COLUMNS = ["idx", "variant", "direction", "bytes", "median_ms", "gbps", "row_json", "conditions"]


def trash_days() -> float:
    """The trash's retention in days: ``PINPOINT_TRASH_DAYS``, else ``TRASH_DAYS``."""
    text = os.environ.get("PINPOINT_TRASH_DAYS", "").strip()
    if not text:
        return TRASH_DAYS
    try:
        days = float(text)
    except ValueError:
        days = float("nan")
    if not (0 <= days <= 36_500):
        raise StoreError(f"PINPOINT_TRASH_DAYS is {shorten(text)}: give the days a trashed run is kept, a number "
                         f"from 0 to 36500 (default {TRASH_DAYS})")
    return days


def _expiry(trashed_at: str, days: float) -> str:
    return (dt.datetime.fromisoformat(trashed_at) + dt.timedelta(days=days)).isoformat(timespec="seconds")


def check_text(what: str, value: str | None, limit: int) -> None:
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

SIGN_OUT = "sign out"  # the audit trail's action for a sign-out


class CheckedChanges:
    """The trash, labels and the audit trail of a ``RunStore`` (which gives ``engine``, ``version``, ``migrate``
    and ``failure``)."""

    # --- the trash, labels and the audit trail (each change checked against the actor, then recorded) ----------
    def trash(self, actor: Actor, run_ids: list[str]) -> list[str]:
        """Move stored runs to the trash (who and when kept), all or none: a run already in the trash, or one the
        store does not hold, refuses the whole request in one line. The run ids moved."""
        require(actor, "trash")
        wanted = _distinct(run_ids)

        def move(connection) -> list[str]:
            for run_id in wanted:
                if not _is_stored(connection, run_id):
                    raise StoreError(self._not_stored(connection, run_id))
            for run_id in wanted:
                to_trash(connection, run_id, actor, "trashed")
            return wanted

        return self._audited(actor, "trash", wanted, move, lambda done: "moved to the trash: " + ", ".join(done))

    def restore(self, actor: Actor, run_ids: list[str]) -> list[str]:
        """Bring runs back from the trash (each run id's latest trashed copy), all or none: a run not in the trash,
        purged, expired, or stored again since, refuses the whole request in one line. The run ids restored."""
        require(actor, "restore")
        wanted = _distinct(run_ids)
        days = trash_days()

        def bring_back(connection) -> list[str]:
            entries = []
            for run_id in wanted:
                entry = _latest_in_trash(connection, run_id)
                if entry is None:
                    raise StoreError(self._not_in_trash(connection, run_id, "restored"))
                expires = _expiry(entry.trashed_at, days)
                if expires <= now_text():
                    raise StoreError(f"run {shorten(run_id)} expired in the trash on {expires} (kept {days:g} days "
                                     "after it was trashed): it is purged and cannot be restored")
                if _is_stored(connection, run_id):
                    raise StoreError(f"run {shorten(run_id)} is stored again since it was trashed (it was replaced, "
                                     "or measured or imported anew): move that one to the trash first; nothing "
                                     "was restored")
                entries.append(entry)
            for entry in entries:
                _from_trash(connection, entry)
            return wanted

        return self._audited(actor, "restore", wanted, bring_back,
                             lambda done: "restored from the trash: " + ", ".join(done))

    def purge(self, actor: Actor, run_ids: list[str]) -> list[str]:
        """Delete runs from the trash for good (every trashed copy of each id), all or none: a run that is not in
        the trash refuses the whole request in one line. The run ids purged."""
        require(actor, "purge")
        wanted = _distinct(run_ids)

        def delete(connection) -> list[str]:
            for run_id in wanted:
                if _latest_in_trash(connection, run_id) is None:
                    raise StoreError(self._not_in_trash(connection, run_id, "purged"))
            _delete_trash(connection, TRASH.c.run_id.in_(wanted))
            return wanted

        return self._audited(actor, "purge", wanted, delete, lambda done: "purged from the trash: " + ", ".join(done))

    def purge_expired(self, actor: Actor) -> list[str]:
        """Purge every trashed run kept longer than the retention (``trash_days``); the run ids purged (none:
        nothing is written, not even to the trail). Trash, restore and purge do it too, in their transaction."""
        require(actor, "purge")
        trash_days()  # a bad setting is named, whether or not there is a trash yet
        if self.version < AUDITED_SINCE:
            return []
        return self._audited(actor, "purge", None, lambda connection: [], lambda done: "")

    def set_label(self, actor: Actor, run_id: str, label: str | None) -> None:
        """Change a stored run's label (None or empty: none); the trail keeps the old and the new one."""
        require(actor, "label")
        check_text("label", label, MAX_LABEL_CHARS)
        label = label or None

        before = []

        def change(connection) -> list[str]:
            row = connection.execute(sa.select(RUNS.c.label).where(RUNS.c.run_id == run_id)).first()
            if row is None:
                raise StoreError(self._not_stored(connection, run_id))
            if row[0] == label:
                return []  # nothing changed: nothing to record
            connection.execute(RUNS.update().where(RUNS.c.run_id == run_id).values(label=label))
            before.append(row[0])
            return [run_id]

        self._audited(actor, "label", [run_id], change,
                      lambda _: f"label {json.dumps(before[0])} → {json.dumps(label)}")

    def _audited(self, actor: Actor, action: str, run_ids, change, what) -> list[str]:
        """Run ``change(connection)`` and its audit row in one transaction (nothing recorded when it changed
        nothing); StoreError for a database failure. A change of the trash also purges what expired in it (its own
        audit row, same transaction): the retention holds whoever changes the trash, from the app or a shell."""
        self.migrate(actor)
        days = trash_days() if action in ("trash", "restore", "purge") else None
        try:
            with self.engine.begin() as connection:
                done = change(connection)
                if done:
                    record(connection, actor, action, done if run_ids is None else run_ids, what(done))
                if days is None:
                    return done
                expired = _purge_expired(connection, days)
                if expired:
                    record(connection, actor, "purge", expired, f"purged {len(expired)} expired from the trash "
                                                                f"(kept {days:g} days): " + ", ".join(expired))
                return done or expired
        except sa.exc.SQLAlchemyError as exc:
            raise self.failure(exc, DOING[action]) from None

    def _not_stored(self, connection, run_id: str) -> str:
        entry = _latest_in_trash(connection, run_id)
        if entry is not None:
            return (f"run {shorten(run_id)} is already in the trash (moved there {entry.trashed_at} by "
                    f"{shorten(entry.trashed_by)}): nothing was changed")
        purged = _last_purge(connection, run_id)
        if purged is not None:
            return f"run {shorten(run_id)} was purged from the trash {purged}: nothing was changed"
        return f"no stored run with id {shorten(run_id)}: nothing was changed"

    def _not_in_trash(self, connection, run_id: str, doing: str) -> str:
        purged = _last_purge(connection, run_id)
        if purged is not None:
            return f"run {shorten(run_id)} was purged from the trash {purged}: it cannot be {doing}"
        if _is_stored(connection, run_id):
            return f"run {shorten(run_id)} is not in the trash (it is stored): nothing was {doing}"
        return f"no run with id {shorten(run_id)} in the trash: nothing was {doing}"

    # --- sign-outs: a signed-in person's sign-ins up to a moment are over, on every server of the store --------
    def sign_out(self, actor: Actor) -> None:
        """Record that ``actor`` signed out now: a row of the audit trail (action ``sign out``), so a copy of their
        session cookie, valid until it expires, no longer signs them in (``signed_out_at``). A new store is made;
        an older one is not upgraded (an admin's action): one without an audit trail records nothing."""
        if not self.version:
            self.migrate(actor)
        if self.version < AUDITED_SINCE:
            return
        try:
            with self.engine.begin() as connection:
                record(connection, actor, SIGN_OUT, [], "signed out: every sign-in of theirs until now is over")
        except sa.exc.SQLAlchemyError as exc:
            raise self.failure(exc, "recording a sign-out") from None

    def signed_out_at(self, who: str) -> float | None:
        """When ``who`` last signed out (seconds since the epoch, to the second), or None."""
        if self.version < AUDITED_SINCE:
            return None
        try:
            with self.engine.connect() as connection:
                at = connection.execute(sa.select(sa.func.max(AUDIT.c.at))
                                        .where(AUDIT.c.action == SIGN_OUT, AUDIT.c.who == who)).scalar()
        except sa.exc.SQLAlchemyError as exc:
            raise self.failure(exc, "reading sign-outs") from None
        return dt.datetime.fromisoformat(at).timestamp() if at else None

    # --- reading the trash and the trail (never writes) --------------------------------------------------------
    def trashed(self) -> pd.DataFrame:
        """The runs in the trash, latest first: who moved each there and when, why (trashed or replaced), and when
        it expires (``PINPOINT_TRASH_DAYS`` after; expired ones are purged by the next trash action)."""
        if self.version < AUDITED_SINCE:
            return pd.DataFrame(columns=TRASH_COLUMNS)
        days = trash_days()
        try:
            with self.engine.connect() as connection:
                rows = connection.execute(sa.select(TRASH.c.trash_id, TRASH.c.run_id, TRASH.c.trashed_at,
                                                    TRASH.c.trashed_by, TRASH.c.reason, TRASH.c.run_json)
                                          .order_by(TRASH.c.trash_id.desc())).all()
        except sa.exc.SQLAlchemyError as exc:
            raise self.failure(exc, "listing the trash") from None
        listed = []
        for trash_id, run_id, trashed_at, trashed_by, reason, run_json in rows:
            run = json.loads(run_json)
            listed.append({"trash_id": trash_id, "run_id": run_id, **{c: run.get(c) for c in TRASH_COLUMNS[2:7]},
                           "reason": reason, "trashed_at": trashed_at, "trashed_by": trashed_by,
                           "expires_at": _expiry(trashed_at, days)})
        return pd.DataFrame(listed, columns=TRASH_COLUMNS)

    def audit_trail(self, actor: Actor, limit: int | None = None) -> pd.DataFrame:
        """The audit trail, newest first (``run_ids`` as lists): for those who may read it (admins)."""
        require(actor, "audit")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise StoreError(f"--limit must be a whole number of entries, 1 or more; got {shorten(limit)}")
        if self.version < AUDITED_SINCE:
            return pd.DataFrame(columns=AUDIT_COLUMNS)
        query = sa.select(*(AUDIT.c[c] for c in AUDIT_COLUMNS)).order_by(AUDIT.c.audit_id.desc())
        if limit is not None:
            query = query.limit(limit)
        try:
            with self.engine.connect() as connection:
                rows = [dict(r) for r in connection.execute(query).mappings()]
        except sa.exc.SQLAlchemyError as exc:
            raise self.failure(exc, "reading the audit trail") from None
        for row in rows:
            row["run_ids"] = json.loads(row["run_ids"])
        return pd.DataFrame(rows, columns=AUDIT_COLUMNS)


# --- the trash: a run moves out of runs, run_boards and points (so no reader of runs sees it) and back ----------
def _distinct(run_ids: list[str]) -> list[str]:
    wanted = list(dict.fromkeys(str(r) for r in run_ids))
    if not wanted:
        raise StoreError("name at least one run id")
    return wanted


def _is_stored(connection, run_id: str) -> bool:
    return connection.execute(sa.select(RUNS.c.run_id).where(RUNS.c.run_id == run_id)).first() is not None


def _latest_in_trash(connection, run_id: str):
    return connection.execute(sa.select(TRASH).where(TRASH.c.run_id == run_id)
                              .order_by(TRASH.c.trash_id.desc()).limit(1)).first()


def _last_purge(connection, run_id: str) -> str | None:
    """'on WHEN by WHO' of the latest purge the trail records for ``run_id`` (run ids are kept as a JSON list,
    so the quoted id is looked for, then checked)."""
    needle = json.dumps(run_id)
    for at, who, ids in connection.execute(
            sa.select(AUDIT.c.at, AUDIT.c.who, AUDIT.c.run_ids).where(
                (AUDIT.c.action == "purge") & AUDIT.c.run_ids.contains(needle, autoescape=True))
            .order_by(AUDIT.c.audit_id.desc())):
        if run_id in json.loads(ids):
            return f"on {at} by {shorten(who)}"
    return None


def to_trash(connection, run_id: str, actor: Actor, reason: str) -> None:
    """Move stored run ``run_id`` (its row, boards and points) into the trash, in ``connection``'s transaction."""
    run = dict(connection.execute(sa.select(RUNS).where(RUNS.c.run_id == run_id)).mappings().one())
    boards = connection.execute(sa.select(BOARDS.c.gpu_index, BOARDS.c.gpu_uuid).where(BOARDS.c.run_id == run_id)
                                .order_by(BOARDS.c.position)).all()
    trash_id = connection.execute(TRASH.insert().values(
        run_id=run_id, trashed_at=now_text(), trashed_by=actor.who, reason=reason, run_json=json.dumps(run),
        boards_json=json.dumps([list(b) for b in boards]))).inserted_primary_key[0]
    connection.execute(TRASH_POINTS.insert().from_select(
        ["trash_id", *POINT_COLUMNS], sa.select(sa.literal(trash_id, sa.Integer), *(POINTS.c[c] for c in POINT_COLUMNS))
        .where(POINTS.c.run_id == run_id)))
    connection.execute(POINTS.delete().where(POINTS.c.run_id == run_id))
    connection.execute(BOARDS.delete().where(BOARDS.c.run_id == run_id))
    connection.execute(RUNS.delete().where(RUNS.c.run_id == run_id))


def _from_trash(connection, entry) -> None:
    """Put a trash entry back into runs, run_boards and points, and take it out of the trash."""
    run = json.loads(entry.run_json)
    connection.execute(RUNS.insert(), [{c.name: run.get(c.name) for c in RUNS.columns}])
    boards = json.loads(entry.boards_json)
    if boards:
        connection.execute(BOARDS.insert(), [{"run_id": entry.run_id, "position": i, "gpu_index": index,
                                              "gpu_uuid": uuid} for i, (index, uuid) in enumerate(boards)])
    connection.execute(POINTS.insert().from_select(
        ["run_id", *POINT_COLUMNS], sa.select(sa.literal(entry.run_id, RUNS.c.run_id.type),
                                              *(TRASH_POINTS.c[c] for c in POINT_COLUMNS))
        .where(TRASH_POINTS.c.trash_id == entry.trash_id)))
    _delete_trash(connection, TRASH.c.trash_id == entry.trash_id)


def _purge_expired(connection, days: float) -> list[str]:
    """Delete the trash entries kept longer than ``days``; their run ids."""
    expired = TRASH.c.trashed_at <= (dt.datetime.now(dt.UTC) - dt.timedelta(days=days)).isoformat(timespec="seconds")
    found = list(dict.fromkeys(connection.execute(sa.select(TRASH.c.run_id).where(expired)
                                                  .order_by(TRASH.c.trash_id)).scalars()))
    _delete_trash(connection, expired)
    return found


def _delete_trash(connection, which) -> None:
    """Delete the trash entries ``which`` selects, their points first (no reliance on cascades)."""
    connection.execute(TRASH_POINTS.delete().where(TRASH_POINTS.c.trash_id.in_(sa.select(TRASH.c.trash_id)
                                                                                .where(which))))
    connection.execute(TRASH.delete().where(which))
