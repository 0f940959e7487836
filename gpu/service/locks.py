"""Which GPUs of this machine are measuring: one lock per GPU, shared by every ``WorkerClient`` of the process.

Each client is one worker process on a device set (one GPU, a pair, or all of a node's) serving its jobs one at a
time. Before a job measures, its client takes the lock of every GPU in its set, so no other job measures on any of
them meanwhile, while a job on other GPUs runs at the same time. Locks are taken one GPU after another in one fixed
order (by board), and each GPU serves its waiters in turn by owner (``Turns``: the person whose job it served longest
ago goes first; one person's jobs keep their order): no two jobs can wait for each other, one person's sweeps cannot
starve another's, and a pair job is not overtaken forever by one-GPU jobs on either of its GPUs. A job that is
cancelled while it waits gives back what it holds; a finished, failed or crashed job gives back all of it (the client
releases in ``finally``). Across processes (the runner, a fleet, the tests), the client then takes the same GPUs'
file locks, in the same order (``host_locks``)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TypeVar

from gpu.core.devices import set_label

Waiting = TypeVar("Waiting")


class Turns:
    """Round robin by owner over a queue of waiting jobs: the owner served longest ago comes first (owners never
    served before all others, in the order they came), then the next owner's first job, and so on; each owner's
    jobs keep the order they came in. A job without an owner (the runner, a fleet's task, the app's warm-up) counts
    as the machine's own. Not thread-safe: the queue's own lock guards it."""

    def __init__(self):
        self._served: dict[Hashable, int] = {}
        self._clock = itertools.count()

    def order(self, waiting: list[Waiting], owner_of: Callable[[Waiting], Hashable]) -> list[Waiting]:
        """``waiting`` (in the order they came) in the order they will be served, if nothing else comes."""
        by_owner: dict[Hashable, list[Waiting]] = {}
        for job in waiting:
            by_owner.setdefault(owner_of(job), []).append(job)
        owners = sorted(by_owner, key=lambda owner: self._served.get(owner, -1))  # stable: arrival among equals
        rounds = itertools.zip_longest(*(by_owner[owner] for owner in owners))
        return [job for turn in rounds for job in turn if job is not None]

    def served(self, owner: Hashable) -> None:
        """``owner``'s job has its turn: their next one waits for every other owner's."""
        self._served[owner] = next(self._clock)


@dataclass(eq=False)
class GpuClaim:
    """One job's claim on the GPUs of its worker's set. ``keys`` name the boards (their UUIDs, else "index N"),
    ``indices`` are the same GPUs' ordinals for messages, in the same order. ``owner``: whose job it is (the
    signed-in person; None for the machine's own jobs); ``behind``: while it waits, the claim it waits behind (the
    one holding the GPU, or the one whose turn is next)."""

    keys: tuple[str, ...]
    indices: tuple[int, ...]
    owner: str | None = None
    held: list[str] = field(default_factory=list)
    behind: GpuClaim | None = None

    def __post_init__(self):
        if len(self.keys) != len(self.indices) or len(set(self.keys)) != len(self.keys):
            raise ValueError(f"a claim names each GPU once, with its index: {self.keys} / {self.indices}")
        order = sorted(range(len(self.keys)), key=lambda i: self.keys[i])  # the one lock order of the process
        self.keys = tuple(self.keys[i] for i in order)
        self.indices = tuple(self.indices[i] for i in order)

    @property
    def label(self) -> str:
        return f"a job on {set_label(sorted(self.indices))}"

    def index_of(self, key: str) -> int:
        return self.indices[self.keys.index(key)]


class GpuLocks:
    """The lock table: for each GPU, the claim that holds it, the claims waiting for it (in arrival order) and whose
    turn is next (``Turns``)."""

    def __init__(self):
        self._changed = threading.Condition()
        self._holders: dict[str, GpuClaim] = {}
        self._waiting: dict[str, list[GpuClaim]] = {}
        self._turns: dict[str, Turns] = {}

    def acquire(self, claim: GpuClaim, cancelled: Callable[[], bool] = lambda: False,
                waiting: Callable[[str, int], None] = lambda text, ahead: None, poll_s: float = 0.1) -> bool:
        """Take every GPU of ``claim``, in order; True once all are held. While it waits, ``waiting(text, ahead)``
        hears what for ("waiting for GPU 1: a job on GPUs 0,1 is measuring"), and how many jobs come first in the
        GPU's turns (``claim.behind`` is the claim it waits behind); once all are held, ``waiting("", 0)``. False,
        holding nothing, when ``cancelled()`` turns true first."""
        with self._changed:
            for key in claim.keys:
                queue = self._waiting.setdefault(key, [])
                turns = self._turns.setdefault(key, Turns())
                queue.append(claim)
                try:
                    while True:
                        order = turns.order(queue, _owner)
                        if key not in self._holders and order[0] is claim:
                            break
                        if cancelled():
                            self._release_locked(claim)
                            return False
                        claim.behind = self._holders.get(key) or order[0]
                        ahead = order.index(claim) + (1 if key in self._holders else 0)
                        waiting(self._waiting_text(claim, key, order[0]), ahead)
                        self._changed.wait(poll_s)
                finally:
                    queue.remove(claim)
                    if not queue:
                        del self._waiting[key]
                    self._changed.notify_all()
                turns.served(claim.owner)
                self._holders[key] = claim
                claim.held.append(key)
                claim.behind = None
        waiting("", 0)
        return True

    def release(self, claim: GpuClaim) -> None:
        """Give back every GPU ``claim`` holds (none is fine); the next waiter of each takes it."""
        with self._changed:
            self._release_locked(claim)

    def _release_locked(self, claim: GpuClaim) -> None:
        for key in claim.held:
            if self._holders.get(key) is claim:
                del self._holders[key]
        claim.held.clear()
        self._changed.notify_all()

    def _waiting_text(self, claim: GpuClaim, key: str, next_claim: GpuClaim) -> str:
        gpu = f"GPU {claim.index_of(key)}"
        holder = self._holders.get(key)
        if holder is None:  # free, but another's turn comes first
            return f"waiting for {gpu}: {next_claim.label} is next"
        if len(holder.held) == len(holder.keys):
            return f"waiting for {gpu}: {holder.label} is measuring"
        pending = holder.keys[len(holder.held)]
        return f"waiting for {gpu}: {holder.label} holds it while it waits for GPU {holder.index_of(pending)}"

    def busy(self) -> dict[int, str]:
        """GPU index → the job that holds it now ("a job on GPUs 0,1"), for a page that shows what is measuring."""
        with self._changed:
            return {holder.index_of(key): holder.label for key, holder in self._holders.items()}


def _owner(claim: GpuClaim) -> str | None:
    return claim.owner


GPU_LOCKS = GpuLocks()  # the process's one table: every client in it, so the app's and the runner's, shares it
