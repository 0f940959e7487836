"""An experiment's parameters, declared once: each ``Axis`` says its name, default, kind and limits, and everything
else is built from the ``AXES`` tuple:

* ``parameters(AXES, grid=GRID, key_columns=KEY_COLUMNS)`` – the frozen ``Params`` dataclass (one field per axis,
  plus ``profile``), its ``points()`` generated from the declared grid (``gpu.experiments.grid``);
* ``parser(Params)`` – ``parse_params(raw)``: plain values (page widgets, the runner, job messages, suites) to
  ``Params``, unknown keys refused, each value converted and normalised as its axis says;
* ``reasons(params, limits)`` – the generic checks (at least one value, a known choice, the range, a power of
  two, a multiple of) with one message shape for every experiment;
* ``registry.add_arguments`` – the runner's flags (``--block-sizes``), their defaults and help.

As nvbench declares an axis once (``add_int64_power_of_two_axis``) and builds the combinations and the command line
from it, an experiment writes each default and limit in exactly one place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpu.core import stats, text
from gpu.core.errors import ValidationError
from gpu.core.units import format_bytes

LISTS = ("ints", "sizes", "words", "alloc")  # kinds whose value is a list (one value per point of the axis)
SCALARS = ("int", "size", "bool", "off_switch")
NUMBERS = ("ints", "sizes", "int", "size")


@dataclass(frozen=True)
class Axis:
    """One parameter. ``name``: the ``Params`` field; ``label``: what a person calls its values (plural for a
    list), ``one``: one value in a message ("block size 100 …"); ``default``: the typed default (a list for
    list kinds); ``kind``: ints | sizes | words | alloc (lists of bools) | int | size | bool | off_switch;
    ``values``: the allowed values (a choice); ``steps``: values a page offers where any in range is allowed;
    ``low``/``high``: inclusive limits, ``limit`` a ``Limits`` attribute that lowers ``high`` on a device
    (``max_threads_per_block``); ``power_of_two``, ``multiple_of`` (with ``why``: the reason, in a message);
    ``order``: how a list is normalised (sorted | given | declared: in ``values`` order); ``may_be_empty``;
    ``help``/``cli_flag``: the runner's flag."""

    name: str
    label: str
    default: Any
    kind: str = "words"
    one: str = ""
    values: tuple = ()
    steps: tuple = ()
    low: Any = None
    high: Any = None
    limit: str = ""
    power_of_two: bool = False
    multiple_of: int = 0
    why: str = ""
    unit: str = ""
    order: str = ""
    may_be_empty: bool = False
    help: str = ""
    cli_flag: str | None = None

    def __post_init__(self):
        if self.kind not in LISTS + SCALARS:
            raise ValueError(f"axis {self.name}: unknown kind '{self.kind}'")

    @property
    def flag(self) -> str:
        return self.cli_flag or "--" + self.name.replace("_", "-")

    @property
    def is_list(self) -> bool:
        return self.kind in LISTS

    @property
    def noun(self) -> str:
        """One value of the axis in a message: ``one``, else the label without its plural s."""
        return self.one or (self.label[:-1] if self.label.endswith("s") else self.label)

    def show(self, value) -> str:
        """A value as messages and help write it: byte sizes as KiB/MiB, numbers with separators."""
        if self.unit == "bytes" and isinstance(value, int) and not isinstance(value, bool):
            # KiB/MiB only where exact: "4098 B is not a multiple of 4 B" must not read "4 KiB is not …"
            return format_bytes(value) if value % 1024 == 0 or abs(value) < 1024 else f"{value} B"
        return text.shorten(str(value))

    def default_text(self) -> str:
        values = self.default if self.is_list else [self.default]
        return ",".join(self.show(v).replace(" ", "") for v in values)

    # --- from plain values --------------------------------------------------------------------------------------
    def convert(self, raw):
        """The typed value of ``raw`` (ValueError/TypeError when it is not of this kind)."""
        if self.kind in ("ints", "sizes"):
            if isinstance(raw, (str, bytes)) or not hasattr(raw, "__iter__"):
                raise TypeError(self.name)
            return self.normalise([_whole(v) for v in raw])
        if self.kind == "words":
            if isinstance(raw, (str, bytes)) or not hasattr(raw, "__iter__"):
                raise TypeError(self.name)
            return self.normalise([str(v) for v in raw])
        if self.kind == "alloc":
            return self.normalise([bool(v) for v in raw])
        if self.kind in ("int", "size"):
            return _whole(raw)
        return bool(raw)

    def normalise(self, values: list) -> list:
        order = self.order or ("given" if self.kind == "words" else "sorted")
        if order == "sorted":
            return sorted(set(values))
        unique = list(dict.fromkeys(values))
        if order == "declared":
            return [v for v in self.values if v in unique] + [v for v in unique if v not in self.values]
        return unique

    # --- checks -------------------------------------------------------------------------------------------------
    def reasons(self, value, limits=None) -> list[str]:
        """Why ``value`` is not allowed on this axis (the generic checks), or nothing."""
        values = list(value) if self.is_list else [value]
        if self.is_list and not values and not self.may_be_empty:
            return [f"choose at least one {self.noun}"]
        found = []
        if self.values:
            known = ", ".join(self.show(v) for v in self.values)
            found += [f"unknown {self.noun} '{self.show(v)}' (known: {known})" for v in values if v not in self.values]
        if self.kind not in NUMBERS:
            return found
        high = self.high
        if self.limit and limits is not None and getattr(limits, self.limit, None):
            high = min(high, int(getattr(limits, self.limit))) if high is not None else int(getattr(limits, self.limit))
        for v in values:
            where = f"{self.noun} {self.show(v)}"
            in_range = (self.low is None or v >= self.low) and (high is None or v <= high)
            if self.power_of_two and (not in_range or v <= 0 or v & (v - 1)):
                found.append(f"{where} must be a power of two from {self.show(self.low)} to {self.show(high)}")
            elif not in_range:
                found.append(f"{where} must be {self._range_text(high)}")
            elif self.multiple_of and v % self.multiple_of:
                found.append(f"{where} is not a multiple of {self.show(self.multiple_of)}"
                             + (f" ({self.why})" if self.why else ""))
        return found

    def _range_text(self, high) -> str:
        if self.low is not None and high is not None:
            return f"from {self.show(self.low)} to {self.show(high)}"
        return f"at least {self.show(self.low)}" if high is None else f"at most {self.show(high)}"


