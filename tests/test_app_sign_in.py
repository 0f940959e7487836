"""A team server's pages by role (AppTest: the signed-in person is given as ``st.user``, as Streamlit fills it from
its signed session cookie): what each role sees, what the server refuses whatever the browser sends, and a visitor
who is not signed in, whose sign-in is too old, who is not on the roles list, or whose provider is down. What reaches
the runs store runs on SQLite and on PostgreSQL."""

import socket
import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from gpu.core import schema
from gpu.core.access import Actor
from gpu.core.text import plain
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence.store import RunStore

APP = str(Path(__file__).resolve().parent.parent / "app.py")
MANAGED = next(BUNDLED_DIRS[1].glob("managed_*.parquet"))
ROLES = """\
unknown = "viewer"

[roles]
"ada@example.org" = "admin"
"@example.org" = "member"
"group:gpu-admins" = "admin"
"""
ADMIN, MEMBER, VIEWER = "ada@example.org", "bob@example.org", "vic@elsewhere.net"
NOT_TRASHED = "Run teamrun01 was not moved to the trash: "  # the store's refusal, shown by the Runs page


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def auth(metadata_url: str | None = None) -> dict:
    return {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": "c" * 32,
            "client_id": "pinpoint", "client_secret": "s",
            "server_metadata_url": metadata_url or f"http://127.0.0.1:{closed_port()}/.well-known/openid-configuration"}


@pytest.fixture(autouse=True)
def team_server(monkeypatch, tmp_path):
    """A team server with sign-in (PINPOINT_SERVE=team) and its roles file, over an empty SQLite store."""
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")
    monkeypatch.setenv("PINPOINT_SERVE", "team")
    monkeypatch.delenv("PINPOINT_NO_SIGN_IN", raising=False)
    roles = tmp_path / "roles.toml"
    roles.write_text(ROLES)
    monkeypatch.setenv("PINPOINT_ROLES", str(roles))
    monkeypatch.setenv("PINPOINT_DB_URL", f"sqlite:///{tmp_path}/runs.sqlite")
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


@pytest.fixture
def team(monkeypatch, store_url):
    """The team server's store holding one run, on SQLite and on PostgreSQL: the tests whose role logic reaches the
    store."""
    monkeypatch.setenv("PINPOINT_DB_URL", store_url)
    st.cache_resource.clear()
    store = RunStore(store_url)
    store.save(schema.read_results(MANAGED).assign(run_id="teamrun01"), "import", label="team review")
    yield store
    st.cache_resource.clear()
    store.engine.dispose()


def signed_in(email: str | None, page: str | None = None, groups=(), issued: float | None = None, query=None,
              metadata_url: str | None = None) -> AppTest:
    """The app as ``email`` signed in (None: nobody), on ``page``."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets["auth"] = auth(metadata_url)
    if email is None:
        at.user = {"is_logged_in": False}
    else:
        at.user = {"is_logged_in": True, "email": email, "email_verified": True, "groups": list(groups),
                   "iat": int(time.time() - 60 if issued is None else issued), "sub": email}
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    if page:
        at.switch_page(page).run()
        assert not at.exception, at.exception
    return at


def identity(at) -> str:
    return " ".join(m.value for m in at.sidebar.markdown if m.value.startswith("**Signed in**"))


def show_run(at):
    at.text_input(key="runs_filter_label").input("team review").run()
    assert at.dataframe[0].value["run_id"].tolist() == ["teamrun01"]
    return at


def forced(widget):
    """The widget as a browser that ignores ``disabled`` would use it."""
    widget.proto.disabled = False
    return widget


def by_hand(at):
    """The trash of teamrun01 posted as a browser that ignores the disabled controls would: the confirmation ticked
    and the button pressed, in one message (Streamlit itself drops a disabled widget's posted value and skips its
    callback); and, past that, the confirmation and the request the button's callback records, set directly."""
    forced(at.checkbox(key="runs_trash_sure_teamrun01")).check()
    forced(at.button(key="runs_trash")).click()
    at.session_state["runs_trash_sure_teamrun01"] = True
    at.session_state["runs_trash_teamrun01"] = True
    return at


def in_trash(store) -> bool:
    return "teamrun01" in set(store.trashed()["run_id"])


def refusals(at) -> list[str]:
    return [e.value for e in at.error if e.value.startswith(("Refused:", NOT_TRASHED))]


@pytest.mark.parametrize("email,groups,role", [(ADMIN, (), "admin"), (MEMBER, (), "member"), (VIEWER, (), "viewer"),
                                               (VIEWER, ("gpu-admins",), "admin")])
