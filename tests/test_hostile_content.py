"""One escaping rule for run content, wherever it is shown: a stored run whose variant, device, host, label, notes
and run id hold Markdown links and HTML tags is opened on Compare (ratio chart, history chart), Runs, Memory modes
and in the review report; no element those pages draw carries a live link, image or tag from it (AppTest: the
Markdown source of messages and the Plotly specs of charts)."""

import json
import re

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from gpu.core import schema, text
from gpu.results.analysis import report
from gpu.results.exchange import catalog
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence.store import RunStore
from tests.test_app_reviews import APP

MANAGED = next(BUNDLED_DIRS[1].glob("managed_*.parquet"))
# Both kinds of markup a run's text could smuggle: Markdown (Streamlit) and Plotly's pseudo-HTML (charts, report).
TAG = '<a href="https://evil.example/t">tag</a><img src="https://evil.example/i.png"><b>bold</b>'
LINK = "[phish](https://evil.example/m)"
HOSTILE = f"{LINK} {TAG}"
LIVE_MARKUP = ("<a ", "<a>", "<img", "<b>bold", "<script", "](https")


def hostile_runs(store: RunStore) -> list[str]:
    """Two runs of one hostile device, a day apart, with one variant renamed to hostile text; their ids."""
    frame = schema.read_results(MANAGED)
    first_variant = frame["variant"].iloc[0]
    frame["variant"] = frame["variant"].where(frame["variant"] != first_variant, HOSTILE)
    frame["device_name"] = HOSTILE
    frame["host"] = HOSTILE
    ids = ["evil<a>1", "evil<a>2"]
    for day, run_id in enumerate(ids):
        stamped = frame.assign(run_id=run_id, timestamp=f"2026-11-2{day + 1}T10:00:00+00:00")
        store.save(stamped, "import", label=HOSTILE, notes=HOSTILE)
    return ids


def strings(node):
    """Every string in a chart spec (names, titles, hover templates, custom data, tick text, annotations)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)


def assert_no_live_markup(values, reached: bool = True) -> None:
    """No value holding the hostile text keeps a tag or a Markdown link live; ``reached``: some value shows it
    (escaped), so the check did see the run's text."""
    hits = [v for v in values if "evil.example" in v]
    assert hits or not reached, "the hostile text never reached this element"
    for value in hits:
        assert not any(mark in value for mark in LIVE_MARKUP if mark != "](https"), value


def chart_specs(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def markdown_sources(at) -> list[str]:
    kinds = ("markdown", "caption", "error", "warning", "info", "success", "subheader", "header", "title")
    return [element.value for kind in kinds for element in at.get(kind) if isinstance(element.value, str)]


def assert_plain_markdown(sources: list[str], reached: bool = True) -> None:
    hits = [s for s in sources if "evil.example" in s or "evil\u200b" in s or r"evil\.example" in s]
    assert hits or not reached, "the hostile text never reached a message"
    for source in hits:
        live = re.sub(r"\\.", "_", source)  # a backslash-escaped mark is shown as typed: only the rest can act
        assert "](" not in live and "![" not in live and "<a" not in live and "<img" not in live, source


@pytest.fixture
def hostile_store(monkeypatch, tmp_path):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_DB_URL", f"sqlite:///{tmp_path}/runs.sqlite")
    st.cache_resource.clear()
    st.cache_data.clear()
    store = RunStore(f"sqlite:///{tmp_path}/runs.sqlite")
    yield store, hostile_runs(store)
    st.cache_resource.clear()
    st.cache_data.clear()


def test_chart_text_escapes_plotly_markup_and_html_text_escapes_quotes():
    assert text.chart_text(TAG).startswith("&lt;a href=\"https://evil.example/t\"&gt;")
    assert "<" not in text.chart_text(TAG) and ">" not in text.chart_text(TAG)
    assert text.chart_text("a & b") == "a &amp; b"
    assert text.html_text('"x" <y>') == "&quot;x&quot; &lt;y&gt;"


@pytest.mark.slow
def test_compare_ratio_and_history_charts_and_messages_carry_no_live_markup(hostile_store):
    _, (first, second) = hostile_store
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/compare.py").run()
    at.selectbox(key="compare_experiment").set_value("managed").run()
    at.selectbox(key="compare_baseline").set_value(first).run()
    at.multiselect(key="compare_candidates").set_value([second]).run()
    at.selectbox(key="compare_history_device").set_value(HOSTILE).run()
    assert not at.exception, at.exception
    specs = chart_specs(at)
    assert len(specs) >= 2  # the ratio chart and the history chart
    ratio, history = specs[0], specs[-1]
    assert any("&lt;a href" in name for name in (t.get("name", "") for t in ratio["data"]))  # a legend entry
    assert "&lt;a href" in history["layout"]["title"]["text"]
    for spec in specs:
        assert_no_live_markup(list(strings(spec)))
    assert_plain_markdown(markdown_sources(at))


def test_memory_modes_opened_with_a_hostile_run_shows_its_reasons_and_title_as_text(hostile_store):
    _, (first, _) = hostile_store
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["run"] = first
    at.run()
    at.switch_page("pages/memory_modes.py").run()
    assert not at.exception, at.exception
    assert_plain_markdown(markdown_sources(at))
    for spec in chart_specs(at):
        assert_no_live_markup(list(strings(spec)), reached=False)


@pytest.mark.slow
def test_runs_page_shows_a_hostile_run_as_text(hostile_store):
    _, (first, _) = hostile_store
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/runs.py").run()
    at.selectbox(key="runs_selected").set_value(first).run()
    assert not at.exception, at.exception
    assert_plain_markdown(markdown_sources(at))


def test_the_review_report_escapes_run_content_in_the_page_and_in_its_charts(hostile_store):
    store, (first, second) = hostile_store
    runs = catalog.Catalog(store)
    page = report.render(runs.load(first), [runs.load(second)])
    assert "evil.example" in page
    # Neither in the page's HTML nor in the JSON of its charts (where a quote reads \") is a tag left live.
    # Plotly writes a chart's JSON with < as \u003c and / as \u002f: the browser reads them back as < and /.
    decoded = page.replace("\\u003c", "<").replace("\\u003e", ">").replace("\\u002f", "/").replace('\\"', '"')
    assert not re.search(r'<(a href|img src)="https://evil', decoded)
    assert '"name":"[phish](https://evil.example/m) &lt;a href="https://evil' in decoded  # a legend entry, as text
    assert "<b>bold" not in decoded