def _whole(value) -> int:
    """An integer from an int, a whole float or a digit string; never a bool or a fraction."""
    if isinstance(value, bool):
        raise TypeError("a bool is not a number")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(value)
        return int(value)
    return int(value)


class Parameters:
    """The base of every experiment's ``Params``: the axes it was built from and its declared point grid, from which
    ``grid()``, ``skipped()`` and ``points()`` are generated."""

    AXES: tuple[Axis, ...] = ()
    GRID = None  # a gpu.experiments.grid.Grid (``parameters`` requires one)
    KEY_COLUMNS: tuple[str, ...] = ()

    def walk(self) -> tuple[list, list]:
        """``(grid points, skipped)``: the declared grid walked once (``Grid.walk``)."""
        return self.GRID.walk(self)

    def grid(self) -> list:
        """The points to measure, as ``GridPoint``s (column -> value), in generation order."""
        return self.walk()[0]

    def skipped(self) -> list:
        """The points an exclusion skips: ``(GridPoint, reason)`` pairs."""
        return self.walk()[1]

    def points(self) -> list[tuple]:
        """Every point's key, in ``KEY_COLUMNS`` order, in generation order."""
        return [point.key(self.KEY_COLUMNS) for point in self.grid()]


def parameters(axes: tuple[Axis, ...], grid, key_columns) -> type:
    """A frozen dataclass with one field per axis (its default) plus ``profile``, its ``points()``, ``grid()`` and
    ``skipped()`` generated from ``grid`` (a ``gpu.experiments.grid.Grid``) whose key columns are ``key_columns``."""
    if grid is None:
        raise ValueError("parameters need a declared grid (gpu.experiments.grid.Grid)")
    missing = [c for c in key_columns if c not in grid.key_columns]
    if not key_columns or missing or set(grid.key_columns) - set(key_columns):
        raise ValueError(f"the grid's key columns ({', '.join(grid.key_columns)}) are not the key columns "
                         f"({', '.join(key_columns)})")
    fields = []
    for axis in axes:
        default = axis.default
        if isinstance(default, (list, tuple, range)):
            fields.append((axis.name, list, field(default_factory=lambda d=tuple(default): list(d))))
        else:
            fields.append((axis.name, type(default), field(default=default)))
    fields.append(("profile", str, field(default="interactive")))
    cls = dataclasses.make_dataclass("DeclaredParams", fields, bases=(Parameters,), frozen=True)
    cls.AXES = tuple(axes)
    cls.GRID, cls.KEY_COLUMNS = grid, tuple(key_columns)
    return cls


def parser(params_class: type) -> Callable[[dict], Any]:
    """``parse_params(raw)`` for ``params_class``: each known key converted by its axis, a default for each one
    missing; a key the class lacks, or a value of the wrong type, is a ``ValidationError`` naming it. Types only:
    limits are ``reasons``' business."""

    def parse_params(raw: dict):
        unknown = unknown_parameter_reasons(raw, params_class)
        if unknown:
            raise ValidationError(unknown)
        values, problems = {}, []
        for axis in params_class.AXES:
            if axis.name not in raw:
                continue
            try:
                values[axis.name] = axis.convert(raw[axis.name])
            except (TypeError, ValueError):
                shown = text.shorten(repr(raw[axis.name]), 40)
                what = "whole numbers" if axis.kind in ("ints", "sizes") else \
                    "a whole number" if axis.kind in ("int", "size") else "a list of words"
                problems.append(f"{axis.label} must be {what}, not {shown}")
        if problems:
            raise ValidationError(problems)
        if "profile" in raw:
            values["profile"] = str(raw["profile"])
        return params_class(**values)

    parse_params.__doc__ = f"{params_class.__name__} from plain values (types checked, limits not)."
    return parse_params


def unknown_parameter_reasons(raw: dict, params_class) -> list[str]:
    """The one reason naming the keys of ``raw`` that are not fields of ``params_class``, or none (a typo must not
    pass as a default)."""
    unknown = set(raw) - {f.name for f in dataclasses.fields(params_class)}
    return [f"unknown {text.plural('parameter', len(unknown))}: {', '.join(sorted(unknown))}"] if unknown else []


def profile_reasons(spec: str) -> list[str]:
    """Why ``spec`` is not a measurement profile (``stats.get_profile``), or nothing when it is."""
    try:
        stats.get_profile(spec)
    except ValueError as exc:
        return [str(exc)]
    return []


def reasons(params, limits=None) -> list[str]:
    """Every generic reason ``params`` cannot run: each axis' checks, then the profile's."""
    found = []
    for axis in params.AXES:
        found += axis.reasons(getattr(params, axis.name), limits)
    return found + profile_reasons(params.profile)


def by_name(axes: tuple[Axis, ...], name: str) -> Axis:
    for axis in axes:
        if axis.name == name:
            return axis
    raise KeyError(name)
