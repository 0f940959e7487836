"""Text that reaches a person: outside values made safe to show, and one style for counts.

Values from a URL, a file or the runs store are shortened and escaped before they reach a message, since
Streamlit renders messages as Markdown (links, images, ``:material/…:`` directives)."""

from __future__ import annotations

import re

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


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(value: object) -> str:
    """``value`` for a terminal: control characters (escape sequences that could move the cursor, retitle the
    window or clear the screen) shown as ``\\xNN``; tab and newline kept."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))
