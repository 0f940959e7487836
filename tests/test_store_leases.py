"""One fleet id, one writer: the fleet lease in the runs store (schema version 6), on SQLite and PostgreSQL. A second
holder is refused with the first one named; a holder killed with SIGKILL stops renewing and its lease expires; a
holder whose lease was taken over stores nothing more."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from gpu.core.errors import StoreError
from gpu.results.persistence import leases
from gpu.results.persistence.store import RunStore
from tests.conftest import new_postgres_database
from tests.simulated_fleet import as_board, recorded

ROOT = Path(__file__).resolve().parent.parent
# A process that takes fleet f-1's lease (lease_s seconds, renewed every second), says so, and sleeps until killed.
HOLDER = """
import sys, time
from gpu.results.persistence.leases import FleetLease
from gpu.results.persistence.store import RunStore
lease = FleetLease(RunStore(sys.argv[1]), "f-1", lease_s=float(sys.argv[2]), renew_every_s=1)
lease.take()
print("held", flush=True)
time.sleep(600)
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.sqlite"
    return new_postgres_database(request.getfixturevalue("postgres_url"))


def test_a_second_holder_is_refused_naming_the_first_until_it_releases(url):
    first = leases.FleetLease(RunStore(url), "f-1")
    second = leases.FleetLease(RunStore(url), "f-1")
    first.take()
    try:
        with pytest.raises(leases.LeaseHeld, match=f"fleet f-1 is being measured by another command .* pid "
                                                   f"{os.getpid()}, since .* UTC, its lease renewed 0 s ago.*"
                                                   r"give another --fleet-id \(if that command is gone, its lease "
                                                   r"expires in (59|60) s\)"):
            second.take()
        leases.FleetLease(RunStore(url), "f-2").take()  # another fleet id is another lease
    finally:
        first.release()
    second.take()  # released: the next command takes it
    second.release()


@pytest.mark.slow
def test_a_killed_holder_stops_renewing_and_its_lease_expires(url):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, url, "3"], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        time.sleep(4)  # renewed every second: alive past its lease time, it still holds it
        with pytest.raises(leases.LeaseHeld, match=f"pid {holder.pid}"):
            leases.FleetLease(RunStore(url), "f-1").take()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    killed = time.monotonic()
    taken = None
    while taken is None and time.monotonic() - killed < 15:
        try:
            taken = leases.FleetLease(RunStore(url), "f-1")
            taken.take()
        except leases.LeaseHeld:
            taken = None
            time.sleep(0.2)
    assert taken is not None and time.monotonic() - killed < 5  # its lease expired 3 s after its last renewal
    taken.release()


@pytest.mark.slow
def test_a_holder_whose_expired_lease_was_taken_over_stores_nothing_more(url):
    store = RunStore(url)
    old = leases.FleetLease(store, "f-1", lease_s=0.5, renew_every_s=3600)  # never renewed in time
    old.take()
    time.sleep(1)
    new = leases.FleetLease(RunStore(url), "f-1")
    new.take()
    try:
        with pytest.raises(StoreError, match="fleet f-1's lease is held by another command now: nothing was written"):
            store.save(as_board(recorded("reduction"), 0), "fleet", fleet=("f-1", "health"), lease=old)
        assert not old.renew() and "another command took it" in old.lost
        assert store.runs(fleet_id="f-1").empty
        store.save(as_board(recorded("reduction"), 0), "fleet", fleet=("f-1", "health"), lease=new)
        assert len(store.runs(fleet_id="f-1")) == 1
        old.release()  # only its own: the new holder keeps it
        with pytest.raises(leases.LeaseHeld):
            leases.FleetLease(RunStore(url), "f-1").take()
    finally:
        new.release()


def test_a_store_migrates_with_its_lease_table_since_version_6(url):
    store = RunStore(url)
    assert store.migrate() >= 6

    assert "fleet_leases" in sa.inspect(store.engine).get_table_names()
