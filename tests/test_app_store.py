"""Values from a link, a file or the store reach the pages as plain text (AppTest: the Markdown source of each
message is escaped), disjoint runs are explained on Compare, and a store that never answers gets one line."""

import socket

import pytest
import streamlit as st

from gpu.core import schema
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence.store import RunStore
from tests.test_url_state import open_with

MANAGED = next(BUNDLED_DIRS[1].glob("managed_*.parquet"))
TRANSFERS = next(BUNDLED_DIRS[1].glob("transfers_nvidia-h100*.parquet"))
PAYLOAD = "[phish](https://evil.example/x) ![x](https://evil.example/p.png) :material/home: **bold**"


@pytest.fixture(autouse=True)
def fresh_store(monkeypatch, tmp_path):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_DB_URL", f"sqlite:///{tmp_path}/runs.sqlite")
    st.cache_resource.clear()
    yield RunStore(f"sqlite:///{tmp_path}/runs.sqlite")
    st.cache_resource.clear()


open_page = open_with  # the page opened with its link's parameters, as the link tests do


def assert_plain(markdown: str, whole: bool = True) -> None:
    """No link, image, emphasis or icon can be drawn from the payload: each mark is backslash-escaped (a value
    shortened to about 40 characters keeps only its start)."""
    assert r"\[phish\]\(https\:" in markdown and r"\!\[x\]" in markdown
    if whole:
        assert r"\:material/home\:" in markdown and r"\*\*bold\*\*" in markdown
    for live in ("](", "![", " :material", " **bold"):
        assert live not in markdown, markdown


def test_a_run_id_from_the_address_is_shown_as_text():
    at = open_page("pages/transfers.py", run=PAYLOAD)
    [warning] = [w.value for w in at.warning if "from the address cannot be shown" in w.value]
    assert_plain(warning, whole=False)


def test_an_ignored_compare_link_value_is_shown_as_text():
    at = open_page("pages/compare.py", compare_baseline=PAYLOAD)
    [warning] = [w.value for w in at.warning if w.value.startswith("Not used as written in this link")]
    assert_plain(warning, whole=False)  # shortened to about 40 characters, and escaped


@pytest.mark.slow
def test_run_notes_and_ids_on_the_runs_page_are_shown_as_text(fresh_store):
    fresh_store.save(schema.read_results(MANAGED).assign(run_id="notes01"), "import", label=PAYLOAD, notes=PAYLOAD)
    at = open_page("pages/runs.py")
    at.selectbox(key="runs_selected").set_value("notes01").run()
    [notes] = [m.value for m in at.markdown if m.value.startswith("**Notes:**")]
    assert_plain(notes)


@pytest.mark.slow
def test_compare_of_disjoint_runs_says_why_without_an_exception(fresh_store):
    frame = schema.read_results(TRANSFERS)
    other = frame.assign(run_id="disjoint02", bytes=frame["bytes"] + 1)
    other["gbps"] = other["bytes"] / other["median_ms"] / 1e6
    fresh_store.save(other, "import")
    at = open_page("pages/compare.py", compare_experiment="transfers", compare_baseline=frame["run_id"].iloc[0],
                   compare_candidates="disjoint02")
    assert any(r"These runs share no points\: different sizes" in i.value for i in at.info), [i.value for i in at.info]
    assert any(b.label.startswith("Download the review report") for b in at.get("download_button"))


@pytest.mark.slow
def test_a_store_that_never_answers_is_named_on_the_runs_page(monkeypatch):
    with socket.socket() as listener:  # accepts TCP and never says a word
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        monkeypatch.setenv("PINPOINT_DB_URL", f"postgresql+psycopg://u@127.0.0.1:{listener.getsockname()[1]}/db")
        st.cache_resource.clear()
        at = open_page("pages/runs.py")
    assert any("the runs store" in e.value and "did not answer within 5 s" in e.value for e in at.error)


def test_plain_text_keeps_bare_urls_and_addresses_from_becoming_links():
    from gpu.core.text import plain

    shown = plain("see https://evil.example/x, www.evil.example or mail a@evil.example", None)
    assert "://" not in shown and "www." not in shown and "a@e" not in shown
    assert shown.replace("\u200b", "").replace("\\", "") == "see https://evil.example/x, www.evil.example or mail " \
                                                             "a@evil.example"


@pytest.mark.slow
def test_the_runs_page_refuses_a_divergent_run_until_replace_is_ticked(fresh_store):
    whole = schema.read_results(TRANSFERS).assign(run_id="page0001")
    fresh_store.save(whole.iloc[:49], "import")
    data = whole.assign(samples_ms=whole["samples_ms"].map(list)).to_parquet(index=False)
    at = open_page("pages/runs.py")
    at.file_uploader(key="runs_upload").set_value(("[x](https://evil.example).parquet", data, "application/x-parquet"))
    at.run()
    at.button(key="runs_import").click().run()
    [error] = [e.value for e in at.error]
    assert "already in the store with different content" in error and "it differs" in error
    assert r"\[x\]\(https\:" in error and "](" not in error
    assert fresh_store.runs().loc[0, "points"] == 49
    at.checkbox(key="runs_import_replace").check().run()
    at.button(key="runs_import").click().run()
    assert not at.error and any("replaced run page0001 \\(152 points\\)" in s.value for s in at.success)
    assert fresh_store.runs().loc[0, "points"] == 152


@pytest.mark.slow
def test_an_unreadable_stored_run_is_left_out_of_the_history_by_name(fresh_store):
    import sqlalchemy as sa

    frame = schema.read_results(TRANSFERS).assign(run_id="broken01", timestamp="2026-11-21T23:50:00+00:00")
    fresh_store.save(frame, "import")
    with fresh_store.engine.begin() as connection:  # samples as an older PinPoint let them in
        connection.execute(sa.text("UPDATE points SET row_json = replace(row_json, :old, :new) WHERE idx = 0"),
                           {"old": '"samples_ms":[', "new": '"samples_ms":0.5,"x":['})
    at = open_page("pages/compare.py", compare_experiment="transfers")
    [warning] = [w.value for w in at.warning if w.value.startswith("Left out of the history")]
    assert "broken01" in warning and "samples\\_ms is 0\\.5" in warning
    assert at.get("plotly_chart")


@pytest.mark.slow
def test_a_server_that_goes_silent_mid_session_is_named_and_the_bundled_runs_stay(monkeypatch, postgres_url):
    import sqlalchemy as sa

    from gpu.results.persistence import database
    from tests.conftest import new_postgres_database
    from tests.test_store_attacks import SilencingProxy

    monkeypatch.setattr(database, "ANSWER_TIMEOUT_S", 2)  # the mechanism, quickly (the default: 25 s, then 5 s)
    address = sa.engine.make_url(new_postgres_database(postgres_url))
    proxy = SilencingProxy((address.host, address.port))
    try:
        url = address.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        RunStore(url).save(schema.read_results(MANAGED).assign(run_id="teamrun01"), "import")
        monkeypatch.setenv("PINPOINT_DB_URL", url)
        st.cache_resource.clear()
        at = open_page("pages/runs.py")
        assert "teamrun01" in set(at.dataframe[0].value["run_id"])
        proxy.silence()
        at.run()
        assert not at.exception, at.exception
        [error] = [e.value for e in at.error if "The runs store cannot be read" in e.value]
        assert "stopped answering" in error and "bundled with PinPoint are still here" in error
        listed = at.dataframe[0].value
        assert len(listed) > 0 and "teamrun01" not in set(listed["run_id"])  # the bundled runs, still served
    finally:
        proxy.close()
        st.cache_resource.clear()
