"""Suites: a list of declared experiments and their parameters, run together on every GPU of a fleet.

A suite is a TOML file like a talk (``assets/suites/health.toml`` is the built-in one)::

    title = "Fleet health"
    profile = "precise/timeout_s=1"   # every run's profile, unless a run names its own
    timeout_s = 120                   # a (GPU, experiment) task not done by then has failed

    [[run]]
    experiment = "transfers"          # a registered experiment (its name or its runner subcommand)
    [run.params]                      # the experiment's parameters, as its parse_params takes them
    sizes = [1048576, 268435456]

    [[run]]
    experiment = "peers"
    gpus = "node"                     # a node's GPUs together (default "one": each GPU on its own)

``gpus = "node"`` runs the experiment once per node, on all of that node's GPUs at once, after the node's one-GPU
runs (``gpu.fleet.run``). An experiment that needs more than one GPU (``min_gpus``: its ``MIN_GPUS``, else two
when its points are keyed by a peer) must be a node run; a node with fewer GPUs reports "no peer" for it.

Everything is checked against the registry before any GPU work: an unknown experiment, an unknown or bad
parameter, a bad profile or a TOML error is refused with the file and line it is on: tomllib reads the values, and
each key's line comes from tree-sitter's syntax tree of the same text (``gpu.core.toml_lines``), for any layout
(quoted or dotted keys, inline tables, ``[run.params]``, CRLF; ``[[run]]`` in a comment or a string is not a table).
A suite's points (each run's ``Params.points()``) are the figures a fleet review reads: one column each on the Fleet
page.
"""

from __future__ import annotations

import math
import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gpu.core import paths
from gpu.core.errors import ValidationError
from gpu.core.text import shorten
from gpu.core.toml_lines import KeyLines, deepest_path, line_spelling
from gpu.experiments import registry, request
from gpu.experiments.request import Request

SUITES_DIR = paths.asset("suites")
DEFAULT_PROFILE = "precise/timeout_s=1"
DEFAULT_TIMEOUT_S = 300.0
MAX_SUITE_BYTES = 1_000_000  # a suite file is read up to this size, and refused beyond it
MAX_TIMEOUT_S = 86400.0  # a (GPU, experiment) task's time limit: up to a day
MAX_RUNS = 100  # [[run]] tables of a suite (one per experiment: the registry holds far fewer)
MAX_NESTING = 8  # arrays and tables inside each other; a suite needs 3 ([[run]], [run.params], a list)
MAX_REASONS = 20  # reasons listed for one suite; the rest counted
SUITE_KEYS = {"title", "profile", "timeout_s", "run"}
RUN_KEYS = {"experiment", "gpus", "params", "profile", "timeout_s"}
ONE_GPU, NODE = "one", "node"  # a run's ``gpus``: each GPU on its own, or all GPUs of a node together


class SuiteError(ValidationError):
    """A suite that cannot run; each reason names the file and line."""


@dataclass(frozen=True)
class SuiteRun:
    """One experiment of a suite: its registered name, its parameters (the profile included: as written, and
    ``request``, parsed and checked once when the suite was read) and its time limit."""

    experiment: str
    params: dict
    timeout_s: float
    line: int
    gpus: str = ONE_GPU
    request: Request | None = field(default=None, compare=False)

    @property
    def on_node(self) -> bool:
        return self.gpus == NODE

    @property
    def min_gpus(self) -> int:
        return min_gpus(registry.get_experiment(self.experiment))

    def checked(self) -> Request:
        """The run's request, checked against no device (a fleet's node checks it against its GPU's limits)."""
        return self.request or request.checked_request(self.experiment, self.params, None)

    def points(self) -> list[tuple]:
        """The point keys this run measures, in the order of the experiment's KEY_COLUMNS (from its request: the
        parameters are not parsed again)."""
        return list(self.checked().params.points())


@dataclass(frozen=True)
class Suite:
    name: str
    title: str
    runs: tuple[SuiteRun, ...]
    path: str = ""
    text: str = ""  # the suite's TOML as read: a fleet stores it, and the Fleet page reads the suite from the store
    experiments: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "experiments", tuple(r.experiment for r in self.runs))

    def run_for(self, experiment: str) -> SuiteRun:
        return next(r for r in self.runs if r.experiment == experiment)

    @property
    def gpu_runs(self) -> tuple[SuiteRun, ...]:
        """The runs measured on each GPU on its own."""
        return tuple(r for r in self.runs if not r.on_node)

    @property
    def node_runs(self) -> tuple[SuiteRun, ...]:
        """The runs measured once per node, on all its GPUs together."""
        return tuple(r for r in self.runs if r.on_node)


