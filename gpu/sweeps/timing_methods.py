"""The timing methods the harness owns (as BabelStream's harness owns timing): a sweep says how to issue one
operation on a stream (``issue(stream)``: a copy, a launch) and names the method; these time it, over
``gpu.device.timing``'s clocks:

* ``single`` – CUDA events around one issued operation (``EventTimer``): the latency view; a small operation's time
  includes Python's issue cost;
* ``batched`` – back-to-back operations between two events, as bandwidthTest and nvbandwidth time them, as many per
  sample as ``copies_per_sample`` calibrates (a sample lasts at least ``BATCH_MS``); a sample is their mean
  (``PerCopy``: the profile's ``min_time_s`` counts the operations' time). Unheld: for operations that wait on the
  host (a pageable copy cannot be queued behind a hold);
* ``held`` – batched, the stream held by nvbench's blocking kernel while Python queues the batch (``StreamHold``), so
  the GPU runs the operations back to back;
* ``per_stream`` – events on each of several streams (one per GPU, or per engine), every stream held and released
  together; each stream's milliseconds.

A measurement that truly needs another clock keeps its own and says why where it does (a host clock around an
allocation, a latency chase timed on the device, a kernel's cold launch: ``KernelTimer``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field

from gpu.device.timing import EventTimer, StreamHold

SINGLE, BATCHED, HELD = "single", "batched", "held"
METHODS = (SINGLE, BATCHED, HELD)
BATCH_MS = 1.0  # one batched sample lasts at least this long (bandwidthTest's and nvbandwidth's regime)
MAX_BATCH = 512  # operations queued behind one stream hold; the Streams page queues up to 576 operations held


@dataclass(frozen=True)
class PerCopy:
    """A batched sample: ``batch_ms(copies)`` times ``copies`` back-to-back copies; a sample is their mean in ms. The
    profile's ``min_time_s`` then counts the time the copies took (nvbench's rule), not the per-copy means: a 1 MiB
    pinned copy batched 84 to a sample otherwise never reached 0.5 s and ran to its profile's cap converged."""

    batch_ms: Callable[[int], float]
    copies: int
    counts_copies: bool = True  # False: the profile's min_time_s counts the means (as some runs were recorded)

    def __call__(self) -> float:
        return self.batch_ms(self.copies) / self.copies


def copies_per_sample(timed_batch: Callable[[int], float]) -> int:
    """Copies per batched sample: from one copy, scaled by the time measured (at least doubled) until a batch lasts
    ``BATCH_MS``, at most ``MAX_BATCH``. ``timed_batch(n)`` times n copies in ms; these batches are the point's
    warm-up."""
    copies = 1
    while copies < MAX_BATCH:
        ms = timed_batch(copies)
        if ms >= BATCH_MS:
            break
        wanted = math.ceil(copies * BATCH_MS * 1.1 / ms) if ms > 0 else 2 * copies
        copies = min(MAX_BATCH, max(2 * copies, wanted))
    return copies


class StreamClock:
    """One stream's events, and its hold (made at the first held sample: its flags come from the job's ledger)."""

    def __init__(self, gpu, ledger, stream=None):
        self.gpu, self.ledger, self.cuda = gpu, ledger, gpu.cuda
        self.stream = stream if stream is not None else self.cuda.Stream()
        self.timer = EventTimer(self.cuda, self.stream)
        self._hold: StreamHold | None = None

    def hold(self) -> StreamHold:
        if self._hold is None:
            self._hold = StreamHold(self.gpu, self.ledger)
        return self._hold

    def once(self, issue: Callable) -> float:
        """``single``: ms of one operation, CUDA events around it."""
        return self.timer.time(lambda: issue(self.stream))

    def batch(self, issue: Callable, copies: int, held: bool) -> float:
        """ms of ``copies`` back-to-back operations between two events, the stream held while they are queued with
        ``held``."""
        def enqueue() -> None:
            for _ in range(copies):
                issue(self.stream)

        return self.timer.time(enqueue, self.hold() if held else None)

    def sampler(self, method: str, issue: Callable, per_copy: bool = True):
        """The point's sample function for ``method``; batched and held ones are calibrated now
        (``copies_per_sample``: the point's warm-up) and say their operations per sample (``copies``). With
        ``per_copy=False`` a batched sample is a plain per-operation mean, so the profile's ``min_time_s`` counts
        the means (as some experiments were recorded)."""
        if method == SINGLE:
            return lambda: self.once(issue)
        if method not in (BATCHED, HELD):
            raise ValueError(f"unknown timing method '{method}' (known: {', '.join(METHODS)})")
        held = method == HELD

        def batch_ms(n: int) -> float:
            return self.batch(issue, n, held)

        return PerCopy(batch_ms, copies_per_sample(batch_ms), counts_copies=per_copy)


@dataclass(frozen=True)
class Lane:
    """One stream's part of a sample timed on several streams: its clock, how to issue its operation, and how to
    make its device current while it is queued and read (``activate()``: a context manager)."""

    clock: StreamClock
    issue: Callable
    activate: Callable = field(default=nullcontext)


def per_stream(lanes: list[Lane], copies: int = 1) -> list[float]:
    """``per_stream``: every lane's ``copies`` operations queued between its own events, each stream held while the
    others are queued and all released together; each lane's ms, in order."""
    with ExitStack() as holds:
        for lane in lanes:
            clock = lane.clock
            with lane.activate():
                holds.enter_context(clock.hold().holding(clock.stream))
                clock.timer.start.record(clock.stream)
                for _ in range(copies):
                    lane.issue(clock.stream)
                clock.timer.end.record(clock.stream)
    elapsed = []
    for lane in lanes:
        clock = lane.clock
        with lane.activate():
            clock.timer.end.synchronize()
            clock.hold().check()
            elapsed.append(clock.timer.start.time_till(clock.timer.end))
    return elapsed
