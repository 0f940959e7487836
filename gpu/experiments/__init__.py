"""PinPoint's experiments. Each module declares its parameter axes, the bytes a point moves, the
reasons a parameter combination is invalid, and ``run(params, gpu, progress, should_cancel)``, which
returns a results DataFrame in the schema of ``gpu.schema``."""

from gpu.errors import ValidationError
from gpu.experiments import batching, coalescing, managed, occupancy_sweep, pools, reduction, streams, transfers

EXPERIMENTS = {m.NAME: m for m in (transfers, coalescing, reduction, occupancy_sweep, streams, managed, pools,
                                         batching)}


def get_experiment(name: str):
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise ValidationError([f"unknown experiment '{name}' (known: {', '.join(EXPERIMENTS)})"]) from None