@pytest.mark.slow
def test_the_sidebar_names_the_person_and_the_role_from_the_roles_file(email, groups, role):
    at = signed_in(email, groups=groups)
    assert identity(at) == f"**Signed in** · {plain(email, None)} · {role}"
    assert at.sidebar.button(key="sign_out").label == "Sign out"


def test_a_viewer_sees_the_runs_but_no_import_or_delete(team):
    at = show_run(signed_in(VIEWER, "pages/runs.py"))
    reason = f"import needs the member role; {VIEWER} is a viewer"
    assert at.button(key="runs_import").disabled and at.button(key="runs_import").help == reason
    [uploader] = at.get("file_uploader")
    assert uploader.proto.disabled
    sure = at.checkbox(key="runs_trash_sure_teamrun01")
    assert sure.disabled and sure.help == f"trash needs the admin role; {VIEWER} is a viewer"
    assert at.button(key="runs_trash").disabled


@pytest.mark.slow
def test_a_viewer_posting_the_delete_by_hand_is_refused_and_the_run_stays(team):
    at = show_run(signed_in(VIEWER, "pages/runs.py"))
    # A hand-made websocket message sends widget states whatever the page disabled: the confirmation ticked and the
    # Delete button pressed. AppTest sends the same states once it is told the widgets are not disabled.
    by_hand(at).run()
    assert refusals(at) == [NOT_TRASHED + plain(f"trash needs the admin role; {VIEWER} is a viewer", None)]
    assert team.has_run("teamrun01") and not in_trash(team)


def test_a_member_may_import_but_not_delete(team):
    at = show_run(signed_in(MEMBER, "pages/runs.py"))
    assert not at.button(key="runs_import").help
    assert at.checkbox(key="runs_trash_sure_teamrun01").disabled
    by_hand(at).run()
    assert refusals(at) == [NOT_TRASHED + plain(f"trash needs the admin role; {MEMBER} is a member", None)]
    assert team.has_run("teamrun01") and not in_trash(team)


@pytest.mark.slow
def test_an_admin_moves_a_run_to_the_trash(team):
    at = show_run(signed_in(ADMIN, "pages/runs.py"))
    at.checkbox(key="runs_trash_sure_teamrun01").check().run()
    at.button(key="runs_trash").click().run()
    assert not refusals(at) and in_trash(team)


@pytest.mark.slow
def test_a_role_claimed_in_the_address_changes_nothing(team):
    at = show_run(signed_in(VIEWER, "pages/runs.py",
                            query={"role": "admin", "email": ADMIN, "user": ADMIN, "is_logged_in": "1"}))
    assert identity(at) == f"**Signed in** · {plain(VIEWER, None)} · viewer"
    assert at.checkbox(key="runs_trash_sure_teamrun01").disabled
    nobody = signed_in(None, query={"role": "admin", "email": ADMIN})
    assert not identity(nobody) and not nobody.title[0].value.startswith("Overview")


def test_a_visitor_who_has_not_signed_in_sees_only_the_sign_in_screen_and_a_provider_down_is_named():
    at = signed_in(None)
    assert [t.value for t in at.title] == ["PinPoint"]
    [down] = [e.value for e in at.error]
    assert down.startswith("Nobody can sign in now: " + plain("the sign-in provider at http://127.0.0.1:", None))
    assert "Connection refused" in down and down.endswith("Nothing is served until it answers.")
    assert not at.button and not at.dataframe and not at.get("plotly_chart")  # no Sign in, no page
    runs = signed_in(None, "pages/runs.py")
    assert not runs.dataframe and [t.value for t in runs.title] == ["PinPoint"]


def test_a_sign_in_older_than_the_session_limit_signs_in_again(team):
    at = signed_in(ADMIN, "pages/runs.py", issued=time.time() - 13 * 3600)
    assert [w.value for w in at.warning] == [plain("this sign-in is 13 h old, longer than this server's 12 h: sign "
                                                   "in again", None)]
    assert at.button(key="sign_out").label == "Sign in again"
    assert not at.dataframe and not identity(at)


