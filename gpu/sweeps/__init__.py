"""What every experiment's sweep shares, in the worker only: the harness (``harness.Sweep``, ``harness.runner``),
the check patterns (``verify``) and the kernel sweeps' helpers (``_kernels``). Each experiment's own sweep is its
package's ``sweep.py`` (``gpu/experiments/<name>/sweep.py``), found through the registry
(``gpu.experiments.registry.sweep_of``), which imports one on first use. Nothing outside the worker's path imports
this package."""
