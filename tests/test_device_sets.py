"""Choosing a device set ("0,1", "all", UUIDs, a list) and the per-GPU lock table, without worker processes: every
refusal is one line naming the bad value and the GPUs there are; locks are taken in one order, first come first
served per GPU, and given back by a job that is cancelled while it waits."""

import threading

import pytest

from gpu.core import devices
from gpu.core.errors import DeviceNotFound
from gpu.service.locks import GpuClaim, GpuLocks
from tests.conftest import wait_until


def node(count: int) -> list[dict]:
    return [{"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{i:08x}-1111-4222-8333-44444b1d07e{i:x}",
             "host": "node-3"} for i in range(count)]


TWO, EIGHT = node(2), node(8)
LISTING = "0 · NVIDIA H100 80GB HBM3 · …4b1d07e0 · node-3; 1 · NVIDIA H100 80GB HBM3 · …4b1d07e1 · node-3"


@pytest.mark.parametrize(("spec", "chosen"), [
    ("0,1", [0, 1]), ("1, 0", [0, 1]), ("all", [0, 1]), (" ALL ", [0, 1]), ("1", [1]), (1, [1]), ([1, "0"], [0, 1]),
    (("GPU-00000001",), [1]), ("00000000-1111,GPU-00000001", [0, 1]), ("0,1,", [0, 1]), (None, [0]), ("", [0])])
def test_a_set_is_named_by_indices_uuids_all_or_a_list(spec, chosen):
    assert devices.choose_set(spec, TWO) == chosen


def test_a_job_that_needs_several_gpus_takes_them_all_by_default():
    assert devices.choose_set(None, EIGHT, need=2) == list(range(8))
    assert devices.choose_set("all", EIGHT) == list(range(8)) and devices.choose_set("7,3", EIGHT) == [3, 7]


@pytest.mark.parametrize(("spec", "gpus", "choice", "message"), [
    ("5", TWO, {}, f"no GPU '5' here; the GPUs are: {LISTING}"),
    ("0,0", TWO, {}, f"'0,0' names GPU 0 twice; name each GPU once; the GPUs are: {LISTING}"),
    ("0,GPU-00000000", TWO, {}, "'0,GPU-00000000' names GPU 0 twice ('0' and 'GPU-00000000'); name each GPU once"),
    (",", TWO, {}, f"',' names no GPU; give indices (0,1), board UUIDs or 'all'; the GPUs are: {LISTING}"),
    ([], TWO, {}, "'' names no GPU"),
    ("0,1,2", TWO, {}, f"'0,1,2' names 3 GPUs; this machine has 2: {LISTING}"),
    (None, TWO[:1], {"need": 2, "job": "the peers experiment"},
     "the peers experiment needs two GPUs; this machine has 1: 0 · NVIDIA H100 80GB HBM3 · …4b1d07e0 · node-3"),
    ("1", TWO, {"need": 2, "job": "the peers experiment"},
     f"'1' names 1 GPU; the peers experiment needs two; the GPUs are: {LISTING}"),
    ("all", TWO, {"most": 1, "job": "transfers"}, "'all' names 2 GPUs; transfers measures on one: give one index or"),
    ("GPU-0000000", TWO, {}, "GPU 'GPU-0000000' matches 2 GPUs; give more of its UUID"),
    ([0.5], TWO, {}, "GPU '0.5' is neither an index nor a board UUID"),
    ([True], TWO, {}, "GPU 'True' is neither an index nor a board UUID"),
    ("0", [], {}, "no CUDA GPU is visible to this process"),
])
def test_each_bad_set_is_one_line_naming_the_value_and_the_gpus(spec, gpus, choice, message):
    with pytest.raises(DeviceNotFound) as refused:
        devices.choose_set(spec, gpus, **choice)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_a_hostile_value_is_shown_without_control_characters_and_shortened():
    evil = "\x1b]0;owned\x07\x1b[2J" + "7" * 5000 + "\u202e"
    with pytest.raises(DeviceNotFound) as refused:
        devices.choose_set(evil, TWO)
    message = str(refused.value)
    assert not any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f or c == "\u202e" for c in message)
    assert "]0;owned[2J7777" in message and "(5,011 characters)" in message and len(message) < 400
    with pytest.raises(DeviceNotFound) as refused:
        devices.choose_set(["0", "\x1b[31m1"], TWO, need=3)  # the machine has too few: said before any value
    assert "\x1b" not in str(refused.value)


