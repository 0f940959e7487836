"""The words of a point's conditions, read back the one way every page, Compare and check read them."""

import math

from gpu.core import conditions


def test_only_a_watched_clean_point_is_clean():
    assert conditions.is_clean("clean")
    import pandas as pd

    assert conditions.causes(pd.NA) == [] and conditions.summary([pd.NA]) == "not observed"
    for value in (None, math.nan, pd.NA, "", "not observed", "shared with pid 7 (python3) for 40 % of samples"):
        assert not conditions.is_clean(value)
    assert conditions.is_observed("clean") and conditions.is_observed("SW power cap in 38 % of samples")
    assert not conditions.is_observed("not observed") and not conditions.is_observed(None)


def test_causes_round_trip_through_their_text():
    found = ["shared with pid 1039 (python3) for 100 % of samples", "PCIe Gen4 ×8 of Gen5 ×16"]
    text = conditions.join(found)
    assert conditions.causes(text) == found
    assert conditions.join([]) == "clean" and conditions.causes("clean") == []
    assert conditions.join(["a", "a", " "]) == "a"


def test_a_summary_names_each_cause_once_and_never_calls_unwatched_points_clean():
    assert conditions.summary(["clean", "clean"]) == "clean"
    assert conditions.summary(["clean", None]) == "not observed"
    assert conditions.summary([]) == "not observed"
    assert conditions.summary(["clean", "a; b", "b"]) == "a; b"
