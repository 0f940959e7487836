"""One fleet id, one writer: a fleet command holds a lease on its fleet id in the runs store while it measures.

The lease is a row of ``fleet_leases`` (schema version 5): the fleet id, a random token of its holder, the holder's
host and pid for the person, and when it was taken, last renewed and expires, on the database's clock (one clock
for every machine that shares a PostgreSQL store). Taking it inserts the row, or takes over one that expired with a
conditional update; two commands that race both go through the primary key or that update, and one of them wins,
on SQLite and PostgreSQL alike. The holder renews it every ``RENEW_EVERY_S`` from a thread; a holder that dies (killed,
its machine gone) stops renewing, and its lease expires ``LEASE_S`` after the last renewal. A lease taken over
after it expired is lost to its old holder, which sees that at its next renewal (``lost`` says why) and stores
nothing more. Ending the command deletes the row. No Streamlit and no CUDA here.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import socket
import threading
import time

import sqlalchemy as sa

from gpu.core.errors import StoreError
from gpu.core.text import shorten
from gpu.results.persistence.migrations import FLEET_LEASES

LEASE_S = 60.0  # a lease not renewed for this long has expired: its holder is gone
RENEW_EVERY_S = 10.0


class LeaseHeld(StoreError):
    """Another command holds the fleet id's lease; one line naming it and when its lease expires."""


def database_now(connection) -> float:
    """Seconds since the epoch on the database's clock (PostgreSQL: the server's; SQLite: this machine's)."""
    if connection.dialect.name == "postgresql":
        return float(connection.execute(sa.text("SELECT extract(epoch FROM clock_timestamp())")).scalar())
    if connection.dialect.name == "sqlite":
        return float(connection.execute(sa.text("SELECT (julianday('now') - 2440587.5) * 86400.0")).scalar())
    return time.time()


def _when(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class FleetLease:
    """The lease of ``fleet_id`` in ``store`` for this process: ``take`` (LeaseHeld when another live command holds
    it), renewed from a thread while held, ``release`` at the end; a context manager doing all three."""

    def __init__(self, store, fleet_id: str, lease_s: float = LEASE_S, renew_every_s: float = RENEW_EVERY_S):
        self.store, self.fleet_id = store, fleet_id
        self.lease_s, self.renew_every_s = lease_s, renew_every_s
        self.token = secrets.token_hex(16)
        self.who = f"{socket.gethostname()[:80]} pid {os.getpid()}"
        self.lost = ""  # why this process no longer holds the lease, once it does not
        self._unanswered: float | None = None  # since when renewals have failed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FleetLease:
        self.take()
        return self

    def __exit__(self, *_exc) -> None:
        self.release()

    def take(self) -> None:
        """Hold the lease (and start renewing it), or LeaseHeld naming who holds it."""
        self.store.migrate()
        for _ in range(3):
            try:
                with self.store.engine.begin() as connection:
                    if self._take(connection):
                        break
            except sa.exc.IntegrityError:  # another command inserted it first: read theirs
                continue
            except sa.exc.SQLAlchemyError as exc:
                raise self.store.failure(exc, "taking the fleet's lease") from None
        else:
            raise LeaseHeld(f"fleet {shorten(self.fleet_id)}: its lease kept changing hands while this command tried "
                            "to take it; another command is starting with this fleet id: give another --fleet-id")
        self._thread = threading.Thread(target=self._renewing, daemon=True, name=f"pinpoint-lease-{self.fleet_id}")
        self._thread.start()

    def _take(self, connection) -> bool:
        now = database_now(connection)
        held = connection.execute(sa.select(FLEET_LEASES).where(FLEET_LEASES.c.fleet_id == self.fleet_id)).first()
        values = {"holder": self.token, "who": self.who, "taken_at": now, "renewed_at": now,
                  "expires_at": now + self.lease_s}
        if held is None:
            connection.execute(FLEET_LEASES.insert().values(fleet_id=self.fleet_id, **values))
            return True
        if held.holder != self.token and held.expires_at > now:
            raise LeaseHeld(
                f"fleet {shorten(self.fleet_id)} is being measured by another command ({shorten(held.who, 100)}, since "
                f"{_when(held.taken_at)}, its lease renewed {max(0.0, now - held.renewed_at):.0f} s ago): one fleet id "
                f"has one writer; wait for it to end, or give another --fleet-id (if that command is gone, its lease "
                f"expires in {held.expires_at - now:.0f} s)")
        taken = connection.execute(FLEET_LEASES.update().where(
            (FLEET_LEASES.c.fleet_id == self.fleet_id) & (FLEET_LEASES.c.holder == held.holder)
            & (FLEET_LEASES.c.expires_at == held.expires_at)).values(**values)).rowcount
        return taken == 1  # 0: another command took over the expired lease first; read it again

    def renew(self) -> bool:
        """Push the expiry on; False (and ``lost`` says why) when another command holds the lease now. A store
        that does not answer is tried again at the next renewal, until the lease would have expired."""
        try:
            with self.store.engine.begin() as connection:
                now = database_now(connection)
                renewed = connection.execute(FLEET_LEASES.update().where(
                    (FLEET_LEASES.c.fleet_id == self.fleet_id) & (FLEET_LEASES.c.holder == self.token))
                    .values(renewed_at=now, expires_at=now + self.lease_s)).rowcount
        except sa.exc.SQLAlchemyError as exc:
            self._unanswered = self._unanswered or time.monotonic()
            if time.monotonic() - self._unanswered > self.lease_s:
                self.lost = (f"the runs store did not renew fleet {self.fleet_id}'s lease for {self.lease_s:.0f} s "
                             f"({self.store.failure(exc, 'renewing the lease')})")
            return not self.lost
        self._unanswered = None
        if renewed != 1:
            self.lost = (f"fleet {self.fleet_id}'s lease expired and another command took it (this one was not "
                         f"heard from for {self.lease_s:.0f} s)")
        return not self.lost

    def _renewing(self) -> None:
        while not self._stop.wait(self.renew_every_s):
            if not self.renew():
                return

    def release(self) -> None:
        """Stop renewing and give the lease up (only ours: a lease another command took over is left to it)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.renew_every_s + 30)
        try:
            with self.store.engine.begin() as connection:
                connection.execute(FLEET_LEASES.delete().where(
                    (FLEET_LEASES.c.fleet_id == self.fleet_id) & (FLEET_LEASES.c.holder == self.token)))
        except sa.exc.SQLAlchemyError:
            pass  # it expires by itself

    def holds(self, connection) -> bool:
        """This process holds the lease (read within ``connection``'s transaction)."""
        holder = connection.execute(sa.select(FLEET_LEASES.c.holder)
                                    .where(FLEET_LEASES.c.fleet_id == self.fleet_id)).scalar()
        return holder == self.token
