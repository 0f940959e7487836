"""PinPoint's experiments, registered in ``registry.py``. Each experiment is a package here, ``<name>/``:

* ``__init__.py``, its declaration: its parameter axes, the bytes a point moves, the reasons a parameter combination
  is invalid, its labels, its page and what shared code reads (``point_label``, ``noise_kind``, ``flops``,
  ``roofs``, …). It imports nothing from ``gpu.device`` nor its sweep: pages, results, present and the fleet read
  declarations only.
* ``sweep.py``, worker only: a ``harness.Sweep`` and ``run(params, gpu, progress, should_cancel)``, which returns the
  measured rows (dicts of the results schema of ``gpu.core.schema``, without the run's provenance, which the worker
  adds when it builds the run's DataFrame). The worker finds it through the registry (``registry.sweep_of(name)``),
  which imports it on first use.
* its kernels, ``*.cu``, compiled by the worker's runtime by stem (``gpu.core.paths.kernel_sources``);
* ``view.py``, of the present layer: its charts, takeaway and headlines (``registry.view_of(name)``).

``PINPOINT_EXPERIMENTS_PATH`` names more folders of such packages: they join this package's path, so an experiment
kept there is ``gpu.experiments.<name>`` like the others.

Sweeps measure in a story-first order (``coarse_first``: the ends of an axis, then its middle, then the
gaps), and the worker puts the finished rows back in ``Params.points()`` order (``in_point_order``), so
the final result does not depend on the order of measurement.
"""

from gpu.core.paths import extra_experiment_folders

__path__ += [str(folder) for folder in extra_experiment_folders()]  # before the registry looks for experiments

from gpu.experiments.order import coarse_first, in_point_order, values_coarse_first  # noqa: E402
from gpu.experiments.registry import EXPERIMENTS, REGISTRY, get_experiment, sweep_of  # noqa: E402

__all__ = ["EXPERIMENTS", "REGISTRY", "coarse_first", "get_experiment", "in_point_order", "sweep_of",
           "values_coarse_first"]
