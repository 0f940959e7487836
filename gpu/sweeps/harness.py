"""The one sweep every experiment runs through.

An experiment declares what it measures in its package's ``gpu/experiments/<name>/__init__.py`` (its name, title,
typed axes, key columns, its point grid: ``gpu.experiments.grid``), and how in ``gpu/experiments/<name>/sweep.py``
(a ``Sweep`` subclass: ``point`` / ``measure`` / ``verify``, optionally ``order`` and the group hooks); ``run`` does
the rest, the same way for all of them:

* refuses a request whose buffers no longer fit in the memory free now (``ValidationError``), before anything is
  allocated: the request was parsed and checked before it came (``gpu.experiments.request``);
* opens the job's allocation scope on every GPU of the worker's set (``DeviceSet.job_scope``: freed after the
  answer, or at once on an error);
* walks the declared grid once (``Params.grid()``), reports the points its exclusions skip (with their reasons:
  ``progress.skipped``) and hands the sweep each point to measure (``Sweep.point``), in the sweep's ``order``, with
  ``enter_group`` / ``leave_group`` around each group of points that share a set-up; checks for cancellation
  (``JobCancelled``) and reports progress before each;
* samples each point with the profile's loop (``stats.sample_until_stable``), NVML telemetry read around it;
* verifies the point (a wrong result raises ``VerificationError``: never a row);
* builds the row (``_kernels.measured_row``) and streams it to the page at once (``SweepRows``).

Sweeps may measure in a story-first order (``coarse_first``); ``in_point_order`` puts the finished rows back in
``Params.points()`` order, so a result never depends on the order of measurement.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from gpu.core import stats
from gpu.core.errors import JobCancelled, ValidationError, VerificationError
from gpu.core.schema import key_value
from gpu.device.device_set import DeviceSet
from gpu.experiments.axes import Axis
from gpu.experiments.grid import GridPoint
from gpu.experiments.order import coarse_first, in_point_order, values_coarse_first
from gpu.sweeps import _kernels as k
from gpu.sweeps.timing_methods import BATCH_MS, MAX_BATCH, PerCopy, copies_per_sample

DECLARATIONS_PACKAGE = "gpu.experiments"


@dataclass
class Point:
    """One measurement of a sweep: its row's own columns, the progress text, the bytes it moves, what its clock
    covers (the ``timer`` column) and whatever the experiment needs to measure it (``state``)."""

    columns: dict
    label: str
    nbytes: int
    timer: str
    state: Any = None


class Sweep:
    """An experiment's measurement. Its declaration (``gpu/experiments/<name>/__init__.py``) declares NAME, TITLE, AXES,
    KEY_COLUMNS, its grid, ``invalid_reasons`` and ``memory_reasons`` (the subclass takes them from there), and the
    subclass implements ``point(grid_point)`` (the measurement of one declared point; ``order`` and
    ``group_of`` / ``enter_group`` / ``leave_group`` optional), ``measure(point)`` (a sample function for the
    profile's loop, a finished ``stats.Summary``, or None for a point that cannot run: no row) and ``verify(point)``
    (raise ``VerificationError`` on wrong data); ``prepare(point)`` does a point's untimed set-up (poisoning its
    output) before its telemetry starts. ``__init__`` runs before the job's allocation scope opens, ``setup`` inside
    it (``self.ledger`` and ``self.progress`` set) and ``close`` after it has closed,
    even on an error. ``limits`` are the device limits read for this job (once), its memory re-checked against them.

    ``self.gpu`` is the set's first GPU, the one a one-GPU sweep measures on; ``self.gpus`` the whole ``DeviceSet``
    (``activate(i)``, per-device runtimes and limits), ``self.ledgers`` each device's ledger by ordinal (set with
    ``self.ledger``, the first device's) and ``self.set_limits`` each device's limits. A sweep over several GPUs
    declares ``set_reasons`` and names the GPU a row measured in its point's columns (``gpu_index``, ``gpu_uuid``);
    it may point ``self.telemetry`` at that GPU's telemetry in ``prepare``."""

    NAME: str = ""
    TITLE: str = ""
    AXES: tuple[Axis, ...] = ()
    KEY_COLUMNS: list[str] = []
    # False: the telemetry's readings are not restarted at each point, so a row's clock and throttle columns
    # cover every reading since the last restart (the kernel experiments' rows, as they were recorded).
    RESTART_TELEMETRY: bool = True
    # The declaration's USES_NVLINK: its data crosses NVLink, so NVLink errors during a point are among its causes;
    # with a ``crosses_nvlink(columns)`` it also declares which points' data does (a peers run's host-link copies
    # do not), and only those are judged by NVLink's counters.
    USES_NVLINK: bool = False
    crosses_nvlink = None

    def __init_subclass__(cls, **kwargs):
        """A sweep takes its experiment's identity from its declaration (declared there once): NAME, TITLE, AXES,
        KEY_COLUMNS, ``invalid_reasons`` and ``memory_reasons``. The sweep of an experiment package,
        ``gpu.experiments.<name>.sweep``, is declared by the package (``gpu.experiments.<name>``); a sweep defined
        elsewhere is declared by its own module."""
        super().__init_subclass__(**kwargs)
        module = sys.modules[cls.__module__]
        package, _, role = cls.__module__.rpartition(".")
        if package.startswith(DECLARATIONS_PACKAGE + ".") and role == "sweep":
            module = importlib.import_module(package)
        for name in ("NAME", "TITLE", "AXES", "KEY_COLUMNS", "USES_NVLINK"):
            if name not in cls.__dict__ and hasattr(module, name):
                setattr(cls, name, getattr(module, name))
        for name in ("invalid_reasons", "memory_reasons", "crosses_nvlink"):
            if name not in cls.__dict__ and hasattr(module, name):
                setattr(cls, name, staticmethod(getattr(module, name)))

    def __init__(self, params, gpu, profile: stats.Profile):
        self.params, self.gpu, self.profile = params, gpu, profile
        self.cuda, self.telemetry = gpu.cuda, gpu.telemetry
        self.ledger = self.progress = None
        self.limits = None
        self.gpus: DeviceSet | None = None
        self.ledgers: dict = {}
        self.set_limits: dict = {}
        self.grid_points: list[GridPoint] | None = None  # the declared grid, walked once by the harness

    @staticmethod
    def invalid_reasons(params, limits) -> list[str]:
        return []

    @staticmethod
    def memory_reasons(params, limits) -> list[str]:
        return []

    @classmethod
    def reasons(cls, params, gpu, limits) -> list[str]:
        """Why checked ``params`` cannot run on ``gpu`` now (before anything is allocated). The request was checked
        against the limits its worker reported (``gpu.experiments.request``); what can have changed since is the
        memory free, so only ``memory_reasons`` run, against the ``limits`` read for this job, unless the experiment
        needs more of the device to decide."""
        return cls.memory_reasons(params, limits)

    @classmethod
    def for_devices(cls, params, ordinals: list[int]):
        """``params`` with what they leave to the device set filled in (a sweep over "every GPU of the set" names
        them, so its point grid is known); a one-GPU sweep's are complete."""
        return params

    @classmethod
    def set_reasons(cls, params, gpus: DeviceSet, limits: dict) -> list[str]:
        """Why ``params`` cannot run on the device set ``gpus`` (``limits``: each device's, by ordinal), each reason
        naming its GPU; a one-GPU sweep needs nothing of the set."""
        return []

    def setup(self) -> None:
        """Job-wide set-up, inside the allocation scope (``self.ledger`` is set)."""

    def point(self, grid_point: GridPoint) -> Point:
        """The measurement of one point of the declared grid (``Params.grid()``): its row's columns, label, bytes,
        timer and state."""
        raise NotImplementedError

    def order(self, grid_points: list[GridPoint]) -> list[GridPoint]:
        """The order the points are measured in (story first: ``coarse_first``, ``values_coarse_first``); the
        rows go back to the grid's order afterwards (``in_point_order``). Default: the grid's order."""
        return grid_points

    def group_of(self, grid_point: GridPoint):
        """The group a point belongs to (its set-up shared with its neighbours: a size's buffers, a kernel's
        compile), or None. The harness calls ``enter_group(group)`` before a group's first point and
        ``leave_group(group)`` after its last (not after an error: the job's allocation scope frees then)."""
        return None

    def enter_group(self, group) -> None:
        """Set up what the points of ``group`` share."""

    def leave_group(self, group) -> None:
        """Release what ``enter_group(group)`` set up that the next groups do not need."""

    def walk(self) -> Iterator[Point]:
        """The points to measure, in order: the declared grid's (``Params.grid()``, in ``order``'s order, with the
        group hooks around each group), each measured by ``point``."""
        current = _NO_GROUP = object()
        grid_points = self.grid_points if self.grid_points is not None else self.params.grid()
        for grid_point in self.order(list(grid_points)):
            group = self.group_of(grid_point)
            if group != current:
                if current is not _NO_GROUP and current is not None:
                    self.leave_group(current)
                if group is not None:
                    self.enter_group(group)
                current = group
            yield self.point(grid_point)
        if current is not _NO_GROUP and current is not None:
            self.leave_group(current)

    def prepare(self, point: Point) -> None:
        """Untimed work before the point's telemetry starts (after its progress text)."""

    def measure(self, point: Point) -> Callable[[], float] | stats.Summary:
        raise NotImplementedError

    def verify(self, point: Point) -> None:
        """Check the point's output after its samples; raise ``VerificationError`` when it is wrong."""

    def close(self) -> None:
        """Release what ``__init__`` took, after the allocation scope has closed (runs on errors too)."""

    def sample(self, sample_once: Callable[[], float]) -> stats.Summary:
        """The profile's sampling loop, with a telemetry reading before every sample (a ``PerCopy`` sample's
        ``min_time_s`` counts its copies' time)."""
        telemetry = self.telemetry

        def sample() -> float:
            telemetry.sample()
            return sample_once()

        per_sample = sample_once.copies if isinstance(sample_once, PerCopy) and sample_once.counts_copies else 1
        return stats.sample_until_stable(sample, self.profile, per_sample=per_sample)


