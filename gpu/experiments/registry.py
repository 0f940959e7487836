"""Every experiment PinPoint knows, found from the declarations themselves. An experiment is a package,
``gpu/experiments/<name>/`` (or one of a folder that ``PINPOINT_EXPERIMENTS_PATH`` names, found as
``gpu.experiments.<name>`` too): its ``__init__.py`` declares a ``COMMAND`` and registers, with its runner subcommand
and help (``COMMAND``, ``HELP``), the page that shows it (``PAGE``, and ``PAGE_ENTRY`` from the experiment that owns
that page: its title, address, icon and place in the navigation), its arguments (``AXES``: ``harness.Axis`` values
with the flag, default text and parse kind) and its place in lists (``ORDER``); ``EXPAND`` names arguments that run
once per value (occupancy: one run per register and shared-memory setting), ``BYTE_LABELS`` makes Compare write
its size columns (``gpu.core.schema.SIZE_COLUMNS``) as sizes, and ``LABELS`` gives each variant its words (the
report's series, the Roofline's kernels). The runner (``gpu.bench``), the talks, Overview, Runs, Compare and app.py's
navigation read this registry, so adding an experiment is adding its package.

How an experiment is measured is its package's ``sweep.py``, and how it is shown its ``view.py``: only the worker
measures, so the registry imports a sweep on first use (``Entry.sweep``, ``sweep_of``), never at import; a view
(charts, takeaway, headlines: pandas and Plotly) is imported on first use too (``Entry.view``, ``view_of``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import itertools
import pkgutil
from dataclasses import dataclass, field
from types import ModuleType

from gpu.core.errors import ValidationError
from gpu.core.units import parse_size_list
from gpu.experiments.axes import Axis
from gpu.experiments.page import PageEntry

SWEEP, VIEW = "sweep", "view"  # an experiment package's worker-only measurement and its present-layer view


@dataclass(frozen=True)
class Entry:
    """One registered experiment, as its module declares it."""

    module: ModuleType
    command: str
    help: str
    page: str
    arguments: tuple[Axis, ...]
    expand: tuple[str, ...] = ()
    byte_labels: bool = False
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.module.NAME

    def sweep_module(self) -> ModuleType:
        """The experiment's worker-only sweep module, ``<package>.sweep``, imported on first use (it loads the
        device layer: only the worker calls this)."""
        return importlib.import_module(f"{self.module.__name__}.{SWEEP}")

    def view(self) -> ModuleType | None:
        """The experiment's view, ``<package>.view`` (its charts, takeaway and headlines), imported on first use;
        None for an experiment without one."""
        if importlib.util.find_spec(f"{self.module.__name__}.{VIEW}") is None:
            return None
        return importlib.import_module(f"{self.module.__name__}.{VIEW}")

    def sweep(self):
        """The experiment's measurement, ``run(params, gpu, progress, should_cancel)`` → rows (see ``sweep_module``)."""
        return self.sweep_module().run

    @classmethod
    def of(cls, module: ModuleType) -> Entry:
        return cls(module, module.COMMAND, module.HELP, module.PAGE, tuple(module.AXES),
                   tuple(getattr(module, "EXPAND", ())), bool(getattr(module, "BYTE_LABELS", False)),
                   dict(module.LABELS))


def _declarations() -> list[ModuleType]:
    """The packages of gpu/experiments that declare an experiment (a ``COMMAND`` in their ``__init__.py``), in their
    ``ORDER``: those of the folders ``PINPOINT_EXPERIMENTS_PATH`` names too, which gpu/experiments/__init__.py adds to
    the package's path. The modules beside them (axes, registry, suites …) are what experiments share."""
    package = importlib.import_module("gpu.experiments")
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        if not info.ispkg or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"gpu.experiments.{info.name}")
        if hasattr(module, "COMMAND"):
            found.append(module)
    return sorted(found, key=lambda m: (m.ORDER, m.NAME))


REGISTRY: tuple[Entry, ...] = tuple(Entry.of(module) for module in _declarations())
EXPERIMENTS: dict[str, ModuleType] = {e.name: e.module for e in REGISTRY}
BY_NAME: dict[str, Entry] = {e.name: e for e in REGISTRY}
BY_COMMAND: dict[str, Entry] = {e.command: e for e in REGISTRY}
PAGE_OF: dict[str, str] = {e.name: e.page for e in REGISTRY}