def min_gpus(module) -> int:
    """The fewest GPUs an experiment measures on (``registry.min_gpus``: read when called, as the registry imports
    this module while it registers experiments)."""
    return registry.min_gpus(module)


def built_in() -> list[str]:
    return sorted(p.stem for p in SUITES_DIR.glob("*.toml"))


def resolve(name_or_path: str) -> Path:
    """A built-in suite's name (``health``) or a path to a suite file."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or candidate.exists():
        return candidate
    if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name_or_path) and (SUITES_DIR / f"{name_or_path}.toml").exists():
        return SUITES_DIR / f"{name_or_path}.toml"
    raise SuiteError([f"no suite '{name_or_path[:80]}': give a suite file (.toml) or a built-in suite "
                      f"({', '.join(built_in())})"])


def load(name_or_path: str) -> Suite:
    """The suite, checked against the registry; SuiteError (with file and line) when it cannot run."""
    path = resolve(name_or_path)
    return parse(read(path), str(path), path.stem)


def read(path: Path) -> str:
    """A suite file's text: a regular file of at most MAX_SUITE_BYTES, UTF-8; SuiteError otherwise (a device, a
    pipe or a directory is never read)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the opening
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            raise SuiteError([f"{path}: not a regular file: a suite is a .toml file"])
        with os.fdopen(descriptor, "rb") as handle:
            data = handle.read(MAX_SUITE_BYTES + 1)
    except OSError as exc:
        raise SuiteError([f"{path}: cannot read the suite: {exc.strerror or exc}"]) from None
    if len(data) > MAX_SUITE_BYTES:
        raise SuiteError([f"{path}: larger than {MAX_SUITE_BYTES:,} bytes: not a suite"])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SuiteError([f"{path}: not UTF-8 text (byte {exc.start})"]) from None


def stored(fleet_id: str, name: str, text: str | None) -> Suite:
    """The suite a stored fleet was measured with: from its stored text; a fleet stored before fleets kept their
    suite's text has only a name, which is shown when it is a built-in suite's. Never a file that stored data
    names."""
    where = f"fleet {fleet_id[:64]}'s suite"
    if text is not None:
        if len(text) > MAX_SUITE_BYTES:
            raise SuiteError([f"{where} is larger than {MAX_SUITE_BYTES:,} characters: not a suite"])
        return parse(text, where, name)
    name = str(name or "")
    if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) and name in built_in():
        return load(name)
    shown = repr(name[:80]) if name else "none"
    raise SuiteError([f"{where}: the store keeps only its name ({shown}), not its text (the fleet was stored by an "
                      f"older PinPoint); only a built-in suite ({', '.join(built_in())}) can be shown by its name"])


def differences(stored: Suite, given: Suite) -> list[str]:
    """What ``given`` would measure unlike ``stored``, one phrase per change: a run only in one of them, or a run's
    setting (a parameter, the profile, ``timeout_s``, ``gpus``) with its stored and its new value. Empty when both
    measure alike (their texts may still differ in comments, layout, order or title)."""
    before = {run.experiment: run for run in stored.runs}
    after = {run.experiment: run for run in given.runs}
    found = [f"run {name}: in the stored suite, not in this one" for name in before if name not in after]
    found += [f"run {name}: in this suite, not in the stored one" for name in after if name not in before]
    for name, old in before.items():
        new = after.get(name)
        if new is None:
            continue
        settings = [("gpus", old.gpus, new.gpus), ("timeout_s", old.timeout_s, new.timeout_s)]
        settings += [(key if key == "profile" else f"params.{key}", old.params.get(key, _UNSET),
                      new.params.get(key, _UNSET)) for key in dict.fromkeys([*old.params, *new.params])]
        found += [f"run {name} (line {new.line}): {key} {_setting(was)} → {_setting(now)}"
                  for key, was, now in settings if was != now]
    return found


_UNSET = object()


def _setting(value) -> str:
    return "(not set)" if value is _UNSET else _value(value)


