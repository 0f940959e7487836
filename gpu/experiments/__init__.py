"""PinPoint's experiments, registered in ``registry.py``. Each module here is an experiment's declaration: its
parameter axes, the bytes a point moves, the reasons a parameter combination is invalid, its labels and what shared
code reads (``point_label``, ``noise_kind``, ``flops``, ``roofs``, …). It imports nothing from ``gpu.device``: pages,
results, present and the fleet read declarations only.

How an experiment is measured lives apart, in the worker-only package ``gpu.sweeps``: ``gpu/sweeps/<name>.py``
declares a ``harness.Sweep`` and ``run(params, gpu, progress, should_cancel)``, which returns the measured rows
(dicts of the results schema of ``gpu.core.schema``, without the run's provenance, which the worker adds when it
builds the run's DataFrame). The worker finds it through the registry (``registry.sweep_of(name)``), which imports
it on first use.

Sweeps measure in a story-first order (``coarse_first``: the ends of an axis, then its middle, then the
gaps), and the worker puts the finished rows back in ``Params.points()`` order (``in_point_order``), so
the final result does not depend on the order of measurement.
"""

from gpu.experiments.order import coarse_first, in_point_order, values_coarse_first
from gpu.experiments.registry import EXPERIMENTS, REGISTRY, get_experiment, sweep_of

__all__ = ["EXPERIMENTS", "REGISTRY", "coarse_first", "get_experiment", "in_point_order", "sweep_of",
           "values_coarse_first"]
