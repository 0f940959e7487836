"""PinPoint's experiments, registered in ``registry.py``. Each module declares its parameter axes, the bytes a
point moves, the reasons a parameter combination is invalid, and ``run(params, gpu, progress, should_cancel)``,
which returns the measured rows (dicts of the results schema of ``gpu.core.schema``, without the run's provenance,
which the worker adds when it builds the run's DataFrame); every experiment declares a ``harness.Sweep`` and takes
its ``run`` from the one sweep harness (``harness.py``).

Rows are delivered as they are measured: an experiment collects them in ``SweepRows(progress)``, which
hands each one to ``progress.row`` where the caller's progress has one (the worker's sends it to the page).
Sweeps measure in a story-first order (``coarse_first``: the ends of an axis, then its middle, then the
gaps), and the worker puts the finished rows back in ``Params.points()`` order (``in_point_order``), so
the final result does not depend on the order of measurement.
"""

from gpu.experiments.harness import SweepRows, coarse_first, in_point_order, values_coarse_first
from gpu.experiments.registry import EXPERIMENTS, REGISTRY, get_experiment

__all__ = ["EXPERIMENTS", "REGISTRY", "SweepRows", "coarse_first", "get_experiment", "in_point_order",
           "values_coarse_first"]