def test_a_large_node_is_listed_up_to_a_bound():
    big = node(40)
    with pytest.raises(DeviceNotFound) as refused:
        devices.choose_set("99", big)
    assert str(refused.value).endswith("15 · NVIDIA H100 80GB HBM3 · …4b1d07ef · node-3; and 24 more")


def test_set_labels():
    assert devices.set_label([1]) == "GPU 1" and devices.set_label([0, 1]) == "GPUs 0,1"
    assert devices.set_spec([0, 3]) == "0,3"


# --- the lock table --------------------------------------------------------------------------------------------
def claim(*indices: int) -> GpuClaim:
    return GpuClaim(tuple(f"GPU-{i}" for i in indices), tuple(indices))


def in_thread(locks: GpuLocks, wanted: GpuClaim, log: list, cancelled=lambda: False) -> threading.Thread:
    def take():
        log.append(("got" if locks.acquire(wanted, cancelled, lambda text, ahead: log.append((text, ahead)),
                                           poll_s=0.01) else "gave up", wanted.indices))

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread



def test_a_pair_waits_for_the_gpu_a_job_holds_and_says_so():
    locks, log = GpuLocks(), []
    single = claim(1)
    assert locks.acquire(single)
    pair = claim(1, 0)
    thread = in_thread(locks, pair, log)
    wait_until(lambda: ("waiting for GPU 1: a job on GPU 1 is measuring", 1) in log)
    assert pair.held == ["GPU-0"] and locks.busy() == {0: "a job on GPUs 0,1", 1: "a job on GPU 1"}
    locks.release(single)
    thread.join(5)
    assert log[-1] == ("got", (0, 1)) and locks.busy() == {0: "a job on GPUs 0,1", 1: "a job on GPUs 0,1"}


def test_a_job_cancelled_while_it_waits_gives_back_what_it_took():
    locks, log, stop = GpuLocks(), [], threading.Event()
    assert locks.acquire(claim(1))
    pair = claim(0, 1)
    thread = in_thread(locks, pair, log, stop.is_set)
    wait_until(lambda: pair.held == ["GPU-0"])
    behind = claim(0)
    waiter = in_thread(locks, behind, log)
    wait_until(lambda: ("waiting for GPU 0: a job on GPUs 0,1 holds it while it waits for GPU 1", 1) in log)
    stop.set()
    thread.join(5)
    waiter.join(5)
    assert ("gave up", (0, 1)) in log and log[-1] == ("got", (0,)) and pair.held == []


def test_each_gpu_serves_its_waiters_first_come_first_served():
    locks, log = GpuLocks(), []
    first = claim(0)
    assert locks.acquire(first)
    waiters = [claim(0, 1), claim(0), claim(0, 2)]
    threads = []
    for position, wanted in enumerate(waiters, start=1):
        threads.append(in_thread(locks, wanted, log))
        wait_until(lambda p=position: any(e[1] == p for e in log if str(e[0]).startswith("waiting for GPU 0")))
    assert ("waiting for GPU 0: a job on GPU 0 is measuring", 3) in log
    for holder, wanted in zip([first, *waiters[:-1]], waiters, strict=True):
        locks.release(holder)
        wait_until(lambda w=wanted: len(w.held) == len(w.keys))
    assert [e[1] for e in log if e[0] == "got"] == [(0, 1), (0,), (0, 2)]
    for thread in threads:
        thread.join(5)


def test_crossing_pairs_in_many_threads_never_deadlock_or_share_a_gpu():
    locks, holding, problems = GpuLocks(), {}, []
    guard = threading.Lock()
    sets = [(0, 1), (1, 0), (1, 2), (2, 0), (0, 1, 2), (2,), (0,)]

    def worker(indices):
        for _ in range(30):
            wanted = claim(*indices)
            assert locks.acquire(wanted)
            with guard:
                clash = [i for i in indices if i in holding]
                if clash:
                    problems.append((indices, clash))
                holding.update({i: indices for i in indices})
            with guard:
                for i in indices:
                    holding.pop(i, None)
            locks.release(wanted)

    threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in sets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(t.is_alive() for t in threads), "a deadlock: some threads never got their GPUs"
    assert not problems


def test_a_claim_names_each_gpu_once():
    with pytest.raises(ValueError, match="each GPU once"):
        claim(0, 0)
