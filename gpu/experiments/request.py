"""A checked request: an experiment's typed parameters, parsed once from plain values and checked once against the
limits of the device that will measure them (those its worker reported). The page, the runner and a fleet task build
one (``checked_request``); it crosses to the worker as it is, and the worker trusts it: it never parses it again
and re-checks only what can have changed since (the memory free now, ``memory_reasons``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gpu.core.errors import ValidationError
from gpu.core.limits import Limits
from gpu.experiments import registry


@dataclass(frozen=True)
class Request:
    """``experiment``'s typed ``params`` (its declaration's ``Params``), checked against ``limits`` (None: checked
    against no device, as replay and suites do)."""

    experiment: str
    params: Any
    limits: Limits | None = None

    @property
    def profile(self) -> str:
        return self.params.profile

    def plain(self) -> dict:
        """The parameters as plain values (what ``checked_request`` takes back): for links and the runs store."""
        return dataclasses.asdict(self.params)


def checked_request(experiment: str, raw: dict, limits: Limits | None) -> Request:
    """``raw`` (plain values: widgets, flags, a suite's table) parsed and checked against ``limits`` once; a
    ``ValidationError`` with every reason when they cannot run there."""
    module = registry.get_experiment(experiment)
    params = module.parse_params(raw)
    reasons = module.invalid_reasons(params, limits)
    if reasons:
        raise ValidationError(reasons)
    return Request(module.NAME, params, limits)


def on_device(checked: Request, limits: Limits) -> Request:
    """``checked`` (checked against no device: a suite's run, read before any GPU is known) checked against a
    device's ``limits``: its typed parameters are not parsed again; a ``ValidationError`` when they cannot run
    there."""
    reasons = registry.get_experiment(checked.experiment).invalid_reasons(checked.params, limits)
    if reasons:
        raise ValidationError(reasons)
    return dataclasses.replace(checked, limits=limits)


def check_params(experiment: str, raw: dict, limits: Limits | None) -> list[str]:
    """Every reason ``raw`` cannot run against ``limits`` (none when it can), before anything is allocated:
    ``checked_request``'s refusal, for a widget or a suite that only asks."""
    try:
        checked_request(experiment, raw, limits)
    except ValidationError as exc:
        return exc.reasons
    return []


def memory_reasons(experiment: str, params, limits: Limits) -> list[str]:
    """What can have changed since a request was checked: whether its buffers still fit in the memory free now
    (the declaration's ``memory_reasons``; none for an experiment that declares no memory needs)."""
    check = getattr(registry.get_experiment(experiment), "memory_reasons", None)
    return check(params, limits) if check is not None else []
