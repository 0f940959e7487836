"""gpu/core/text.py: outside values made safe to show, and the one style for counts, percentages, ratios and times."""

import math

import pytest

from gpu.core import text


@pytest.mark.parametrize("number,noun,expected", [
    (1, "run", "1 run"), (4, "stream", "4 streams"), (1, "chunk", "1 chunk"), (0, "chunk", "0 chunks"),
    (1024, "chunk", "1,024 chunks"), (2, "process", "2 processes"), (3, "entry", "3 entries"), (2, "key", "2 keys"),
    (2, "more problem", "2 more problems"), (2.0, "run", "2 runs"), (1.5, "float", "1.5 floats"),
])
def test_counts_agree_with_their_noun(number, noun, expected):
    assert text.count(number, noun) == expected


@pytest.mark.parametrize("fraction,kwargs,expected", [
    (0.93, {}, "93 %"), (0.031, {"digits": 1}, "3.1 %"), (-0.18, {"signed": True}, "−18 %"),
    (0.052, {"digits": 1, "signed": True}, "+5.2 %"), (1.14, {}, "114 %"), (math.nan, {}, "—"),
])
def test_percentages_have_one_style(fraction, kwargs, expected):
    assert text.percent(fraction, **kwargs) == expected


@pytest.mark.parametrize("ms,expected", [
    (0.0037, "3.70 µs"), (0.0999, "99.9 µs"), (0.1234, "0.123 ms"), (12.345, "12.3 ms"), (2500.0, "2.50 s"),
    (0.1, "0.100 ms"), (350.0, "350 ms"), (4321.0, "4.32 s"), (0.0, "0 µs"),
    (math.nan, "—"),
])
def test_durations_use_microseconds_below_a_tenth_of_a_millisecond(ms, expected):
    assert text.duration_ms(ms) == expected


@pytest.mark.parametrize("p,expected", [(0.0, "< 0.001"), (1e-12, "< 0.001"), (0.0042, "0.004"), (0.042, "0.042"),
                                        (0.31, "0.31"), (math.nan, "—")])
def test_p_values_are_never_shown_as_zero(p, expected):
    assert text.p_value(p) == expected


def test_ratios_are_said_as_times_never_less_than():
    assert text.times(7.04) == "7.0×" and text.times(684.2, 0) == "684×" and text.times(1234.5, 0) == "1,234×"


def test_template_fields_follow_the_style():
    line = text.format_fields("{verdict}: costs {cost:.1%}, efficiency {e:.0%}, {x:,.0f}× at {size}",
                              {"verdict": "False", "cost": 0.031, "e": 0.85, "x": 684.2, "size": "1 GiB"})
    assert line == "False: costs 3.1 %, efficiency 85 %, 684× at 1 GiB"
    assert text.format_fields("{change:+.0%}", {"change": -0.18}) == "−18 %"


def test_outside_values_are_shortened_and_shown_as_typed():
    long = "x" * 10_000
    assert text.shorten(long) == "x" * 40 + "… (10,000 characters)"
    assert text.shorten("a\nb") == "a b"
    escaped = text.plain("[a](http://x.example) *b* :material/home:", None)
    # every mark escaped, and an invisible space after "://" so no bare URL becomes a link
    assert escaped == "\\[a\\]\\(http\\:\u200b//x\\.example\\) \\*b\\* \\:material/home\\:"
    assert text.plain(long).endswith("… \\(10,000 characters\\)")