def test_sign_out_revokes_the_session_cookie_on_every_server_of_the_store(team, monkeypatch):
    from pages._ui import access

    monkeypatch.setattr(access, "_signed_out", {})  # this server's sign-outs: none yet
    monkeypatch.setattr(access, "_stored_sign_outs", {})
    issued = time.time() - 60
    at = signed_in(MEMBER, "pages/runs.py", issued=issued)
    assert identity(at)
    at.button(key="sign_out").click().run()  # records the sign-out, then Streamlit clears its cookie
    assert not at.exception, at.exception
    trail = team.audit_trail(Actor.local())
    assert trail.iloc[0]["action"] == "sign out" and trail.iloc[0]["who"] == MEMBER
    for restarted in (False, True):  # this server; then one that never saw the sign-out (the store's row)
        if restarted:
            monkeypatch.setattr(access, "_signed_out", {})
            monkeypatch.setattr(access, "_stored_sign_outs", {})
        replayed = signed_in(MEMBER, "pages/runs.py", issued=issued)  # a copy of the old cookie
        assert [w.value for w in replayed.warning] == [plain(f"{MEMBER} signed out of this sign-in: sign in again",
                                                             None)]
        assert not replayed.dataframe and not identity(replayed)
    again = signed_in(MEMBER, "pages/runs.py", issued=time.time() + 2)  # a new sign-in after the sign-out
    assert identity(again) and again.dataframe
    assert identity(signed_in(ADMIN, "pages/runs.py", issued=issued))  # another person's sign-in is theirs


def test_someone_not_on_the_roles_list_is_refused_when_the_file_says_so(team, tmp_path):
    (tmp_path / "roles.toml").write_text(ROLES.replace('unknown = "viewer"', 'unknown = "refuse"'))
    at = signed_in(VIEWER, "pages/runs.py")
    assert [w.value for w in at.warning] == [plain(f"{VIEWER} is not on this server's roles list: ask its operator "
                                                   "for a role", None)]
    assert not at.dataframe and at.button(key="sign_out").label == "Sign out"


def test_a_roles_file_broken_while_serving_gives_nobody_a_role(team, tmp_path):
    (tmp_path / "roles.toml").write_text(ROLES + '"eve@example.net" = "root"\n')
    at = signed_in(ADMIN, "pages/runs.py")
    [error] = [e.value for e in at.error]
    assert error.startswith("The roles file cannot be used: ") and plain("line 7: 'eve@example.net' = 'root'", None) \
        in error
    assert not at.dataframe


def test_without_sign_in_on_this_machine_the_person_is_the_local_admin(monkeypatch):
    monkeypatch.delenv("PINPOINT_SERVE")
    at = AppTest.from_file(APP, default_timeout=120)
    at.user = {"is_logged_in": True, "email": VIEWER, "iat": int(time.time())}  # not asked: this machine only
    at.run()
    [where] = [c.value for c in at.sidebar.caption if c.value.startswith("This machine only")]
    assert where.endswith("· admin") and VIEWER not in where


def test_the_explicit_opt_out_makes_every_visitor_an_admin(monkeypatch):
    monkeypatch.setenv("PINPOINT_NO_SIGN_IN", "anyone-who-can-reach-it-is-admin")
    at = AppTest.from_file(APP, default_timeout=120).run()
    assert "No sign-in on this server: every visitor is an admin" in [c.value for c in at.sidebar.caption]


@pytest.fixture
def live_worker(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    monkeypatch.setenv("PINPOINT_WORKER_SERVICE", "tests.fake_service:RecordedService")
    st.cache_resource.clear()


def test_a_viewer_replays_and_cannot_measure_even_by_posting_the_click(live_worker):
    at = signed_in(VIEWER, "pages/transfers.py")
    assert at.toggle(key="use_replay").disabled
    assert at.toggle(key="use_replay").help == "Live measurement is unavailable: " + plain(
        f"measure needs the member role; {VIEWER} is a viewer", None)
    assert not [b for b in at.button if b.key == "transfers_measure"]
    assert any("**Replay**" in i.value or "Replay" in i.value for i in [*at.info, *at.warning, *at.success])
    at.session_state["transfers_measure_requested"] = True  # the click posted by hand
    at.run()
    assert "transfers_transfers_job" not in at.session_state and "transfers_job" not in at.session_state


@pytest.mark.slow
def test_a_member_measures_live(live_worker):
    at = signed_in(MEMBER, "pages/transfers.py")
    button = at.button(key="transfers_measure")
    assert not button.disabled
    at.text_input(key="transfers_custom_sizes").input("64KiB").run()
    at.button(key="transfers_measure").click().run()
    assert not at.exception and at.get("plotly_chart") and not at.error


def test_a_provider_that_answers_gets_a_sign_in_button(tmp_path):
    from tests.oidc_helper import oidc_provider

    with oidc_provider(tmp_path, "http://127.0.0.1:8501/oauth2callback", {}) as provider:
        at = signed_in(None, metadata_url=provider.metadata_url)
    assert [b.label for b in at.button] == ["Sign in"] and not at.error
    assert not at.dataframe and not at.get("plotly_chart")

