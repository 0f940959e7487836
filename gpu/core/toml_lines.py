"""The line of every key and table of a TOML text, as tree-sitter's TOML grammar reports it.

tomllib reads a TOML text's values but not where they sit; tree-sitter parses the same text into a syntax tree whose
every node knows its start. ``KeyLines(text)`` walks that tree once and keeps, for each key path, the line where the
key (or its table's header) first appears; the values still come from tomllib, the one value reader. A path is keys
and, for an array of tables, the element's index: ``("run", 1, "params", "sizes")`` is ``sizes`` in the second
``[[run]]`` table's parameters, whether it is written under ``[run.params]``, as ``params.sizes = …`` or inside
``params = { sizes = … }``. Arrays are not entered: keys inside an array's inline tables have no path here.

Lines count ``\\n`` as tomllib's error messages do, so a CRLF text has the same lines. Read a text that tomllib has
accepted: where tree-sitter's grammar still finds an error (it differs from TOML 1.0 in rare string escapes), only
the keys before that error are kept, as later ones could be placed under the wrong table.
"""

from __future__ import annotations

import tomllib
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a text is parsed: the suites' declarations import this, the CLI's help loads neither
    import tree_sitter

TABLES = ("table", "table_array_element")
KEYS = ("bare_key", "quoted_key", "dotted_key")


@cache
def _toml() -> tree_sitter.Language:
    import tree_sitter
    import tree_sitter_toml

    return tree_sitter.Language(tree_sitter_toml.language())


class KeyLines:
    """Each key path's line (1-based) in one TOML text."""

    def __init__(self, text: str):
        import tree_sitter

        # tomllib takes any str, a lone surrogate included: as "?", it still leaves every line where it was
        self.source = text.encode("utf-8", "replace")
        root = tree_sitter.Parser(_toml()).parse(self.source).root_node  # a parser each: pages run in threads
        self.end = _first_error(root) if root.has_error else len(self.source)
        self.lines: dict[tuple, int] = {}
        self.arrays: dict[tuple, int] = {}  # an array of tables' path → its count of elements so far
        for node in root.children:
            if node.start_byte >= self.end:
                break
            if node.type == "pair":
                self._pair(node, ())
            elif node.type in TABLES:
                self._table(node)

    def get(self, *path) -> int | None:
        """The line of ``path`` (keys, and indices into arrays of tables), or None when it is not in the text."""
        return self.lines.get(path)

    def _table(self, node) -> None:
        key = next((child for child in node.children if child.type in KEYS), None)
        keys = self._keys(key) if key is not None else None
        if not keys:
            return
        if node.type == "table_array_element":  # [[a.b]]: a new element of the array a.b
            array = self._resolved(keys[:-1]) + (keys[-1],)
            self._mark(array, node)
            count = self.arrays.get(array, 0)
            self.arrays[array] = count + 1
            path = array + (count,)
        else:
            path = self._resolved(keys)
        self._mark(path, node)
        for child in node.children:
            if child.type == "pair" and child.start_byte < self.end:
                self._pair(child, path)

    def _pair(self, node, table: tuple) -> None:
        parts = node.children  # the key, "=", the value and a comment, if one ends the line
        keys = self._keys(parts[0]) if len(parts) >= 3 and parts[0].type in KEYS else None
        if not keys:
            return
        path = table + tuple(keys)
        self._mark(path, parts[0], len(table))
        if parts[2].type == "inline_table":
            for child in parts[2].children:
                if child.type == "pair" and child.start_byte < self.end:
                    self._pair(child, path)

    def _resolved(self, keys: list[str]) -> tuple:
        """A header's keys as a path: each array of tables along it stands for its last element, as in TOML."""
        path: tuple = ()
        for key in keys:
            path += (key,)
            if path in self.arrays:
                path += (self.arrays[path] - 1,)
        return path

    def _mark(self, path: tuple, node, known: int = 0) -> None:
        """``path`` and the tables it implies (``a`` and ``a.b`` for ``a.b.c``; its first ``known`` parts are marked
        already) start at ``node``'s line at the latest: the first place each appears is kept."""
        line = node.start_point.row + 1
        for length in range(known + 1, len(path) + 1):
            self.lines.setdefault(path[:length], line)

    def _keys(self, node) -> list[str] | None:
        """A key's parts, unquoted (``a."b.c"`` is ``["a", "b.c"]``); None for one that cannot be read. Walked with a
        stack, not by recursion: tree-sitter nests a dotted key one level per part, however many parts it has."""
        keys: list[str] = []
        stack = [node]
        while stack:
            part = stack.pop()
            if part.type == "dotted_key":
                children = [child for child in part.children if child.type in KEYS]
                if not children:
                    return None
                stack.extend(reversed(children))
                continue
            key = self._key(part)
            if key is None:
                return None
            keys.append(key)
        return keys

    def _key(self, node) -> str | None:
        raw = self.source[node.start_byte:node.end_byte].decode("utf-8", "replace")
        if node.type == "bare_key":
            return raw
        if raw.startswith("'") or "\\" not in raw:  # a literal key, or a basic one without escapes: as written
            return raw[1:-1]
        try:  # a basic key's escapes, read by tomllib
            return next(iter(tomllib.loads(f"{raw} = 0")))
        except (tomllib.TOMLDecodeError, UnicodeError):
            return None


def _first_error(root) -> int:
    """The byte offset of the first node tree-sitter could not parse (or had to make up)."""
    node = root
    while True:
        child = next((c for c in node.children if c.is_error or c.is_missing or c.has_error), None)
        if child is None or child.is_error or child.is_missing:
            return (child or node).start_byte
        node = child


# --- the depth of tomllib's values, for a bound checked before anything walks the keys ------------------------
def deepest_path(data, within: int) -> tuple:
    """The longest path of keys (and array indices) in tomllib's values, found with a stack, not by recursion; ()
    when none is longer than ``within`` (the common case, found by depths alone)."""
    deepest = 0
    stack: list[tuple[int, object]] = [(0, data)]
    while stack:
        depth, value = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(value, dict):
            stack.extend((depth + 1, item) for item in value.values())
        elif isinstance(value, list):
            stack.extend((depth + 1, item) for item in value)
    if deepest <= within:
        return ()
    paths: list[tuple[tuple, object]] = [((), data)]  # again, with paths, to name the one that is too deep
    while paths:
        path, value = paths.pop()
        if len(path) == deepest:
            return path
        if isinstance(value, dict):
            paths.extend((path + (key,), item) for key, item in value.items())
        elif isinstance(value, list):
            paths.extend((path + (index,), item) for index, item in enumerate(value))
    return ()


def line_spelling(text: str, path: tuple) -> int:
    """The first line that spells the innermost keys of ``path`` (``y.z``, or ``z``); line 1 when none does."""
    keys = [part for part in path if isinstance(part, str)]
    for needle in (".".join(keys[-2:]), keys[-1] if keys else ""):
        for number, line in enumerate(text.splitlines(), start=1):
            if needle and needle in line.replace(" ", ""):
                return number
    return 1