def min_gpus(module: ModuleType) -> int:
    """The fewest GPUs an experiment measures on: its ``MIN_GPUS`` where it declares one (2 for a peer measurement),
    else one. The runner, the app and suites all read it here."""
    return int(getattr(module, "MIN_GPUS", 1))


def get_experiment(name: str):
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise ValidationError([f"unknown experiment '{name}' (known: {', '.join(EXPERIMENTS)})"]) from None


def entry_of(name: str) -> Entry:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValidationError([f"unknown experiment '{name}' (known: {', '.join(BY_NAME)})"]) from None


def labels_of(name: str) -> dict[str, str]:
    """The experiment ``name``'s words for its variants ({variant: label}); none for an unknown experiment."""
    entry = BY_NAME.get(name)
    return entry.labels if entry else {}


def sweep_of(name: str):
    """The experiment ``name``'s measurement (``Entry.sweep``): the worker's only way to its sweep."""
    return entry_of(name).sweep()


def experiment_pages() -> list[str]:
    """The pages that show experiments, each once, in registry order."""
    return list(dict.fromkeys(e.page for e in REGISTRY))


def page_entries() -> list[PageEntry]:
    """The experiments' pages as their owners declare them (``PAGE_ENTRY``: one experiment of each page, the others
    name its file in ``PAGE``), in registry order; pages/_shared.py adds the pages that show no one experiment."""
    return [e.module.PAGE_ENTRY for e in REGISTRY if hasattr(e.module, "PAGE_ENTRY")]


def view_of(name: str) -> ModuleType | None:
    """The experiment ``name``'s view (``Entry.view``): how shared present code reaches an experiment's takeaway and
    headlines without naming it."""
    return entry_of(name).view()


def add_arguments(parser: argparse.ArgumentParser, entry: Entry) -> None:
    """The runner's flags for ``entry``, from its axes: a flag left out takes the axis' default."""
    for axis in entry.arguments:
        shown = "" if axis.kind == "off_switch" else f" (default: {axis.default_text()})"
        extra = {"help": (axis.help or axis.label) + shown}
        if axis.kind == "off_switch":
            parser.add_argument(axis.flag, action="store_true", **extra)
        elif axis.kind == "bool":
            parser.add_argument(axis.flag, action=argparse.BooleanOptionalAction, default=None, **extra)
        elif axis.kind == "alloc":
            parser.add_argument(axis.flag, choices=list(ALLOC), default=None, **extra)
        else:
            parser.add_argument(axis.flag, default=None, **extra)


def int_list(text: str) -> list[int]:
    """'1,2,4', '2^26' or 'start:stop:step' (inclusive)."""
    values = []
    for token in str(text).split(","):
        token = token.strip()
        if not token:
            continue
        if token.count(":") == 2:
            start, stop, step = (int(x) for x in token.split(":"))
            values += list(range(start, stop + 1, step))
        elif "^" in token:
            base, exp = token.split("^")
            values.append(int(base) ** int(exp))
        else:
            values.append(int(token))
    return values


def words(text: str) -> list[str]:
    return [w.strip() for w in text.split(",") if w.strip()]


ALLOC = {"no": [False], "yes": [True], "both": [False, True]}
# How the runner reads a flag's text, by axis kind (a flag left out takes the axis' typed default instead).
PARSERS = {
    "sizes": parse_size_list, "size": lambda v: parse_size_list(v)[0], "ints": int_list,
    "int": lambda v: int_list(v)[0], "words": words, "bool": bool,
    "off_switch": lambda v: not v, "alloc": ALLOC.__getitem__,
}


def runner_jobs(entry: Entry, args) -> list[dict]:
    """The parameter sets the runner submits for ``args`` (one per combination of the ``expand`` arguments)."""
    values = {}
    for axis in entry.arguments:
        given = getattr(args, axis.flag[2:].replace("-", "_"))
        if axis.name in entry.expand and given is not None:
            values[axis.name] = int_list(given)  # one run per value
        elif axis.kind == "off_switch":
            values[axis.name] = not given
        elif given is None:
            values[axis.name] = axis.default
        else:
            values[axis.name] = PARSERS[axis.kind](given)
    values["profile"] = args.profile
    if not entry.expand:
        return [values]
    # An expanded axis is a scalar per run: the runner takes a list of them and submits one run each.
    lists = {name: values[name] if isinstance(values[name], list) else [values[name]] for name in entry.expand}
    combos = itertools.product(*(lists[name] for name in entry.expand))
    return [{**values, **dict(zip(entry.expand, combo, strict=True))} for combo in combos]