def device_set(gpu) -> DeviceSet:
    """The device set a job runs on: ``gpu`` itself when it is one, else a set of that one runtime."""
    return gpu if isinstance(gpu, DeviceSet) else DeviceSet.of(gpu)


def judges_nvlink(declaration: type[Sweep], columns: dict) -> bool:
    """Whether NVLink's error counters name a cause of this point: its experiment's data crosses NVLink
    (``USES_NVLINK``) and, where the experiment says which points' data does (``crosses_nvlink``), this one's."""
    if not declaration.USES_NVLINK:
        return False
    return declaration.crosses_nvlink is None or bool(declaration.crosses_nvlink(columns))


def run(declaration: type[Sweep], params, gpu, progress, should_cancel) -> list[dict]:
    """Measure every point of ``params`` with the experiment ``declaration`` on ``gpu`` (a runtime, or a
    ``DeviceSet`` whose first GPU one-GPU sweeps measure on); returns its rows as measured."""
    gpus = device_set(gpu)
    gpu = gpus.first
    limits = gpu.limits()
    set_limits = {gpus.ordinals[0]: limits}
    if len(gpus) > 1:
        set_limits.update({o: lim for o, lim in gpus.limits().items() if o != gpus.ordinals[0]})
    params = declaration.for_devices(params, gpus.ordinals)
    reasons = declaration.reasons(params, gpu, limits) or declaration.set_reasons(params, gpus, set_limits)
    if reasons:
        raise ValidationError(reasons)
    profile = stats.get_profile(params.profile)
    # The one point grid is the declaration's (Params.points()): a sweep measures it in its own order, with its own
    # set-up around groups, but a row whose key is not in it is a sweep that drifted from its declaration (refused,
    # never stored).
    grid_points, skipped = params.walk()
    grid = {tuple(key_value(v) for v in p.key(declaration.KEY_COLUMNS)) for p in grid_points}
    total = len(grid)
    if skipped and hasattr(progress, "skipped"):
        progress.skipped(skipped)
    rows = SweepRows(progress)  # each row reaches the page as soon as it is measured
    sweep = declaration(params, gpu, profile)
    sweep.grid_points = grid_points
    sweep.limits, sweep.gpus, sweep.set_limits = limits, gpus, set_limits
    witnesses = [witness for ordinal in gpus.ordinals  # a simulated board may keep no witness
                 if (witness := getattr(gpus[ordinal].telemetry, "witness", None)) is not None]
    try:
        with gpus.job_scope() as ledgers:
            sweep.ledgers, sweep.ledger, sweep.progress = ledgers, ledgers[gpus.ordinals[0]], progress
            sweep.setup()
            for index, point in enumerate(sweep.walk()):
                if should_cancel():
                    raise JobCancelled()
                progress(index, total, point.label)
                judge_nvlink = judges_nvlink(declaration, point.columns)
                for witness in witnesses:  # whose NVLink errors count as a cause: only a point over NVLink's
                    witness.judge_nvlink = judge_nvlink
                sweep.prepare(point)
                if sweep.RESTART_TELEMETRY:
                    sweep.telemetry.start_point()
                measured = sweep.measure(point)
                if measured is None:
                    continue  # the point cannot run (the experiment says why in its docs): no row
                summary = measured if isinstance(measured, stats.Summary) else sweep.sample(measured)
                sweep.verify(point)
                row = k.measured_row(summary, profile, sweep.telemetry, point.nbytes, point.timer, **point.columns)
                key = tuple(key_value(row.get(column)) for column in declaration.KEY_COLUMNS)
                if key not in grid:
                    named = ", ".join(f"{c}={v}" for c, v in zip(declaration.KEY_COLUMNS, key, strict=True))
                    raise VerificationError(f"{declaration.NAME}: measured a point outside its declared grid ({named})")
                rows.append(row)
    finally:
        sweep.close()
    progress(total, total, "done")
    return rows


def runner(declaration: type[Sweep]):
    """An experiment module's ``run(params, gpu, progress, should_cancel)`` over this harness."""

    def run_declared(params, gpu, progress, should_cancel) -> list[dict]:
        return run(declaration, params, gpu, progress, should_cancel)

    run_declared.__doc__ = f"Measure {declaration.NAME} through the sweep harness."
    return run_declared


class SweepRows(list):
    """The rows a sweep has measured so far. Each appended row also goes to ``progress.row`` when the
    caller's progress callback has that method (the worker's does: it streams the row to the page)."""

    def __init__(self, progress=None):
        super().__init__()
        self._emit = getattr(progress, "row", None)

    def append(self, row: dict) -> None:
        super().append(row)
        if self._emit is not None:
            self._emit(row)

    def extend(self, rows) -> None:
        for row in rows:
            self.append(row)

    def __iadd__(self, rows):
        self.extend(rows)
        return self


__all__ = ["BATCH_MS", "MAX_BATCH", "Axis", "GridPoint", "PerCopy", "Point", "Sweep", "SweepRows", "coarse_first",
           "copies_per_sample", "in_point_order", "run", "runner", "values_coarse_first"]
