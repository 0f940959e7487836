"""Text that reaches a person: outside values made safe to show, and one style for counts.

Values from a URL, a file or the runs store are shortened and escaped before they reach a message, since
Streamlit renders messages as Markdown (links, images, ``:material/…:`` directives)."""

from __future__ import annotations

import html
import math
import re
import string

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$=&\"'])")
_AUTOLINK = re.compile(r"(\\:(?=//)|(?i:www)(?=\\\.)|@)")


def shorten(value: object, limit: int = 40) -> str:
    """``value`` as one line of at most about ``limit`` characters, with an ellipsis and the full length
    when it was cut (a 10,000-character URL value is named, not printed)."""
    text = " ".join(str(value).split()) if not isinstance(value, str) else value.replace("\n", " ").replace("\r", " ")
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def plain(value: object, limit: int | None = 40) -> str:
    """``value`` shortened (unless ``limit`` is None) and escaped so Markdown shows it as typed: no link,
    image, emphasis or directive can come from it. Every ASCII punctuation mark gets a backslash, which
    CommonMark allows before any of them."""
    text = shorten(value, limit) if limit is not None else str(value)
    text = text.replace("\x00", "\\0")
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    # GitHub-flavoured Markdown turns bare URLs and e-mail addresses into links after escapes are read: an
    # invisible zero-width space after "://", "www" and "@" keeps them text.
    return _AUTOLINK.sub("\\1\u200b", text)


def chart_text(value: object) -> str:
    """``value`` for any text Plotly draws (trace and legend names, titles, hover text and ``customdata`` shown
    in it, annotations, category tick labels): ``& < >`` as entities, so its pseudo-HTML (``<a href>``, ``<b>``,
    ``<br>``) shows as typed and never becomes a link or a tag. Plotly turns the entities back into the
    characters on screen. Use it for run content only; the chart's own markup stays markup."""
    return html.escape(str(value), quote=False)


def html_text(value: object) -> str:
    """``value`` for an HTML page (the review report): every markup character, quotes included, as an entity."""
    return html.escape(str(value), quote=True)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(value: object) -> str:
    """``value`` for a terminal: control characters (escape sequences that could move the cursor, retitle the
    window or clear the screen) shown as ``\\xNN``; tab and newline kept."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


# --- one style for counts, percentages, ratios and durations -------------------------------------------------
# Percent: a space before the sign ("93 %", as SI writes it) and a true minus ("−18 %"). Counts: the noun agrees
# with the number ("1 chunk", "4 streams"), never "stream(s)". Durations: µs below 0.1 ms, ms below 1 s, else s.
MINUS = "−"
_IRREGULAR_PLURALS = {"process": "processes", "index": "indices", "x": "x"}


def plural(noun: str, count: float) -> str:
    """``noun`` agreeing with ``count``: plural(“stream”, 4) → “streams”, plural(“chunk”, 1) → “chunk”."""
    if count == 1:
        return noun
    head, _, last = noun.rpartition(" ")
    word = _IRREGULAR_PLURALS.get(last) or (last[:-1] + "ies" if last.endswith("y") and last[-2:-1] not in "aeiou"
                                            else last + "es" if last.endswith(("s", "sh", "ch")) else last + "s")
    return f"{head} {word}" if head else word


def count(number: float, noun: str) -> str:
    """“1 run”, “4 streams”, “1,024 chunks”: the number (thousands grouped) and the noun that agrees with it."""
    shown = f"{int(number):,}" if float(number).is_integer() else f"{number:,}"
    return f"{shown} {plural(noun, number)}"


def percent(fraction: float, digits: int = 0, signed: bool = False) -> str:
    """A fraction as a percentage in the one style: 0.93 → “93 %”, signed −0.18 → “−18 %”; NaN → “—”."""
    if fraction != fraction:
        return "—"
    text = f"{fraction * 100:{'+' if signed else ''}.{digits}f} %"
    return text.replace("-", MINUS)


def times(ratio: float, digits: int = 1) -> str:
    """A ratio as “7.0×” (never “less than”: a smaller figure is said as the larger one's ratio to it)."""
    return f"{ratio:,.{digits}f}×"


def duration_ms(ms: float, digits: int = 3) -> str:
    """A duration given in ms, in the unit that reads best: “3.70 µs” below 0.1 ms, “1.23 ms”, “2.50 s”."""
    if ms != ms:
        return "—"
    value, unit = (ms * 1e3, "µs") if abs(ms) < 0.1 else (ms, "ms") if abs(ms) < 1000 else (ms / 1e3, "s")
    return f"{significant(value, digits)} {unit}"


def significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits, trailing zeros kept (6.70, 12.3, 100, 0.123, 1,234)."""
    if value == 0 or value != value or math.isinf(value):
        return f"{value:g}"
    decimals = max(digits - 1 - math.floor(math.log10(abs(value))), 0)
    return f"{value:,.{decimals}f}"


def p_value(p: float) -> str:
    """A test's p-value as people read it: “< 0.001” (never “0”), “0.042”, “0.31”; NaN → “—”."""
    if p != p:
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.2g}" if p >= 0.01 else f"{p:.3f}"


class _StyledFormatter(string.Formatter):
    """``str.format`` whose percent fields follow the one style: ``{cost:.1%}`` gives “3.1 %”, not “3.1%”."""

    def format_field(self, value, format_spec: str) -> str:
        if format_spec.endswith("%") and isinstance(value, int | float):
            digits = format_spec.rstrip("%").lstrip("+").lstrip(".") or "0"
            return percent(value, int(digits), signed=format_spec.startswith("+"))
        return super().format_field(value, format_spec)


def format_fields(template: str, values: dict) -> str:
    """A template's ``{fields}`` filled in from ``values`` (as ``str.format``), percentages in the one style."""
    return _StyledFormatter().format(template, **values)
