"""KeyLines: the line of each key path of a TOML text, from tree-sitter's syntax tree; tomllib reads the values."""

import tomllib

import pytest

from gpu.core.toml_lines import KeyLines

TEXT = """\
title = "t"  # [[a]]
[[a]]
x = 1
[[a.b]]
y = 2
[[a.b]]
"y" = 3
[[a]]
[a.c]
'z.w' = { "\\u0041" = 4, in = { deep = 5 } }  # } 6
p.q.r = 6
[[a.b]]
list = [{ k = 7 }, [8], \"\"\"
[[a]]
s = 9
\"\"\"]
[e.f.g]
h = 10
"""


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_every_key_path_has_the_line_it_is_written_on(ending):
    text = TEXT.replace("\n", ending)
    tomllib.loads(text)  # valid TOML: KeyLines reads texts that tomllib accepted
    lines = KeyLines(text)
    assert lines.get("title") == 1
    assert (lines.get("a"), lines.get("a", 0), lines.get("a", 0, "x")) == (2, 2, 3)
    # each [[a.b]] is a new element of the last [[a]]'s array b
    assert (lines.get("a", 0, "b", 0, "y"), lines.get("a", 0, "b", 1), lines.get("a", 0, "b", 1, "y")) == (5, 6, 7)
    assert lines.get("a", 1) == 8 and lines.get("a", 1, "c") == 9
    assert lines.get("a", 1, "c", "z.w") == 10 and lines.get("a", 1, "c", "z.w", "A") == 10  # quoted, escaped
    assert lines.get("a", 1, "c", "z.w", "in", "deep") == 10
    assert (lines.get("a", 1, "c", "p"), lines.get("a", 1, "c", "p", "q", "r")) == (11, 11)  # a dotted key
    assert lines.get("a", 1, "b", 0) == 12 and lines.get("a", 1, "b", 0, "list") == 13
    assert lines.get("a", 2) is None and lines.get("a", 1, "b", 0, "list", 0, "k") is None  # not entered: arrays
    assert (lines.get("e"), lines.get("e", "f", "g"), lines.get("e", "f", "g", "h")) == (17, 17, 18)
    assert lines.get("s") is None and lines.get("nowhere") is None


def test_a_key_keeps_the_first_line_it_appears_on():
    lines = KeyLines("[t]\nx.y = 1\nx.z = 2\n[t.w]\nv = 1\n")
    assert (lines.get("t"), lines.get("t", "x"), lines.get("t", "x", "z"), lines.get("t", "w")) == (1, 2, 3, 4)


def test_after_a_text_the_grammar_cannot_read_no_key_gets_a_line():
    # tomllib reads a line-ending backslash followed by spaces in a multi-line string; tree-sitter's grammar does not,
    # and the keys after that point could land in the wrong table
    text = 'a = 1\nb = """x \\  \ny"""\n[t]\nc = 2\n'
    assert tomllib.loads(text) == {"a": 1, "b": "x y", "t": {"c": 2}}
    lines = KeyLines(text)
    assert lines.get("a") == 1 and lines.get("t") is None and lines.get("t", "c") is None


def test_text_that_is_not_toml_or_not_utf8_raises_nothing():
    assert KeyLines('a = "\ud800"\nb = 1\n').get("b") == 2  # a lone surrogate: a str tomllib takes
    broken = KeyLines("[[a]\nx = [1,\n")
    assert broken.get("a", 0) is None
    assert KeyLines("").lines == {}


def test_threads_reading_at_once_each_get_their_own_lines():
    from concurrent.futures import ThreadPoolExecutor

    texts = [("\n" * n) + "[[a]]\n" + "".join(f"k{i} = {i}\n" for i in range(2000)) for n in range(16)]
    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(lambda text: KeyLines(text).get("a", 0, "k1999"), texts))
    assert found == [n + 2001 for n in range(16)]
