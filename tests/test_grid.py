"""The point grid declared once (gpu.experiments.grid): the product in declared order, ties, derived values,
exclusions skipped with their reasons, duplicates kept once, empty axes, and the Params it generates."""

import copy
import pickle

import pytest

from gpu.experiments import axes
from gpu.experiments.grid import Coordinate, Exclude, Grid, GridPoint, skipped_summary

AXES = (
    axes.Axis("sizes", "sizes", [4, 8], kind="sizes", may_be_empty=True),
    axes.Axis("modes", "modes", ["a", "b"], values=("a", "b", "c")),
    axes.Axis("elements", "elements", 64, kind="int"),
)


class Plain(axes.parameters(AXES, grid=Grid([Coordinate("bytes", axis="sizes")]), key_columns=["bytes"])):
    """Parameters the tests below walk their own grids over."""


def keys(points, columns):
    return [p.key(columns) for p in points]


def test_the_product_is_walked_outermost_first_and_a_scalar_axis_is_its_one_value():
    grid = Grid([Coordinate("bytes", axis="sizes"), Coordinate("variant", axis="modes"),
                 Coordinate("elements", axis="elements")])
    points, skipped = grid.walk(Plain(sizes=[4, 8, 16], modes=["b", "a"]))
    assert keys(points, ["variant", "bytes", "elements"]) == [
        ("b", 4, 64), ("a", 4, 64), ("b", 8, 64), ("a", 8, 64), ("b", 16, 64), ("a", 16, 64)]
    assert skipped == [] and grid.count(Plain()) == 4
    assert list(points[0]) == ["bytes", "variant", "elements"]  # the point's columns in coordinate order


def test_a_tie_takes_its_values_from_the_params_and_the_coordinates_before_it():
    grid = Grid([Coordinate("variant", axis="modes"),
                 Coordinate("stride", values=lambda params, point: params.sizes if point["variant"] == "a"
                            else [params.elements] if point["variant"] == "b" else [0])])
    points, _ = grid.walk(Plain(sizes=[4, 8], modes=["c", "b", "a"]))
    assert keys(points, ["variant", "stride"]) == [("c", 0), ("b", 64), ("a", 4), ("a", 8)]


def test_a_derived_value_is_computed_from_the_coordinates_before_it_and_a_walk_only_coordinate_is_no_key():
    grid = Grid([Coordinate("method", values=lambda params, point: ["single", "batched"], key=False),
                 Coordinate("variant", axis="modes"),
                 Coordinate("timer", derive=lambda point: f"{point['method']}-{point['variant']}")])
    points, _ = grid.walk(Plain(modes=["a"]))
    assert grid.key_columns == ("variant", "timer")
    assert [dict(p) for p in points] == [{"method": "single", "variant": "a", "timer": "single-a"},
                                         {"method": "batched", "variant": "a", "timer": "batched-a"}]


def test_an_excluded_point_is_skipped_with_its_reason_never_silently_dropped():
    grid = Grid([Coordinate("bytes", axis="sizes"), Coordinate("variant", axis="modes")],
                [Exclude(lambda p: p["variant"] == "b" and p["bytes"] > 4, "b needs small sizes"),
                 Exclude(lambda p: p["variant"] == "b", "never reached for b at 4 B: the first reason wins")])
    params = Plain(sizes=[4, 8, 16])
    points, skipped = grid.walk(params)
    assert keys(points, ["variant", "bytes"]) == [("a", 4), ("a", 8), ("a", 16)]
    assert [(p.key(["variant", "bytes"]), reason) for p, reason in skipped] == [
        (("b", 4), "never reached for b at 4 B: the first reason wins"), (("b", 8), "b needs small sizes"),
        (("b", 16), "b needs small sizes")]
    assert skipped_summary(skipped) == ["1 point skipped: never reached for b at 4 B: the first reason wins",
                                        "2 points skipped: b needs small sizes"]


def test_a_repeated_key_is_kept_once_at_its_first_place():
    # a reference point declared first, then every combination, which includes it again
    grid = Grid([Coordinate("bytes", axis="sizes"),
                 Coordinate(("variant", "stride"),
                            values=lambda params, point: [("a", 1)] + [(m, s) for m in params.modes for s in (1, 2)])])
    points, _ = grid.walk(Plain(sizes=[4], modes=["a", "b"]))
    assert keys(points, ["variant", "bytes", "stride"]) == [("a", 4, 1), ("a", 4, 2), ("b", 4, 1), ("b", 4, 2)]


