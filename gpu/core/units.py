"""Byte sizes: parsing what people type ("256 MiB", "1GB", "4096") and formatting for humans."""

from __future__ import annotations

import re
from fractions import Fraction

from gpu.core.errors import SizeError
from gpu.core.text import shorten

KiB = 1024
MiB = 1024**2
GiB = 1024**3

_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "ki": KiB, "kib": KiB, "mi": MiB, "mib": MiB, "gi": GiB, "gib": GiB,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str) -> int:
    """Bytes in ``text``: a number with an optional unit (B, KB/MB/GB = 10^3n, KiB/MiB/GiB = 2^10n)."""
    match = _SIZE.match(str(text))
    if not match:
        raise SizeError(f"'{shorten(text)}' is not a size: write a number with an optional unit, e.g. 4KiB, 256MiB, "
                        "1GB")
    number, unit = match.groups()
    if len(number) > 30:  # far beyond any memory (10^30 B); also keeps a pasted wall of digits cheap to refuse
        raise SizeError(f"'{shorten(text)}' is far too large for a size")
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise SizeError(f"'{shorten(text)}': unknown unit '{shorten(unit)}' (use B, KiB, MiB, GiB, KB, MB or GB)")
    value = Fraction(number) * factor  # exact: no float rounding or overflow for long numbers
    if value.denominator != 1:
        raise SizeError(f"'{shorten(text)}' is not a whole number of bytes")
    return int(value)


def parse_size_list(text: str) -> list[int]:
    """Sizes separated by commas or spaces; ``a:b`` expands to every power of two from a to b."""
    sizes: list[int] = []
    for token in re.split(r"[,\s]+", text.strip()):
        if not token:
            continue
        if ":" in token:
            low_text, high_text = token.split(":", 1)
            low, high = parse_size(low_text), parse_size(high_text)
            if low <= 0 or high < low:
                raise SizeError(f"'{shorten(token)}': a range needs 0 < start <= end")
            size = low
            while size <= high:
                sizes.append(size)
                size *= 2
        else:
            sizes.append(parse_size(token))
    if not sizes:
        raise SizeError("no sizes given")
    return sorted(set(sizes))


def format_bytes(n: float) -> str:
    """Binary units, as the sliders show them: 4 KiB, 1.5 MiB, 1 GiB."""
    n = float(n)
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= factor:
            value = n / factor
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.3g} {unit}"
    return f"{n:.0f} B"
