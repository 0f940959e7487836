"""Every experiment PinPoint knows, in one place: its declaration module, the runner's subcommand and arguments,
the page that shows it and how Compare names its points. The runner (``gpu.bench``), the talks, Overview, Runs,
Compare and app.py's navigation read this list; adding an experiment means adding one entry here.

Runner arguments are ``harness.Axis`` values: the flag, its default text and how it is parsed (``kind``). An
experiment converted to the sweep harness declares them as its own ``AXES``.
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass
from types import ModuleType

from gpu.core.errors import ValidationError
from gpu.core.units import parse_size_list
from gpu.experiments import batching, coalescing, managed, occupancy_sweep, pools, reduction, streams, transfers
from gpu.experiments.harness import Axis


@dataclass(frozen=True)
class Entry:
    """One registered experiment. ``arguments``: the runner's flags (``Axis``); ``expand``: argument names that run
    once per value (occupancy: one run per register and shared-memory setting); ``byte_labels``: Compare writes
    ``bytes`` and ``param_value`` as sizes."""

    module: ModuleType
    command: str
    help: str
    page: str
    arguments: tuple[Axis, ...]
    expand: tuple[str, ...] = ()
    byte_labels: bool = False

    @property
    def name(self) -> str:
        return self.module.NAME


def _axis(name, default, kind, help="", flag=None, choices=None):
    """A runner-only argument of an experiment not yet declared over the harness."""
    return Axis(name, name.replace("_", " "), None, cli_default=default, kind=kind, help=help,
                values=tuple(choices or ()), cli_flag=flag)


REGISTRY: tuple[Entry, ...] = (
    Entry(transfers, "transfers", "pageable vs pinned vs write-combined vs mapped copies", "pages/transfers.py",
          transfers.AXES),
    Entry(coalescing, "coalescing", "strided, misaligned, AoS/SoA and transpose kernels vs the device copy",
          "pages/coalescing.py", coalescing.AXES),
    Entry(reduction, "reduction", "dot-product variants vs gpuarray.dot, kernel-only and end to end",
          "pages/reductions.py", reduction.AXES),
    Entry(occupancy_sweep, "occupancy", "block-size sweep of a memory-bound and a latency-bound kernel",
          "pages/occupancy.py", occupancy_sweep.AXES, expand=("extra_registers", "dynamic_shared_bytes")),
    Entry(streams, "streams", "chunked H2D → kernel → D2H pipelines over several streams vs one stream",
          "pages/streams.py", streams.AXES),
    Entry(managed, "managed", "managed memory: first touch, prefetch, resident vs device memory",
          "pages/memory_modes.py", managed.AXES, byte_labels=True),
    Entry(pools, "pools", "allocate → copy → free per call vs DeviceMemoryPool/PageLockedMemoryPool",
          "pages/memory_modes.py", pools.AXES, byte_labels=True),
    Entry(batching, "batching", "K small copies vs one big copy vs packing into pinned staging",
          "pages/memory_modes.py", batching.AXES, byte_labels=True),
)

EXPERIMENTS: dict[str, ModuleType] = {e.name: e.module for e in REGISTRY}
BY_NAME: dict[str, Entry] = {e.name: e for e in REGISTRY}
BY_COMMAND: dict[str, Entry] = {e.command: e for e in REGISTRY}
PAGE_OF: dict[str, str] = {e.name: e.page for e in REGISTRY}


def get_experiment(name: str):
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise ValidationError([f"unknown experiment '{name}' (known: {', '.join(EXPERIMENTS)})"]) from None


def experiment_pages() -> list[str]:
    """The pages that show experiments, each once, in registry order."""
    return list(dict.fromkeys(e.page for e in REGISTRY))


def add_arguments(parser: argparse.ArgumentParser, entry: Entry) -> None:
    """The runner's flags for ``entry``, from its axes."""
    for axis in entry.arguments:
        extra = {"help": axis.help} if axis.help else {}
        if axis.kind == "off_switch":
            parser.add_argument(axis.flag, action="store_true", **extra)
        elif axis.kind == "bool":
            parser.add_argument(axis.flag, action=argparse.BooleanOptionalAction, default=axis.cli_default, **extra)
        elif axis.kind == "alloc":
            parser.add_argument(axis.flag, choices=list(axis.values), default=axis.cli_default, **extra)
        elif axis.kind == "int":
            parser.add_argument(axis.flag, type=int, default=int(axis.cli_default), **extra)
        else:
            parser.add_argument(axis.flag, default=axis.cli_default, **extra)


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


PARSERS = {
    "sizes": parse_size_list, "size": lambda v: parse_size_list(v)[0], "ints": int_list,
    "first_int": lambda v: int_list(v)[0], "int": int, "words": words, "bool": bool,
    "off_switch": lambda v: not v, "alloc": {"no": [False], "yes": [True], "both": [False, True]}.__getitem__,
}


def runner_jobs(entry: Entry, args) -> list[dict]:
    """The parameter sets the runner submits for ``args`` (one per combination of the ``expand`` arguments)."""
    values = {}
    for axis in entry.arguments:
        values[axis.name] = PARSERS[axis.kind](getattr(args, axis.flag[2:].replace("-", "_")))
    values["profile"] = args.profile
    if not entry.expand:
        return [values]
    combos = itertools.product(*(values[name] for name in entry.expand))
    return [{**values, **dict(zip(entry.expand, combo, strict=True))} for combo in combos]


def check_params(experiment: str, params: dict, limits) -> list[str]:
    """Every reason ``params`` cannot run (empty when they can), before anything is allocated."""
    try:
        module = get_experiment(experiment)
        return module.invalid_reasons(module.parse_params(params), limits)
    except ValidationError as exc:
        return exc.reasons