def parse(text: str, where: str = "<suite>", name: str = "suite") -> Suite:
    _bounded(text, where)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message ends "(at line N, column M)" or "(at end of document)"
        message = str(exc)
        found = re.search(r"\(at line (\d+), column \d+\)$", message)
        line = int(found.group(1)) if found else max(1, len(text.splitlines()))
        raise SuiteError([f"{where}: line {line}: not valid TOML: {re.sub(r' [(]at [^)]*[)]$', '', message)}"]) \
            from None
    except RecursionError:  # the nesting bound above keeps tomllib far from this; one line if it is ever reached
        raise SuiteError([f"{where}: arrays and tables nested too deep"]) from None
    # A dotted key nests a table per part (a.b.c… of 1,000 parts is 1,000 levels) with no bracket to count: bounded
    # here, on tomllib's values and without recursion, before anything walks the keys.
    deepest = deepest_path(data, MAX_NESTING)
    if deepest:
        shown = shorten(".".join(str(part) for part in deepest[:MAX_NESTING + 1]), 80)
        raise SuiteError([f"{where}: line {line_spelling(text, deepest)}: keys nested deeper than {MAX_NESTING} "
                          f"levels ({shown}…, {len(deepest):,} levels)"])
    lines = KeyLines(text)  # where each key sits, from tree-sitter's syntax tree of the text tomllib accepted

    def top(key: str) -> int:  # a top-level key's line; line 1 for one not written
        return lines.get(key) or 1

    reasons = []
    for key in sorted(set(data) - SUITE_KEYS):
        reasons.append(f"{where}: line {top(key)}: unknown key '{key}' (known: {', '.join(sorted(SUITE_KEYS))})")
    profile = data.get("profile", DEFAULT_PROFILE)
    timeout = data.get("timeout_s", DEFAULT_TIMEOUT_S)
    if not isinstance(profile, str):
        reasons.append(f"{where}: line {top('profile')}: profile must be text, e.g. \"{DEFAULT_PROFILE}\"")
    if not _timeout(timeout):
        reasons.append(f"{where}: line {top('timeout_s')}: {TIMEOUT_WORDS}, not {_value(timeout)}")
    if "title" in data and not isinstance(data["title"], str):
        reasons.append(f"{where}: line {top('title')}: title must be text, not {_value(data['title'])}")
    entries = data.get("run", [])
    if not isinstance(entries, list) or not entries:
        reasons.append(f"{where}: line {top('run')}: a suite lists at least one [[run]] (an experiment and its "
                       "parameters)")
        entries = []
    runs = []
    for index, entry in enumerate(entries):
        run, problems = _run(entry, index, profile if isinstance(profile, str) else DEFAULT_PROFILE,
                             timeout if _timeout(timeout) else DEFAULT_TIMEOUT_S, lines)
        reasons += [f"{where}: line {line}: {problem}" for line, problem in problems]
        if run is not None:
            runs.append(run)
    listed: dict[str, list[int]] = {}
    for run in runs:  # one pass: each experiment listed more than once is named once, with all its lines
        listed.setdefault(run.experiment, []).append(run.line)
    for experiment, at in listed.items():
        if len(at) > 1:
            reasons.append(f"{where}: line {at[1]}: {experiment} is listed {len(at)} times (lines "
                           f"{', '.join(map(str, at[:10]))}{' …' if len(at) > 10 else ''}): one run per experiment "
                           "(a fleet resumes by GPU, or node, and experiment)")
    if reasons:
        if len(reasons) > MAX_REASONS:
            reasons = reasons[:MAX_REASONS] + [f"{where}: … and {len(reasons) - MAX_REASONS} more problems"]
        raise SuiteError(reasons)
    title = data.get("title") if isinstance(data.get("title"), str) else name
    return Suite(name=name, title=title, runs=tuple(runs), path=where, text=text)


TIMEOUT_WORDS = f"timeout_s must be a positive number of seconds, at most {MAX_TIMEOUT_S:,.0f} (a day)"


