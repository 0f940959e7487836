"""A sweep run in this process with its parts timed, for the benchmarks that say where a run's time goes
(``health_time.py --parts``, ``live_parts.py``). Only benchmarks use it: the sweep measured is the experiment's own,
subclassed (its generator, set-up, samples, sampling loop and verification timed); nothing it measures changes.

Per point it keeps the set-up, samples and verification (``seconds``), the point's whole time in the harness
(``wall``: from the walk handing it out until the harness asks for the next one: its progress message, preparation,
the witness's readings, set-up, samples, verification and row), the sampling loop's own time and the row measured.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time

WALKING = "the sweep's points (a group's set-up: inputs, host buffers)"
SETUP = "each point's set-up (measure: uploads, patterns, calibration)"
SAMPLES = "samples (the profile's loop)"
VERIFY = "verification (verify)"

# A sweep's own steps timed inside the parts (when its checkout has them): the reduction's inputs made on the GPU.
INSIDE = (("reference_sum", "each pair made, checked and summed by its reference kernel (reference_sum)"),
          ("fill", "the generator kernel, each pair written (fill, synchronized; each size and each point)"),
          ("cross_check", "the host's formula check of a pair's elements (cross_check)"))


def declared_sweep(experiment: str):
    """(the experiment's ``Sweep`` declaration, the harness module it runs on), from the checkout on ``sys.path``."""
    import sys

    from gpu.experiments import registry

    module = registry.entry_of(experiment).sweep_module()
    declared = next(v for v in vars(module).values() if isinstance(v, type) and v.__module__ == module.__name__
                    and any(c.__name__ == "Sweep" for c in v.__mro__[1:]))
    harness = sys.modules[next(c for c in declared.__mro__ if c.__name__ == "Sweep").__module__]
    return declared, harness


@dataclasses.dataclass
class PointParts:
    label: str
    seconds: float = 0.0  # its set-up, samples and verification
    wall: float = 0.0  # handed out by the walk until the harness asks for the next point
    sampling: float | None = None  # the profile's loop whole (Sweep.sample), when the harness ran it
    measured: bool = True  # False: the sweep said the point cannot run (no row)
    parts: dict[str, float] = dataclasses.field(default_factory=dict)
    row: dict | None = None


def _timed_inside(timed_class, method: str, name: str, details: dict[str, float]):
    """``method`` of ``timed_class`` with its time added to ``details[name]``."""

    def timed_method(self, *args):
        started = time.perf_counter()
        try:
            return getattr(super(timed_class, self), method)(*args)
        finally:
            details[name] = details.get(name, 0.0) + time.perf_counter() - started

    return timed_method


class SweepParts:
    """``experiment``'s sweep, timed: ``run`` measures it through its harness and fills ``parts`` (seconds by part,
    every point's added), ``points`` (each point's ``PointParts``) and ``details`` (the ``INSIDE`` steps, which are
    inside the parts and not added to them again)."""

    def __init__(self, experiment: str):
        self.declared, self.harness = declared_sweep(experiment)
        self.parts: dict[str, float] = {}
        self.points: list[PointParts] = []
        self.details: dict[str, float] = {}
        self.current: PointParts | None = None  # the point the harness is on (None between points)

    def add(self, name: str, seconds: float) -> None:
        """``seconds`` of part ``name``, also the current point's (its ``seconds`` too unless it is the walk's)."""
        self.parts[name] = self.parts.get(name, 0.0) + seconds
        point = self.current
        if point is not None:
            point.parts[name] = point.parts.get(name, 0.0) + seconds
            if name != WALKING:
                point.seconds += seconds

    def timed(self, call, name: str):
        """``call`` with each call's time added to part ``name``."""
        def timed_call(*args, **kwargs):
            began = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.add(name, time.perf_counter() - began)
        return timed_call

    def timed_class(self):
        """The declaration subclassed with its parts timed."""
        owner, per_copy = self, getattr(self.harness, "PerCopy", None)  # before it, batched samples were functions
        # The harness measures what walk() yields (the declared grid's points, a group's set-up between them); a
        # checkout before the grid has the sweep's own points() generator.
        generator = "walk" if hasattr(self.declared, "walk") else "points"

        class Timed(self.declared):
            def measure(self, point):
                started = time.perf_counter()
                sample = super().measure(point)
                owner.add(SETUP, time.perf_counter() - started)
                if sample is None and owner.current is not None:
                    owner.current.measured = False
                if per_copy is not None and isinstance(sample, per_copy):  # its copies kept for the profile's rule
                    return dataclasses.replace(sample, batch_ms=owner.timed(sample.batch_ms, SAMPLES))
                return owner.timed(sample, SAMPLES) if callable(sample) else sample

            def verify(self, point):
                started = time.perf_counter()
                super().verify(point)
                owner.add(VERIFY, time.perf_counter() - started)

        def timed_points(self):
            points = getattr(super(Timed, self), generator)()
            while True:
                started = time.perf_counter()
                try:
                    point = next(points)
                except StopIteration:
                    return
                owner.add(WALKING, time.perf_counter() - started)
                owner.current = PointParts(point.label)
                owner.points.append(owner.current)
                handed = time.perf_counter()
                yield point
                owner.current.wall = time.perf_counter() - handed
                owner.current = None

        setattr(Timed, generator, timed_points)
        if hasattr(self.declared, "sample"):  # the profile's loop whole: samples, telemetry, the stop rule
            def timed_sample(self, sample_once):
                started = time.perf_counter()
                try:
                    return super(Timed, self).sample(sample_once)
                finally:
                    if owner.current is not None:
                        owner.current.sampling = (owner.current.sampling or 0.0) + time.perf_counter() - started
            Timed.sample = timed_sample
        for method, name in INSIDE:
            if hasattr(self.declared, method):
                setattr(Timed, method, _timed_inside(Timed, method, name, self.details))
        Timed.__name__ = Timed.__qualname__ = self.declared.__name__
        return Timed

    def run(self, params, gpu, progress=lambda *a: None, run=None) -> tuple[list[dict], float]:
        """(the rows, the whole run's seconds) of ``params`` measured on ``gpu``, each row kept with its point.
        ``run``: the harness's ``run`` (default), or a caller's that measures ``declaration`` its own way."""
        run = run or self.harness.run
        started = time.perf_counter()
        rows = run(self.timed_class(), params, gpu, progress, lambda: False)
        whole = time.perf_counter() - started
        for point, row in zip((p for p in self.points if p.measured), rows, strict=False):
            point.row = row
        return rows, whole


@contextlib.contextmanager
def patched(owner, name: str, wrap):
    """``owner.name`` replaced by ``wrap(original)`` while the block runs, then restored."""
    original = getattr(owner, name)
    setattr(owner, name, wrap(original))
    try:
        yield
    finally:
        setattr(owner, name, original)
