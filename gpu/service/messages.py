"""The worker's messages to the client, one small dataclass each, sent over the worker's event queue.

A job's messages carry its ``job_id``; the client drops those of a job it has given up on. They are pickled
between processes, so they hold plain data only.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Hello:
    """The worker is up: device facts, limits, pid (and whatever else the service announces)."""

    info: dict


@dataclass(frozen=True)
class InitFailed:
    """The worker could not start (no device, no driver, compile failure); it exits after sending this. ``kind``
    "device": the chosen GPU is not there (the message lists those that are)."""

    message: str
    kind: str = ""


@dataclass(frozen=True)
class JobEvent:
    """What every message of a job carries: the job it belongs to."""

    job_id: int


@dataclass(frozen=True)
class Progress(JobEvent):
    """``conditions_now``: the witness's latest reading of the GPU (``gpu.device.witness.Witness.now``: clocks,
    power and limit, temperature, other processes, slowdown reasons), for a live conditions strip; {} when none."""

    done: int
    total: int
    text: str = ""
    conditions_now: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Row(JobEvent):
    """One measured point, a complete schema row, sent as soon as it is verified."""

    row: dict


@dataclass(frozen=True)
class Result(JobEvent):
    payload: object


@dataclass(frozen=True)
class Freed(JobEvent):
    """After a job's ``Result``: what the job allocated is freed and its worker waits for the next job, so another
    worker's job may measure on the same GPUs (the client holds their locks until then)."""


@dataclass(frozen=True)
class Failure(JobEvent):
    """The job failed. ``kind``: cancelled, validation, verification, cuda or internal; ``fatal``: the worker
    exits after sending this (its context is unusable) and the client starts a fresh one."""

    kind: str
    message: str
    reasons: list[str] = field(default_factory=list)
    fatal: bool = False


JobMessage = Progress | Row | Result | Freed | Failure
