"""An experiment's point grid, declared once and generated from its axes (as nvbench's state generator does).

A declaration lists its ``Coordinate``s, outermost first, and the ``Exclude``s that name combinations which cannot
run; ``Grid.walk(params)`` generates the points in that nested order:

* ``Coordinate("bytes", axis="sizes")`` walks the values of a ``Params`` field (each value of a list axis, the one
  value of a scalar axis);
* ``Coordinate("stride", values=lambda params, point: ...)`` takes values that depend on the parameters and
  the coordinates before it (a tie: coalescing's strides for the strided group, none for the others);
* ``Coordinate("timer", derive=lambda point: ...)`` is one value computed from the coordinates before it;
* ``Coordinate(("variant", "stride"), values=...)`` yields several columns at once (each value a tuple): a branch
  whose coordinates are not a product (a reference point first, then the rest);
* ``key=False`` marks a coordinate that shapes the walk but is not a key column (transfers' ``method``).

A point that an ``Exclude`` matches is skipped with its reason, never silently dropped; a point whose key
columns repeat an earlier point's is kept once (the first). ``axes.parameters(AXES, grid=GRID,
key_columns=KEY_COLUMNS)`` gives the experiment's ``Params`` the generated ``points()`` (key tuples in
``KEY_COLUMNS`` order: the contract every consumer reads), ``grid()`` and ``skipped()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpu.core import text


class GridPoint(Mapping):
    """One point of a grid: an immutable mapping column -> value, in generation order of its coordinates (key
    columns and the walk's own, ``key=False`` ones)."""

    __slots__ = ("_items", "_values")

    def __init__(self, items=()):
        pairs = tuple(items.items()) if isinstance(items, Mapping) else tuple(items)
        object.__setattr__(self, "_items", pairs)
        object.__setattr__(self, "_values", dict(pairs))

    def __setattr__(self, name, value):
        raise AttributeError("a GridPoint is immutable")

    def __reduce__(self):  # pickled (to another process) and copied by its items
        return GridPoint, (self._items,)

    def __getitem__(self, column: str):
        return self._values[column]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other) -> bool:
        if isinstance(other, GridPoint):
            return self._items == other._items
        return NotImplemented

    def __repr__(self) -> str:
        return "GridPoint(" + ", ".join(f"{c}={v!r}" for c, v in self._items) + ")"

    def key(self, key_columns) -> tuple:
        """The point's key: its values of ``key_columns``, in that order."""
        return tuple(self._values[column] for column in key_columns)

    def with_column(self, column: str, value) -> GridPoint:
        return GridPoint(self._items + ((column, value),))


@dataclass(frozen=True)
class Coordinate:
    """One coordinate of a point. Exactly one of ``axis`` (a ``Params`` field), ``values(params, point)`` or
    ``derive(point)`` says where its values come from; ``column`` is its name in the point (a tuple of names when
    each value is a tuple of several columns); ``key``: whether it is a key column."""

    column: str | tuple[str, ...]
    axis: str | None = None
    values: Callable[[Any, GridPoint], Any] | None = None
    derive: Callable[[GridPoint], Any] | None = None
    key: bool = True

    def __post_init__(self):
        given = [name for name in ("axis", "values", "derive") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"coordinate {self.column}: give one of axis, values or derive (given: "
                             f"{', '.join(given) or 'none'})")

    @property
    def columns(self) -> tuple[str, ...]:
        return self.column if isinstance(self.column, tuple) else (self.column,)

    def walk(self, params, point: GridPoint) -> list:
        """This coordinate's values at ``point`` (the coordinates before it), in order."""
        if self.derive is not None:
            return [self.derive(point)]
        if self.axis is not None:
            value = getattr(params, self.axis)
            return list(value) if isinstance(value, (list, tuple)) else [value]
        return list(self.values(params, point))

    def extend(self, point: GridPoint, value) -> GridPoint:
        if not isinstance(self.column, tuple):
            return point.with_column(self.column, value)
        value = tuple(value)
        if len(value) != len(self.column):
            raise ValueError(f"coordinate {self.column}: value {value!r} does not have {len(self.column)} parts")
        for column, part in zip(self.column, value, strict=True):
            point = point.with_column(column, part)
        return point


@dataclass(frozen=True)
class Exclude:
    """A combination that cannot run: ``when(point)`` is true for it (the full point); skipped with ``reason``."""

    when: Callable[[GridPoint], bool]
    reason: str


class Grid:
    """The product of ``coordinates`` (outermost first), less ``exclusions``."""

    def __init__(self, coordinates, exclusions=()):
        self.coordinates = tuple(coordinates)
        self.exclusions = tuple(exclusions)
        columns = [c for coordinate in self.coordinates for c in coordinate.columns]
        repeated = sorted({c for c in columns if columns.count(c) > 1})
        if repeated:
            raise ValueError(f"grid: column {', '.join(repeated)} given by more than one coordinate")
        self.key_columns = tuple(c for coordinate in self.coordinates if coordinate.key for c in coordinate.columns)

    def _leaves(self, params) -> Iterator[GridPoint]:
        def walk(depth: int, point: GridPoint):
            if depth == len(self.coordinates):
                yield point
                return
            coordinate = self.coordinates[depth]
            for value in coordinate.walk(params, point):
                yield from walk(depth + 1, coordinate.extend(point, value))

        return walk(0, GridPoint())

    def walk(self, params) -> tuple[list[GridPoint], list[tuple[GridPoint, str]]]:
        """``(points, skipped)``: the points to measure in generation order, each key once; and each excluded point
        (once) with the first matching exclusion's reason."""
        points, skipped, seen, seen_skipped = [], [], set(), set()
        for point in self._leaves(params):
            identity = point.key(self.key_columns)
            reason = next((e.reason for e in self.exclusions if e.when(point)), None)
            if reason is not None:
                if identity not in seen_skipped:
                    seen_skipped.add(identity)
                    skipped.append((point, reason))
            elif identity not in seen:
                seen.add(identity)
                points.append(point)
        return points, skipped

    def count(self, params) -> int:
        """How many points ``params`` measure (the MAX_POINTS checks count the grid, never multiply lengths)."""
        return len(self.walk(params)[0])


def skipped_summary(skipped) -> list[str]:
    """``N points skipped: reason`` for each reason among ``skipped`` (``(point, reason)`` pairs), in first-seen
    order."""
    counts: dict[str, int] = {}
    for _, reason in skipped:
        counts[reason] = counts.get(reason, 0) + 1
    return [f"{text.count(n, 'point')} skipped: {reason}" for reason, n in counts.items()]


def skipped_notes(params) -> list[str]:
    """What a job's notes and the runner say of the combinations ``params``' grid excludes (never measured)."""
    return skipped_summary(params.skipped())
