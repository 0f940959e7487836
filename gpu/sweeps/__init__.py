"""How each experiment is measured, in the worker only: ``<name>.py`` holds the ``harness.Sweep`` of the experiment
declared in ``gpu/experiments/<name>.py`` and its ``run = harness.runner(...)``. These modules load the device layer;
the worker finds them through the registry (``gpu.experiments.registry.sweep_of``), which imports one on first use.
Nothing outside the worker's path imports this package."""
