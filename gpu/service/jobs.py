"""A job as the app sees it (``JobHandle``: its state, progress, rows and outcome), and whose job it is in words for
the person reading (``whose_job``): what the client hands a page, the runner or a fleet task for each job it
queues."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from gpu.core import schema, text
from gpu.core.access import Actor


@dataclass
class JobHandle:
    """A job's state as the page sees it. ``state``: queued, running, done, failed or cancelled. ``rows``
    holds the points measured so far (complete schema rows, as the worker sends them). While it waits for a GPU
    that a job of another worker holds, ``waiting`` says so ("waiting for GPU 1: a job on GPUs 0,1 is measuring").
    ``owner``: whose job it is (the signed-in person's name; None for the machine's own: the runner, a fleet's
    task, the app's warm-up); ``ahead_owner``: while it is queued, the owner of the job it waits behind."""

    id: int
    kind: str
    session: str | None
    payload: dict
    owner: str | None = None
    ahead_owner: str | None = None
    state: str = "queued"
    done: int = 0
    total: int = 0
    text: str = ""
    conditions_now: dict = field(default_factory=dict)  # the worker's latest witness reading (Progress)
    result: object = None
    error: Exception | None = None
    notes: list[str] = field(default_factory=list)
    queued_ahead: int = 0
    waiting: str = ""
    rows: list[dict] = field(default_factory=list)
    _finished: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def finished(self) -> bool:
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._finished.wait(timeout)

    def queue_text(self, viewer: Actor | None = None) -> str:
        """What a queued job waits for, in words: a GPU held by another worker's job, else the jobs ahead of it; for
        a ``viewer``, also whose job it waits behind, as they may know it (``whose_job``)."""
        said = self.waiting or f"queued behind {text.count(self.queued_ahead, 'job')}"
        whose = whose_job(self.ahead_owner, viewer)
        if not whose:
            return said
        return f"{said} ({whose})" if self.waiting else f"{said}; the one just ahead: {whose}"

    def outcome(self):
        """The result, or raise the job's error (ValidationError or WorkerError)."""
        self.wait()
        if self.error is not None:
            raise self.error
        return self.result

    def partial_frame(self):
        """The points measured so far as a schema DataFrame (None before the first), for drawing while the job
        runs; the final result is ``outcome()``."""
        rows = list(self.rows)
        if not rows:
            return None
        try:
            return schema.make_frame(rows, {})
        except schema.SchemaError:
            return None

    def finish(self, state: str, result=None, error: Exception | None = None) -> None:
        """End the job: ``state`` done (with ``result``), failed or cancelled (with ``error``); waiters wake."""
        if state not in ("done", "failed", "cancelled"):
            raise ValueError(f"a job finishes as done, failed or cancelled, not {state!r}")
        self.state, self.result, self.error = state, result, error
        self._finished.set()


def whose_job(owner: str | None, viewer: Actor | None) -> str:
    """Whose job it is, as ``viewer`` may know it: "your own job", the owner's name to an admin (who may cancel
    anyone's job), "another user's job" to everyone else; nothing for the machine's own job or without a viewer."""
    if owner is None or viewer is None:
        return ""
    if owner == viewer.who:
        return "your own job"
    return f"{owner}'s job" if viewer.may("cancel_any") else "another user's job"
