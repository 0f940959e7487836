"""The fair GPU queue: jobs are served in turn by owner (on a worker's queue and on each GPU's lock), a person has at
most one queued job, a queued job says whose job it waits behind as the viewer may know it, and only an admin
cancels another person's job."""

from __future__ import annotations

import threading

import pytest

from gpu.core.access import Actor, Role
from gpu.core.errors import AccessRefused, WorkerError
from gpu.service.client import WorkerClient
from gpu.service.jobs import JobHandle, whose_job
from gpu.service.locks import GpuClaim, GpuLocks, Turns
from tests.conftest import wait_until

FAKE = "tests.fake_service:FakeService"
ADMIN = Actor("root@example.com", Role.ADMIN)
ALICE = Actor("alice@example.com", Role.MEMBER)
CAROL = Actor("carol@example.com", Role.MEMBER)
VIEWER = Actor("vic@example.com", Role.VIEWER)


def served(turns: Turns, waiting: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Serve every waiting (owner, number) job one at a time, as a queue does: the head of the turns each time."""
    order, waiting = [], list(waiting)
    while waiting:
        job = turns.order(waiting, lambda j: j[0])[0]
        waiting.remove(job)
        turns.served(job[0])
        order.append(job)
    return order


# --- the order ---------------------------------------------------------------------------------------------------
def test_four_people_with_three_jobs_each_are_served_in_turn():
    waiting = [(owner, n) for owner in "ABCD" for n in (1, 2, 3)]  # A's three came first, then B's …
    assert served(Turns(), waiting) == [(owner, n) for n in (1, 2, 3) for owner in "ABCD"]


def test_one_persons_twelve_jobs_are_served_in_the_order_they_came():
    waiting = [("A", n) for n in range(12)]
    assert served(Turns(), waiting) == waiting


def test_the_person_served_longest_ago_goes_first_whoever_came_first():
    turns = Turns()
    turns.served("A")
    turns.served("B")
    # B came first but was served last; A was served before B; C never was.
    assert turns.order([("B", 1), ("A", 1), ("C", 1)], lambda j: j[0]) == [("C", 1), ("A", 1), ("B", 1)]


def test_the_machines_own_jobs_take_turns_as_one_owner():
    order = Turns().order([(None, 1), (None, 2), ("A", 1)], lambda j: j[0])
    assert order == [(None, 1), ("A", 1), (None, 2)]


def _take_in_turn(locks: GpuLocks, claims: list[GpuClaim], log: list) -> list[threading.Thread]:
    threads = []
    for number, claim in enumerate(claims, start=1):
        def take(claim=claim):
            assert locks.acquire(claim, poll_s=0.01)
            log.append(claim.owner)
            locks.release(claim)

        threads.append(threading.Thread(target=take, daemon=True))
        threads[-1].start()
        wait_until(lambda n=number: len(locks._waiting.get("GPU-0", [])) == n)  # each arrives after the one before
    return threads



def test_a_gpus_lock_serves_its_waiters_in_turn_by_owner():
    locks, log = GpuLocks(), []
    holder = GpuClaim(("GPU-0",), (0,), "alice")
    assert locks.acquire(holder)
    waiting = [GpuClaim(("GPU-0",), (0,), owner) for owner in ("alice", "alice", "alice", "bob", "carol")]
    threads = _take_in_turn(locks, waiting, log)
    assert waiting[0].behind is holder  # each waits behind the job measuring
    locks.release(holder)
    for thread in threads:
        thread.join(5)
    # alice was served last (the holder): bob and carol first, then alice's jobs, in their order.
    assert log == ["bob", "carol", "alice", "alice", "alice"]


# --- one queued job a person, whose job, cancelling ---------------------------------------------------------------
@pytest.fixture
def client():
    c = WorkerClient(service=FAKE, start_timeout=60)
    yield c
    c.close()


def _running(client: WorkerClient, owner: str) -> JobHandle:
    blocker = client.submit("steps", {"n": 400, "seconds": 0.05}, session=f"{owner}-tab", owner=owner)
    while blocker.state != "running":
        blocker.wait(0.02)
    return blocker


def test_a_persons_second_queued_job_replaces_their_first_from_any_session(client):
    blocker = _running(client, "bob@example.com")
    first = client.submit("echo", {"value": 1}, session="tab-1", owner=ALICE.who)
    second = client.submit("echo", {"value": 2}, session="tab-2", owner=ALICE.who)
    assert first.state == "cancelled" and "replaced" in str(first.error)
    assert [job.owner for job in client.jobs()] == ["bob@example.com", ALICE.who]
    client.cancel(blocker)
    assert second.outcome()["value"] == 2 and blocker.state == "cancelled"


def test_a_worker_serves_the_person_it_served_longest_ago_first(client):
    blocker = _running(client, "bob@example.com")
    bobs_next = client.submit("echo", {"value": "bob"}, session="bob-tab-2", owner="bob@example.com")
    alices = client.submit("echo", {"value": "alice"}, session="alice-tab", owner=ALICE.who)
    carols = client.submit("echo", {"value": "carol"}, session="carol-tab", owner=CAROL.who)
    # bob came first, but his job is measuring: alice and carol go before his next one.
    assert [job.owner for job in client.jobs()[1:]] == [ALICE.who, CAROL.who, "bob@example.com"]
    assert (alices.queued_ahead, carols.queued_ahead, bobs_next.queued_ahead) == (1, 2, 3)
    client.cancel(blocker)
    done = []
    for job in (alices, carols, bobs_next):
        job.outcome()
        done.append(job)
    assert all(job.state == "done" for job in done)


def test_a_queued_job_names_whose_job_it_waits_behind_as_the_viewer_may_know_it(client):
    _running(client, "bob@example.com")
    alices = client.submit("echo", {}, session="alice-tab", owner=ALICE.who)
    assert alices.ahead_owner == "bob@example.com"
    assert alices.queue_text(ADMIN) == "queued behind 1 job; the one just ahead: bob@example.com's job"
    assert alices.queue_text(ALICE) == "queued behind 1 job; the one just ahead: another user's job"
    assert alices.queue_text(VIEWER) == "queued behind 1 job; the one just ahead: another user's job"
    assert alices.queue_text() == "queued behind 1 job"  # the runner's own line: no person to name
    mine = JobHandle(id=9, kind="echo", session=None, payload={}, owner=ALICE.who, ahead_owner=ALICE.who,
                     waiting="waiting for GPU 0: a job on GPUs 0,1 is measuring")
    assert mine.queue_text(ALICE) == "waiting for GPU 0: a job on GPUs 0,1 is measuring (your own job)"
    assert whose_job(None, ADMIN) == "" and whose_job("bob", ADMIN) == "bob's job"


def test_an_admin_cancels_anyones_job_and_the_job_says_who(client):
    blocker = _running(client, "bob@example.com")
    alices = client.submit("echo", {}, session="alice-tab", owner=ALICE.who)
    client.cancel_as(ADMIN, alices)
    assert alices.state == "cancelled" and str(alices.error) == f"cancelled by {ADMIN.who}"
    client.cancel_as(ADMIN, blocker)  # the one measuring stops at its next point
    with pytest.raises(WorkerError, match=f"cancelled by {ADMIN.who}"):
        blocker.outcome()


@pytest.mark.parametrize("actor", [CAROL, VIEWER], ids=["member", "viewer"])
def test_a_member_or_viewer_cannot_cancel_another_persons_job(client, actor):
    blocker = _running(client, "bob@example.com")
    alices = client.submit("echo", {"value": 1}, session="alice-tab", owner=ALICE.who)
    with pytest.raises(AccessRefused, match=f"cancel any needs the admin role; {actor.who} is a {actor.role.word}"):
        client.cancel_as(actor, alices)
    with pytest.raises(AccessRefused):
        client.cancel_as(actor, blocker)
    assert alices.state == "queued" and blocker.state == "running"
    client.cancel_as(ALICE, alices)  # their own job: a member may
    assert alices.state == "cancelled"
    client.cancel(blocker)


# --- the page's queue panel --------------------------------------------------------------------------------------
def shown(markdown: str) -> str:
    """A caption as the reader sees it: without the escapes that keep names from becoming Markdown or links."""
    return markdown.replace("\\", "").replace("\u200b", "")


def _queue_panel(backend):
    from pages._ui import measure

    measure.queue_panel(backend, "q")


def test_the_queue_panel_names_owners_to_an_admin_only_and_lets_only_an_admin_cancel_them(client, monkeypatch):
    import types

    from streamlit.testing.v1 import AppTest

    from pages._ui import access

    blocker = _running(client, "bob@example.com")
    alices = client.submit("echo", {}, session="alice-tab", owner=ALICE.who)
    backend = types.SimpleNamespace(client=client)
    monkeypatch.setattr(access, "current_actor", lambda: CAROL)
    at = AppTest.from_function(_queue_panel, args=(backend,), default_timeout=30).run()
    assert at.expander[0].label == "GPU queue: 2 jobs"
    assert [shown(c.value) for c in at.caption] == [
        "another user's job · measuring",
        "another user's job · queued behind 1 job; the one just ahead: another user's job"]
    assert len(at.button) == 0  # a member cancels no one else's job
    monkeypatch.setattr(access, "current_actor", lambda: ADMIN)
    at.run()
    assert [shown(c.value) for c in at.caption] == [
        "bob@example.com's job · measuring",
        f"{ALICE.who}'s job · queued behind 1 job; the one just ahead: bob@example.com's job"]
    at.button(key=f"q_cancel_{alices.id}").click().run()
    assert alices.state == "cancelled" and str(alices.error) == f"cancelled by {ADMIN.who}"
    assert blocker.state == "running"
    client.cancel(blocker)


def test_a_markdown_name_in_the_queue_is_shown_as_typed_never_as_a_link(client):
    """A member signed in as a Markdown link presses Measure; the admin queued behind reads the name as typed."""
    from gpu.core.text import plain
    from pages._ui import measure

    name = "[click me](https://evil.example/q)@example.org"
    image = "![x](https://evil.example/pixel.png)@example.org"
    for owner in (name, image):
        blocker = _running(client, owner)
        admins = client.submit("echo", {}, session="admin-tab", owner=ADMIN.who)
        line = measure.progress_text(admins, ADMIN)
        assert line == plain(f"queued behind 1 job; the one just ahead: {owner}'s job", None)
        assert "](" not in line and "\\[" in line and "\\]\\(https\\:" in line  # no link or image can form
        assert shown(line) == f"queued behind 1 job; the one just ahead: {owner}'s job"
        client.cancel(admins)
        client.cancel(blocker)
        with pytest.raises(WorkerError):
            blocker.outcome()
