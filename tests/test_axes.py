"""The axis builder (gpu/experiments/axes.py): Params, parse_params, the generic checks and the runner's flags all come
from one declaration per axis, so each default and limit is written once."""

import argparse
import dataclasses

import pytest

from gpu.core.errors import ValidationError
from gpu.core.limits import Limits
from gpu.core.units import KiB, MiB
from gpu.experiments import axes, registry
from gpu.experiments.grid import Coordinate, Grid

AXES = (
    axes.Axis("sizes", "buffer sizes", [4 * KiB, 1 * MiB], kind="sizes", one="size", low=4, high=64 * MiB,
              multiple_of=4, why="whole words", unit="bytes"),
    axes.Axis("blocks", "block sizes", [256], kind="ints", one="block size", low=32, high=1024, multiple_of=32,
              limit="max_threads_per_block"),
    axes.Axis("elements", "elements", 1 << 20, kind="int", one="elements", low=1 << 10, high=1 << 24,
              power_of_two=True),
    axes.Axis("modes", "modes", ["fast", "slow"], values=("fast", "slow", "odd")),
    axes.Axis("order", "orders", ["b", "a"], values=("a", "b", "c"), order="declared"),
    axes.Axis("whole", "the whole range", False, kind="bool"),
    axes.Axis("extra", "extra points", True, kind="off_switch", cli_flag="--no-extra"),
)


GRID = Grid([Coordinate("bytes", axis="sizes"), Coordinate("elements", axis="elements")])


class Params(axes.parameters(AXES, grid=GRID, key_columns=["bytes", "elements"])):
    pass


parse = axes.parser(Params)
SMALL_DEVICE = Limits(1 << 30, 1 << 30, 1 << 30, 1 << 30, 512, 32)


def test_params_have_one_field_per_axis_with_its_default_plus_the_profile():
    params = Params()
    assert [f.name for f in dataclasses.fields(params)] == [a.name for a in AXES] + ["profile"]
    assert params.sizes == [4 * KiB, 1 * MiB] and params.blocks == [256] and params.elements == 1 << 20
    assert params.whole is False and params.extra is True and params.profile == "interactive"
    assert Params().sizes is not Params().sizes  # each instance its own list
    assert list(params.points()) == [(4 * KiB, 1 << 20), (1 * MiB, 1 << 20)]
    assert axes.reasons(params, None) == []


def test_parse_params_converts_and_normalises_each_axis_as_declared():
    params = parse({"sizes": [MiB, 4 * KiB, MiB], "blocks": ["512", 128.0], "elements": "4096",
                    "modes": ["slow", "fast", "slow"], "order": ["c", "a"], "whole": 1, "profile": "precise"})
    assert params.sizes == [4 * KiB, MiB]  # sorted, each once
    assert params.blocks == [128, 512]  # whole floats and digit strings are numbers
    assert params.elements == 4096
    assert params.modes == ["slow", "fast"]  # words keep the order given, each once
    assert params.order == ["a", "c"]  # "declared": in the axis' own order
    assert params.whole is True and params.profile == "precise"


@pytest.mark.parametrize("raw,message", [
    ({"sizs": [4]}, "unknown parameter: sizs"),
    ({"sizes": [1.5]}, "buffer sizes must be whole numbers, not [1.5]"),
    ({"sizes": "4KiB"}, "buffer sizes must be whole numbers, not '4KiB'"),
    ({"blocks": [True]}, "block sizes must be whole numbers"),
    ({"elements": "many"}, "elements must be a whole number, not 'many'"),
    ({"modes": "fast"}, "modes must be a list of words"),
])
def test_a_value_of_the_wrong_type_is_refused_naming_it(raw, message):
    with pytest.raises(ValidationError) as refused:
        parse(raw)
    assert any(message in reason for reason in refused.value.reasons), refused.value.reasons


@pytest.mark.parametrize("raw,message", [
    ({"sizes": []}, "choose at least one size"),
    ({"sizes": [2]}, "size 2 B must be from 4 B to 64 MiB"),
    ({"sizes": [128 * MiB]}, "size 128 MiB must be from 4 B to 64 MiB"),
    ({"sizes": [4098]}, "size 4098 B is not a multiple of 4 B (whole words)"),
    ({"blocks": [16]}, "block size 16 must be from 32 to 1024"),
    ({"blocks": [100]}, "block size 100 is not a multiple of 32"),
    ({"elements": 1000}, "elements 1000 must be a power of two from 1024 to 16777216"),
    ({"elements": 1 << 25}, "elements 33554432 must be a power of two from 1024 to 16777216"),
    ({"modes": ["warp"]}, "unknown mode 'warp' (known: fast, slow, odd)"),
    ({"modes": ["<b>" * 100]}, "unknown mode '<b><b>"),
    ({"profile": "turbo"}, "unknown profile 'turbo'"),
])
def test_each_bad_value_gets_its_reason(raw, message):
    found = axes.reasons(parse(raw), None)
    assert any(message in reason for reason in found), found


def test_a_long_hostile_value_is_shortened_in_its_reason():
    [reason] = axes.reasons(parse({"modes": ["x" * 5000]}), None)
    assert len(reason) < 300


def test_a_device_limit_lowers_an_axis_high_end():
    params = parse({"blocks": [1024]})
    assert axes.reasons(params, None) == []
    assert axes.reasons(params, SMALL_DEVICE) == ["block size 1024 must be from 32 to 512"]


def test_the_runners_flags_come_from_the_axes_with_their_defaults():
    entry = registry.Entry(module=None, command="demo", help="", page="", arguments=AXES)
    parser = argparse.ArgumentParser()
    registry.add_arguments(parser, entry)
    parser.add_argument("--profile", default="precise")
    help_text = parser.format_help()
    assert "--sizes" in help_text and "--no-extra" in help_text and "(default: 4KiB,1MiB)" in help_text

    [defaults] = registry.runner_jobs(entry, parser.parse_args([]))
    assert defaults == {"sizes": [4 * KiB, MiB], "blocks": [256], "elements": 1 << 20, "modes": ["fast", "slow"],
                        "order": ["b", "a"], "whole": False, "extra": True, "profile": "precise"}
    [given] = registry.runner_jobs(entry, parser.parse_args(
        ["--sizes", "8KiB:32KiB", "--blocks", "64:256:64", "--elements", "2^12", "--modes", "odd",
         "--whole", "--no-extra"]))
    assert given["sizes"] == [8 * KiB, 16 * KiB, 32 * KiB] and given["blocks"] == [64, 128, 192, 256]
    assert given["elements"] == 4096 and given["modes"] == ["odd"] and given["whole"] is True
    assert given["extra"] is False
    assert parse({k: v for k, v in given.items()}).sizes == [8 * KiB, 16 * KiB, 32 * KiB]


def test_every_registered_experiment_is_declared_through_the_axes():
    for entry in registry.REGISTRY:
        module = entry.module
        assert issubclass(module.Params, axes.Parameters), entry.name
        assert module.Params.AXES == module.AXES, entry.name
        assert axes.reasons(module.parse_params({}), None) == [], entry.name  # the defaults are valid
        # the default grid, on the fewest GPUs the experiment measures (a peer grid names the worker's device set)
        on_set = getattr(module, "with_devices", lambda params, _ordinals: params)
        assert list(on_set(module.parse_params({}), list(range(getattr(module, "MIN_GPUS", 1)))).points()), entry.name