def test_an_empty_axis_or_tie_gives_no_points_and_no_error():
    grid = Grid([Coordinate("variant", axis="modes"), Coordinate("bytes", axis="sizes")])
    assert grid.walk(Plain(sizes=[])) == ([], [])
    tie = Grid([Coordinate("variant", axis="modes"),
                Coordinate("bytes", values=lambda params, point: params.sizes if point["variant"] == "a" else [])])
    assert keys(tie.walk(Plain(sizes=[8]))[0], ["variant", "bytes"]) == [("a", 8)]


def test_a_coordinate_says_where_its_values_come_from_once_and_a_column_is_given_once():
    with pytest.raises(ValueError, match="one of axis, values or derive"):
        Coordinate("bytes", axis="sizes", derive=lambda p: 1)
    with pytest.raises(ValueError, match="one of axis, values or derive"):
        Coordinate("bytes")
    with pytest.raises(ValueError, match="column bytes given by more than one coordinate"):
        Grid([Coordinate("bytes", axis="sizes"), Coordinate("bytes", derive=lambda p: 1)])
    grid = Grid([Coordinate(("variant", "bytes"), values=lambda params, point: [("a", 1, 2)])])
    with pytest.raises(ValueError, match="does not have 2 parts"):
        grid.walk(Plain())


def test_a_grid_point_is_an_immutable_mapping():
    point = GridPoint({"variant": "a", "bytes": 4})
    assert point.key(["bytes", "variant"]) == (4, "a") and dict(point) == {"variant": "a", "bytes": 4}
    assert point == GridPoint([("variant", "a"), ("bytes", 4)]) and hash(point) == hash(GridPoint(point))
    with pytest.raises(TypeError):
        point["bytes"] = 8
    with pytest.raises(AttributeError):
        point.extra = 1
    assert "GridPoint(variant='a', bytes=4)" == repr(point)
    assert pickle.loads(pickle.dumps(point)) == point and copy.deepcopy(point) == point


GRID = Grid([Coordinate("bytes", axis="sizes"), Coordinate("variant", axis="modes")],
            [Exclude(lambda p: p["variant"] == "c", "c cannot run")])


class Declared(axes.parameters(AXES, grid=GRID, key_columns=["variant", "bytes"])):
    pass


def test_parameters_with_a_grid_generate_points_grid_and_skipped():
    params = Declared(sizes=[8, 4], modes=["c", "a"])
    assert params.points() == [("a", 8), ("a", 4)]  # the key tuples, in KEY_COLUMNS order
    assert [dict(p) for p in params.grid()] == [{"bytes": 8, "variant": "a"}, {"bytes": 4, "variant": "a"}]
    assert [(dict(p), r) for p, r in params.skipped()] == [({"bytes": 8, "variant": "c"}, "c cannot run"),
                                                           ({"bytes": 4, "variant": "c"}, "c cannot run")]
    assert Declared().points() == [("a", 4), ("b", 4), ("a", 8), ("b", 8)]


def test_parameters_need_a_declared_grid():
    with pytest.raises(TypeError):
        axes.parameters(AXES)
    with pytest.raises(ValueError, match="need a declared grid"):
        axes.parameters(AXES, grid=None, key_columns=["variant", "bytes"])


def test_the_grid_and_the_key_columns_must_name_the_same_columns():
    with pytest.raises(ValueError, match="are not the key columns"):
        axes.parameters(AXES, grid=GRID, key_columns=["variant", "bytes", "timer"])
    with pytest.raises(ValueError, match="are not the key columns"):
        axes.parameters(AXES, grid=GRID, key_columns=["variant"])


def test_a_jobs_notes_and_the_runner_say_how_many_points_were_skipped_and_why():
    from gpu.experiments.grid import skipped_notes

    assert skipped_notes(Declared(sizes=[4, 8, 16], modes=["c", "a"])) == ["3 points skipped: c cannot run"]
    assert skipped_notes(Declared()) == []
