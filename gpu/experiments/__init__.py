"""PinPoint's experiments. Each module declares its parameter axes, the bytes a point moves, the
reasons a parameter combination is invalid, and ``run(params, gpu, progress, should_cancel)``, which
returns a results DataFrame in the schema of ``gpu.schema``.

Rows are delivered as they are measured: an experiment collects them in ``SweepRows(progress)``, which
hands each one to ``progress.row`` where the caller's progress has one (the worker's sends it to the page).
Sweeps measure in a story-first order (``coarse_first``: the ends of an axis, then its middle, then the
gaps), and the worker puts the finished rows back in ``Params.points()`` order (``in_point_order``), so
the final result does not depend on the order of measurement.
"""

from gpu.errors import ValidationError
from gpu.experiments import batching, coalescing, managed, occupancy_sweep, pools, reduction, streams, transfers
from gpu.experiments.harness import SweepRows, coarse_first, in_point_order, values_coarse_first

EXPERIMENTS = {m.NAME: m for m in (transfers, coalescing, reduction, occupancy_sweep, streams, managed, pools,
                                         batching)}
__all__ = ["EXPERIMENTS", "SweepRows", "coarse_first", "get_experiment", "in_point_order", "values_coarse_first"]


def get_experiment(name: str):
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise ValidationError([f"unknown experiment '{name}' (known: {', '.join(EXPERIMENTS)})"]) from None
