import re

import pytest

from gpu.core.units import GiB, KiB, MiB, SizeError, format_bytes, parse_size, parse_size_list


@pytest.mark.parametrize("text,expected", [
    ("4096", 4096), ("4KiB", 4 * KiB), ("4 kib", 4 * KiB), ("1.5MiB", 3 * MiB // 2), ("1GB", 10**9),
    ("256 MiB", 256 * MiB), ("16B", 16), ("0", 0),
])
def test_parse_size_reads_decimal_and_binary_units(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text,message", [
    ("abc", "is not a size"), ("4 parsecs", "unknown unit"), ("1.5B", "whole number"), ("-4KiB", "is not a size"),
])
def test_parse_size_explains_what_is_wrong(text, message):
    with pytest.raises(SizeError, match=message):
        parse_size(text)


def test_size_list_expands_power_of_two_ranges_and_sorts_unique():
    assert parse_size_list("1MiB, 4KiB:16KiB 8KiB") == [4 * KiB, 8 * KiB, 16 * KiB, MiB]
    with pytest.raises(SizeError, match="range"):
        parse_size_list("1MiB:4KiB")
    with pytest.raises(SizeError, match="no sizes"):
        parse_size_list(" , ")


def test_format_bytes_uses_binary_units():
    assert format_bytes(4 * KiB) == "4 KiB"
    assert format_bytes(GiB) == "1 GiB"
    assert format_bytes(3 * MiB // 2) == "1.5 MiB"
    assert format_bytes(16) == "16 B"


@pytest.mark.parametrize("text,message", [
    ("1" * 10_000, "far too large"), ("x" * 10_000, "(10,000 characters)' is not a size"),
    ("<script>alert(1)</script>", "is not a size"), ("-4KiB", "is not a size"),
])
def test_outlandish_sizes_get_a_one_line_reason_that_names_them_shortened(text, message):
    with pytest.raises(SizeError, match=re.escape(message)) as caught:
        parse_size_list(text)
    assert len(str(caught.value)) < 160 and "\n" not in str(caught.value)


def test_long_sizes_are_read_exactly():
    assert parse_size("12345678901234567") == 12345678901234567 and parse_size("0.5KiB") == 512
