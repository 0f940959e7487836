"""The Runs page's trash, labels and audit trail through AppTest (replay mode, a throwaway store per test, on SQLite
and on PostgreSQL): each control a role may not use is disabled with the reason, and the store refuses the action
whatever the browser sent."""

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from gpu.core import schema
from gpu.core.access import Actor, Role
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence.store import RunStore

APP = str(Path(__file__).resolve().parent.parent / "app.py")
MANAGED = next(BUNDLED_DIRS[1].glob("managed_*.parquet"))
ADMIN = Actor("ada@example.org", Role.ADMIN, "app")
MEMBER = Actor("max@example.org", Role.MEMBER, "app")
VIEWER = Actor("vic@example.org", Role.VIEWER, "app")


@pytest.fixture(autouse=True)
def store(monkeypatch, store_url):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_DB_URL", store_url)
    st.cache_resource.clear()
    st.cache_data.clear()
    runs = RunStore(store_url)
    runs.save(schema.read_results(MANAGED).assign(run_id="keep0001"), "import", label="before")
    yield runs
    st.cache_resource.clear()
    st.cache_data.clear()
    runs.engine.dispose()


def as_actor(monkeypatch, actor: Actor) -> None:
    monkeypatch.setattr("pages._ui.access.current_actor", lambda: actor)


def open_runs(monkeypatch, actor: Actor) -> AppTest:
    as_actor(monkeypatch, actor)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/runs.py").run()
    assert not at.exception, at.exception
    at.selectbox(key="runs_selected").set_value("keep0001").run()
    return at


@pytest.mark.slow
def test_an_admin_moves_a_run_to_the_trash_restores_it_and_purges_it(monkeypatch, store):
    at = open_runs(monkeypatch, ADMIN)
    at.checkbox(key="runs_trash_sure_keep0001").check().run()
    at.button(key="runs_trash").click().run()
    assert not at.exception and not at.error
    assert "keep0001" not in set(at.dataframe[0].value["run_id"])  # the runs table leaves it out
    trash = next(d.value for d in at.dataframe if "trashed_by" in d.value.columns)
    assert trash["run_id"].tolist() == ["keep0001"] and trash["trashed_by"].tolist() == [ADMIN.who]
    at.button(key="runs_restore").click().run()
    assert not at.exception and store.has_run("keep0001") and store.trashed().empty
    at.selectbox(key="runs_selected").set_value("keep0001").run()
    at.checkbox(key="runs_trash_sure_keep0001").check().run()
    at.button(key="runs_trash").click().run()
    assert at.button(key="runs_purge").disabled  # purging asks for its own confirmation
    at.checkbox(key="runs_purge_sure_keep0001").check().run()
    at.button(key="runs_purge").click().run()
    assert not at.exception and store.trashed().empty and not store.has_run("keep0001")
    actions = store.audit_trail(ADMIN)["action"].tolist()
    assert actions[:4] == ["purge", "trash", "restore", "trash"]


@pytest.mark.parametrize("actor", [VIEWER, MEMBER])
@pytest.mark.slow
def test_controls_a_role_may_not_use_are_disabled_with_the_reason(monkeypatch, store, actor):
    store.trash(ADMIN, ["keep0001"])
    store.save(schema.read_results(MANAGED).assign(run_id="keep0002"), "import")
    as_actor(monkeypatch, actor)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/runs.py").run()
    at.selectbox(key="runs_selected").set_value("keep0002").run()
    for key, action in (("runs_trash", "trash"), ("runs_restore", "restore"), ("runs_purge", "purge")):
        button = at.button(key=key)
        assert button.disabled and button.help == actor.why_not(action) and "admin role" in button.help
    assert at.checkbox(key="runs_trash_sure_keep0002").disabled
    assert at.button(key="runs_label_save").disabled == (actor is VIEWER)
    assert not any("Audit trail" in e.label for e in at.expander)  # the trail is for admins


def test_a_viewer_posting_the_trash_action_by_hand_is_refused_by_the_store(monkeypatch, store):
    at = open_runs(monkeypatch, VIEWER)
    # what a hand-made websocket message could set: the confirmation and the click, on disabled widgets
    at.session_state["runs_trash_sure_keep0001"] = True
    at.session_state["runs_trash_keep0001"] = True
    at.run()
    assert not at.exception
    assert any("was not moved to the trash" in e.value and "needs the admin role" in e.value for e in at.error)
    assert store.has_run("keep0001") and store.trashed().empty


@pytest.mark.slow
def test_a_viewer_posting_restore_and_purge_by_hand_is_refused(monkeypatch, store):
    store.trash(ADMIN, ["keep0001"])
    as_actor(monkeypatch, VIEWER)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/runs.py").run()
    at.session_state["runs_restore_keep0001"] = True
    at.run()
    at.session_state["runs_purge_sure_keep0001"] = True
    at.session_state["runs_purge_keep0001"] = True
    at.run()
    assert not at.exception
    assert sum("needs the admin role" in e.value for e in at.error) == 1  # the purge (restore's error was shown)
    assert store.trashed()["run_id"].tolist() == ["keep0001"]


@pytest.mark.slow
def test_a_member_relabels_a_run_and_a_viewer_cannot(monkeypatch, store):
    at = open_runs(monkeypatch, MEMBER)
    at.text_input(key="runs_label_keep0001").input("after driver 590").run()
    at.button(key="runs_label_save").click().run()
    assert not at.exception and store.runs().set_index("run_id").loc["keep0001", "label"] == "after driver 590"
    trail = store.audit_trail(ADMIN)
    assert trail.loc[0, "action"] == "label" and trail.loc[0, "who"] == MEMBER.who and trail.loc[0, "role"] == "member"
    at = open_runs(monkeypatch, VIEWER)
    at.session_state["runs_label_save_keep0001"] = True
    at.run()
    assert any("was not changed" in e.value for e in at.error)
    assert store.runs().set_index("run_id").loc["keep0001", "label"] == "after driver 590"


def test_admins_see_the_audit_trail_with_hostile_text_as_plain_one_line_text(monkeypatch, store):
    hostile = Actor("ev\nil\x1b[2J<b>x</b>" + "w" * 10_000, Role.ADMIN, "app")
    store.set_label(hostile, "keep0001", "[link](http://evil.example)\n\x1b]0;title\x07")
    at = open_runs(monkeypatch, ADMIN)
    assert not at.exception
    trail = next(d.value for d in at.dataframe if "what" in d.value.columns)
    who = trail.loc[0, "who"]
    assert "\n" not in who and "\x1b" not in who and "\\x1b" in who and len(who) < 300 and "10,0" in who
    assert "\x1b" not in trail.loc[0, "what"] and "\n" not in trail.loc[0, "what"]
    assert {b.label for b in at.get("download_button")} >= {"Export as CSV", "Export as JSON"}