def _timeout(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and \
        0 < value <= MAX_TIMEOUT_S


def _value(value) -> str:
    return repr(value)[:40]


def _bounded(text: str, where: str) -> None:
    """The suite's size, its count of [[run]] tables and how deep its arrays and tables nest, checked on the text
    before tomllib parses it (which recurses per level and would take any size)."""
    if len(text) > MAX_SUITE_BYTES:
        raise SuiteError([f"{where}: larger than {MAX_SUITE_BYTES:,} characters: not a suite"])
    headers = sum(1 for _ in RUN_HEADER.finditer(text))
    if headers > MAX_RUNS:
        raise SuiteError([f"{where}: {headers:,} [[run]] tables, over the limit of {MAX_RUNS} (one per experiment)"])
    depth, line, quote, comment = 0, 1, None, False
    for token in TOKEN.finditer(text):
        found = token.group()
        if found == "\n":
            line += 1
            comment = False
            if quote in ('"', "'"):
                quote = None  # a one-line string ends at its line (tomllib says what is wrong with it)
        elif comment:
            continue
        elif quote is not None:
            line += found.count("\n")
            if found == quote or (quote == "'" and found.startswith("\\") and found.endswith("'")):
                quote = None  # a literal string has no escapes: its backslash is a character
        elif found in ('"""', "'''", '"', "'"):
            quote = found
        elif found == "#":
            comment = True
        elif found in "[{":
            depth += 1
            if depth > MAX_NESTING:
                raise SuiteError([f"{where}: line {line}: arrays and tables nested deeper than {MAX_NESTING} levels"])
        elif found in "]}":
            depth = max(0, depth - 1)


RUN_HEADER = re.compile(r"^[ \t]*\[\[", re.MULTILINE)
# What the nesting scan reads: escapes, quotes (triple first), comments, newlines and brackets.
TOKEN = re.compile(r'\\.|"""|\'\'\'|"|\'|#|\n|[\[\]{}]')


def _run(entry, index: int, profile: str, timeout: float, lines: KeyLines) -> tuple[SuiteRun | None, list]:
    header = lines.get("run", index) or lines.get("run") or 1

    def at(*keys: str) -> int:  # a key of this run, else its [[run]] header
        return lines.get("run", index, *keys) or header

    if not isinstance(entry, dict):
        return None, [(header, "each [[run]] is a table with an experiment and its [run.params]")]
    problems = [(at(key), f"unknown key '{key}' in a run (known: {', '.join(sorted(RUN_KEYS))})")
                for key in sorted(set(entry) - RUN_KEYS)]
    name = entry.get("experiment")
    entry_for = registry.BY_NAME.get(name) or registry.BY_COMMAND.get(name) if isinstance(name, str) else None
    if entry_for is None:
        known = ", ".join(e.name for e in registry.REGISTRY)
        shown = repr(name)[:60] if name is not None else "none"
        return None, problems + [(at("experiment"), f"unknown experiment {shown} (known: {known})")]
    params = entry.get("params", {})
    if not isinstance(params, dict):
        return None, problems + [(at("params"), "[run.params] must be a table of parameters")]
    run_profile = entry.get("profile", profile)
    run_timeout = entry.get("timeout_s", timeout)
    if not isinstance(run_profile, str):
        problems.append((at("profile"), f"profile must be text, e.g. \"{DEFAULT_PROFILE}\", not "
                                        f"{_value(run_profile)}"))
        run_profile = DEFAULT_PROFILE
    if not _timeout(run_timeout):
        problems.append((at("timeout_s"), f"{TIMEOUT_WORDS}, not {_value(run_timeout)}"))
    gpus = entry.get("gpus", ONE_GPU)
    if gpus not in (ONE_GPU, NODE):
        shown = repr(gpus)[:40]
        problems.append((at("gpus"), f"gpus must be \"{ONE_GPU}\" (each GPU on its own, the default) or "
                                     f"\"{NODE}\" (all GPUs of a node together), not {shown}"))
    elif gpus == ONE_GPU and min_gpus(entry_for.module) > 1:
        problems.append((at("experiment"), f"{entry_for.name} measures {min_gpus(entry_for.module)} "
                                           "or more GPUs together: give gpus = \"node\""))
    if "profile" in params:
        problems.append((at("params", "profile"),
                         "the profile is the suite's or the run's (profile = …), not a parameter"))
    params = {**params, "profile": run_profile}
    try:
        checked, reasons = request.checked_request(entry_for.name, params, None), []
    except ValidationError as exc:
        checked, reasons = None, exc.reasons
    for reason in reasons:  # a reason that names a parameter points at its line, else at the run's experiment
        problems.append((_mentioned(lines, index, reason, params) or at("experiment"),
                         f"{entry_for.name}: {reason}"))
    if problems:
        return None, problems
    return SuiteRun(entry_for.name, params, float(run_timeout), header, gpus, checked), []


def _mentioned(lines: KeyLines, index: int, reason: str, params: dict) -> int | None:
    """The line of the first parameter of run ``index`` that ``reason`` names (by its name or its words); the profile,
    a parameter that the run or the suite gives, is looked for among the run's keys too."""
    for name in params:
        spoken = name.replace("_", " ").rstrip("s")
        if name in reason or spoken in reason:
            found = lines.get("run", index, "params", name) or lines.get("run", index, name)
            if found:
                return found
    return None
