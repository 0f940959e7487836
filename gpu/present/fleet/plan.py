"""What a fleet's runs were asked for: its figures (per experiment measured on each board on its own, the point keys
in order) and the experiments measured on a node's GPUs together. From a suite (the bundled boards, judged on the
health suite's figures) or, for a stored fleet, from the parameters each of its runs was measured with
(``runs.params``, read in bulk beside its points): a view never parses a stored fleet's suite. A run whose parameters
cannot be read (not JSON, not its experiment's parameters, too long, or not recorded) is named in one line
(``Plan.problems``) and left out; the rest of the fleet is shown. No Streamlit, no CUDA.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from gpu.core import schema
from gpu.core.errors import ValidationError
from gpu.core.text import shorten
from gpu.experiments import registry, suites
from gpu.results.persistence.store import MAX_PARAMS_CHARS, RunStore

NOT_RECORDED = "parameters not recorded (stored before version 7)"
MAX_RUN_POINTS = 100_000  # the point keys one run's parameters may name (a suite's runs name tens)


@dataclass(frozen=True)
class Plan:
    """The figures of a fleet: per experiment measured on each board on its own, its point keys in order (each a
    heatmap column), experiments in order; the experiments measured on a node's GPUs together (not a board's
    figures: ``fleet_links`` shows them); a title; and one line per run whose parameters could not be read."""

    title: str
    keys: dict[str, list[tuple]]
    node_experiments: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def experiments(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.keys, *self.node_experiments]))

    @classmethod
    def of_suite(cls, suite) -> Plan:
        """The figures of a suite's runs (its one-GPU runs' points, in suite order)."""
        if isinstance(suite, Plan):
            return suite
        keys: dict[str, list[tuple]] = {}
        for run in suite.runs:
            if not run.on_node:
                keys.setdefault(run.experiment, []).extend(_keys(run.points()))
        return cls(suite.title, {e: list(dict.fromkeys(k)) for e, k in keys.items()},
                   tuple(r.experiment for r in suite.runs if r.on_node))


def _keys(points) -> list[tuple]:
    return [tuple(schema.key_value(v) for v in key) for key in points]


def stored_plan(store: RunStore, run_ids: list[str], title: str) -> Plan:
    """The plan of stored runs, from the parameters each was measured with (one bulk read): a run's points are its
    experiment's ``parse_params(params).points()``; experiments in the order the fleet first measured them (a fleet
    measures a GPU's suite runs in suite order), then by the registry's. A run whose parameters are missing or
    cannot be read is named in ``problems`` and left out."""
    asked = store.run_params(list(run_ids))
    keys: dict[str, list[tuple]] = {}
    node: list[str] = []
    problems: list[str] = []
    read: dict[tuple, list[tuple]] = {}  # a fleet's boards share their runs' parameters: each text is read once
    order = {name: i for i, name in enumerate(registry.BY_NAME)}
    asked = asked.assign(when=pd.to_datetime(asked["timestamp"], utc=True, errors="coerce", format="mixed"),
                         rank=asked["experiment"].map(lambda e: order.get(e, len(order))))
    for run in asked.sort_values(["when", "rank", "run_id"], kind="stable").itertuples():
        try:
            text = run.params if isinstance(run.params, str) else None
            if text is None:
                raise ValueError(f"its parameters are {int(run.params_chars):,} characters, over the limit of "
                                 f"{MAX_PARAMS_CHARS:,}" if not pd.isna(run.params_chars) else NOT_RECORDED)
            if (run.experiment, text) not in read:
                read[(run.experiment, text)] = _run_keys(str(run.experiment), text)
            if run.gpus == suites.NODE:
                node.append(str(run.experiment))
            else:
                keys.setdefault(str(run.experiment), []).extend(read[(run.experiment, text)])
        except ValueError as exc:
            problems.append(f"run {shorten(str(run.run_id))} ({shorten(str(run.experiment))}): {exc}; left out")
    return Plan(title, {e: list(dict.fromkeys(k)) for e, k in keys.items()}, tuple(dict.fromkeys(node)),
                tuple(problems))


def _run_keys(experiment: str, text: str) -> list[tuple]:
    """The point keys a run's stored parameters (JSON text) measure; ValueError in one line when they cannot be
    read (not JSON, not an experiment's parameters, or too many points)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError(f"its parameters are not JSON ({shorten(text)})") from None
    requests = value if isinstance(value, list) else [value]
    try:
        module = registry.get_experiment(experiment)
        keys: list[tuple] = []
        for plain in requests:
            if not isinstance(plain, dict):
                raise ValidationError([f"{shorten(plain)} is not an object of parameters"])
            for key in module.parse_params(plain).points():
                keys.append(tuple(schema.key_value(v) for v in key))
                if len(keys) > MAX_RUN_POINTS:
                    raise ValidationError([f"they name over {MAX_RUN_POINTS:,} points"])
    except ValidationError as exc:
        raise ValueError(f"its parameters cannot be read: {shorten('; '.join(exc.reasons), 200)}") from None
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError, RecursionError) as exc:
        raise ValueError(f"its parameters cannot be read: {type(exc).__name__}: {shorten(str(exc), 120)}") from None
    return keys
