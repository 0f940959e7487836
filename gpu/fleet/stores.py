"""A fleet's store writes, on one thread of their own, so that a GPU's next run never waits for a store transaction.

The fleet's loop hands each finished run's frame to ``StoreQueue.put`` and goes on at once: it notices the next run
that ends, and submits each GPU's next run, while the frame is written. The writes keep their order (one thread), each
is still one transaction of one whole run, and the loop reads each outcome back on its own thread
(``StoreQueue.finished``), so everything the fleet reports (a run stored, or measured but not stored) is still said
by the loop, in the order the runs were stored.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import pandas as pd

from gpu.core.access import Actor
from gpu.results.persistence.store import params_by_run


@dataclass
class StoreWrite:
    """One finished run on its way into the store: whose (a fleet GPU or node), which suite run, its frame, its time
    from submission to the loop noticing its end, and the write's outcome (``future``: the store's ``SaveResult``s)."""

    unit: object
    run: object
    frame: pd.DataFrame
    elapsed: float
    future: Future


class StoreQueue:
    """The fleet's writes into ``catalog`` under ``fleet_id``, one at a time and in order, beside the fleet's loop."""

    def __init__(self, catalog, fleet_id: str, suite, label: str | None = None, lease=None):
        self.catalog, self.fleet_id, self.suite, self.label, self.lease = catalog, fleet_id, suite, label, lease
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="pinpoint-fleet-store")
        self._writes: list[StoreWrite] = []

    @property
    def pending(self) -> bool:
        """Writes handed over whose outcome the loop has not read yet."""
        return bool(self._writes)

    def put(self, unit, run, frame: pd.DataFrame, elapsed: float) -> None:
        """Write ``frame`` (``run``'s whole run on ``unit``) after the writes before it; returns at once."""
        self._writes.append(StoreWrite(unit, run, frame, elapsed, self._writer.submit(self._save, run, frame)))

    def _save(self, run, frame: pd.DataFrame):
        return self.catalog.save(frame, "fleet", self.label, None, fleet=(self.fleet_id, self.suite.name),
                                 suite_text=self.suite.text or None, actor=Actor.local("fleet"), lease=self.lease,
                                 params=params_by_run(frame, run.checked()), gpus=run.gpus)

    def finished(self, wait_all: bool = False) -> list[StoreWrite]:
        """The writes done since the last call, in the order they were handed over (``wait_all``: every write, once
        each is done); a write is returned only after every write before it."""
        if wait_all:
            wait([w.future for w in self._writes])
        done = []
        while self._writes and self._writes[0].future.done():
            done.append(self._writes.pop(0))
        return done

    def close(self) -> None:
        """Wait for the writes handed over, then end the writer's thread."""
        self._writer.shutdown(wait=True)
