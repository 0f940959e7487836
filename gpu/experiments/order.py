"""The order of a sweep's points: the story-first order a sweep measures in (``coarse_first``), and the point order
its finished rows are put back in (``in_point_order``), so a result never depends on the order of measurement."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu.core.schema import key_value

if TYPE_CHECKING:  # a frame is only passed through: the declarations that import this never load pandas for it
    import pandas as pd


def coarse_first(values) -> list:
    """The values of an axis in the order that shows its shape soonest: both ends, the middle, then the middles
    of the gaps (4 KiB, 1 GiB, 2 MiB, 64 KiB, 32 MiB, …). Every value once."""
    values = list(values)
    if len(values) <= 2:
        return values
    order = [0, len(values) - 1]
    gaps = [(0, len(values) - 1)]
    while gaps:
        narrower = []
        for low, high in gaps:
            if high - low >= 2:
                middle = (low + high) // 2
                order.append(middle)
                narrower += [(low, middle), (middle, high)]
        gaps = narrower
    return [values[i] for i in order]


def values_coarse_first(points: list[tuple], series, value) -> list[tuple]:
    """Points with each series' values in coarse-first order; series keep their first-seen order.
    ``series(point)`` names the curve a point belongs to, ``value(point)`` its place along the axis."""
    first: dict = {}
    values: dict = {}
    for i, point in enumerate(points):
        first.setdefault(series(point), i)
        values.setdefault(series(point), []).append(value(point))
    rank = {name: {v: r for r, v in enumerate(coarse_first(vals))} for name, vals in values.items()}
    return sorted(points, key=lambda p: (first[series(p)], rank[series(p)][value(p)]))


def row_keys(frame: pd.DataFrame, module) -> list[tuple]:
    """Each row's point key, as ``Params.points()`` gives them (``module.KEY_COLUMNS``): an empty coordinate (NaN
    in a frame) is None, a whole float an int."""
    return [tuple(key_value(v) for v in values) for values in zip(*(frame[c] for c in module.KEY_COLUMNS), strict=True)]


def in_point_order(frame: pd.DataFrame, module, params) -> pd.DataFrame:
    """The rows of ``frame`` in ``params.points()`` order (the order before progressive delivery), matched by
    the experiment's KEY_COLUMNS; rows that match no point keep their order, at the end."""
    if frame.empty:
        return frame
    rank = {tuple(key_value(v) for v in point): i for i, point in enumerate(params.points())}
    keys = zip(*(frame[c] for c in module.KEY_COLUMNS), strict=True)
    position = [rank.get(tuple(key_value(v) for v in key), len(rank)) for key in keys]
    return frame.iloc[sorted(range(len(frame)), key=position.__getitem__)].reset_index(drop=True)


def coarse_first_along(points: list, column: str) -> list:
    """Grid points (mappings) measured with the values of ``column`` in coarse-first order, outermost: every point of
    the first value, then of the next; each value's points keep their order."""
    rank = {value: i for i, value in enumerate(coarse_first(dict.fromkeys(p[column] for p in points)))}
    return sorted(points, key=lambda p: rank[p[column]])
