"""The Runs page's Move to trash posted by hand over Streamlit's own websocket (``/_stcore/stream``), the way a
visitor who skips the browser's page would: a team server with sign-in, each person signed in through a real OpenID
Connect provider in chromium (tests/oidc_helper.py), then a raw websocket carrying that person's session cookies and
BackMsg protobufs built here (the widget ids read from the ForwardMsgs of the session's own Runs page).

The same hand-made messages (tick the confirmation, press Move to trash) change nothing for a viewer or a member
(Streamlit drops what is posted to a disabled widget, so the action never starts), are refused in one line by the
action itself for an admin whose role was taken away after the page was drawn, and move the run to the trash for an
admin; the audit trail records only that. On SQLite and PostgreSQL."""

import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from websockets.sync.client import connect

from gpu.core.access import Actor, Role
from gpu.core.text import plain
from gpu.results.persistence.store import RunStore
from tests.browser_helper import CHROMIUM
from tests.conftest import new_postgres_database
from tests.test_browser_sign_in import ROLES, sign_in, signed_in_server

ADMIN, MEMBER, VIEWER = "ada@example.org", "bob@example.org", "vic@elsewhere.net"
RUN = "teamrun01"
NOT_TRASHED = f"Run {RUN} was not moved to the trash: "  # the Runs page's line for a refused trash
AUDITOR = Actor("auditor@example.org", Role.ADMIN, "cli")  # reads the trail for the test
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def team_server(request, tmp_path_factory):
    """A provider and a team server whose sign-in it is, over a store (SQLite or PostgreSQL) holding one run."""
    folder = tmp_path_factory.mktemp(f"forged-{request.param}")
    url = f"sqlite:///{folder}/runs.sqlite" if request.param == "sqlite" else \
        new_postgres_database(request.getfixturevalue("postgres_url"))
    with signed_in_server(folder, url) as (address, _):
        store = RunStore(url)  # opened once the run is stored: a store reads its schema version when opened
        yield address, store, folder / "roles.toml"
        store.engine.dispose()


def session_cookies(browser, url: str, login: str) -> dict[str, str]:
    """The cookies the server set for ``login`` signed in through the provider's pages: its signed session cookie
    (``_streamlit_user``, in chunks when long) and its XSRF cookie."""
    context = browser.new_context()
    try:
        sign_in(context.new_page(), url, login)
        return {c["name"]: c["value"] for c in context.cookies(url)}
    finally:
        context.close()


class Stream:
    """A hand-made client of Streamlit's websocket: what a browser tab sends, built from protobufs here."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self.page_hash = ""

    def rerun(self, widgets: list | None = None, page_name: str = "runs") -> list:
        """Sends a rerun_script BackMsg with ``widgets`` (WidgetState protobufs) and returns the ForwardMsgs of the
        script runs it causes, up to the one that ends without asking for another run."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        message = BackMsg()
        state = message.rerun_script
        state.query_string = ""
        state.page_script_hash = self.page_hash
        state.page_name = "" if self.page_hash else page_name
        state.widget_states.widgets.extend(widgets or [])
        self.connection.send(message.SerializeToString())
        return self.receive()

    def receive(self, timeout: float = 90) -> list:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        received, deadline = [], time.monotonic() + timeout
        while True:
            msg = ForwardMsg.FromString(self.connection.recv(timeout=max(deadline - time.monotonic(), 0.1)))
            received.append(msg)
            kind = msg.WhichOneof("type")
            if kind == "navigation":  # the page this run showed, which the next rerun names as a tab does
                self.page_hash = msg.navigation.page_script_hash
            if kind == "script_finished" and msg.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                assert msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY, msg
                return received


@contextmanager
def stream(url: str, cookies: dict[str, str]):
    """A websocket to ``/_stcore/stream`` as the browser opens it: same origin, the session's cookies, and the
    subprotocol header carrying "streamlit" and the XSRF token (Streamlit checks it against the XSRF cookie before it
    reads the session cookie)."""
    header = "; ".join(f"{name}={value}" for name, value in cookies.items())
    with connect(url.replace("http://", "ws://") + "/_stcore/stream", origin=url,
                 subprotocols=["streamlit", cookies["_streamlit_xsrf"]],
                 additional_headers={"Cookie": header}, max_size=None) as connection:
        yield Stream(connection)


def elements(messages: list) -> list:
    """Each element the ForwardMsgs drew: (its type, its protobuf)."""
    found = []
    for msg in messages:
        if msg.WhichOneof("type") == "delta" and msg.delta.WhichOneof("type") == "new_element":
            element = msg.delta.new_element
            kind = element.WhichOneof("type")
            found.append((kind, getattr(element, kind)))
    return found


def widget(messages: list, kind: str, key: str):
    """The widget protobuf whose user key is ``key`` (Streamlit's widget ids end with the key)."""
    [proto] = [p for k, p in elements(messages) if k == kind and getattr(p, "id", "").endswith(f"-{key}")]
    return proto


def errors(messages: list) -> list[str]:
    return [p.body for k, p in elements(messages) if k == "alert" and p.format == p.ERROR]


def text_state(proto, value: str):
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    return WidgetState(id=proto.id, string_value=value)


def forged_trash(page: list) -> list:
    """The widget states of a tab that shows run RUN, ticks the confirmation and presses Move to trash, built from
    the widget ids of ``page`` (the session's own Runs page), whether its controls were enabled or not."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    selection = widget(page, "selectbox", "runs_selected")
    [option] = [o for o in selection.options if o.startswith(f"{RUN} · ")]
    return [text_state(widget(page, "text_input", "runs_filter_label"), "team review"),
            text_state(selection, option),
            WidgetState(id=widget(page, "checkbox", f"runs_trash_sure_{RUN}").id, bool_value=True),
            WidgetState(id=widget(page, "button", "runs_trash").id, trigger_value=True)]


def runs_page(connection: Stream) -> list:
    """The Runs page filtered to RUN, as its ForwardMsgs."""
    first = connection.rerun()
    filtered = connection.rerun([text_state(widget(first, "text_input", "runs_filter_label"), "team review")])
    assert widget(filtered, "selectbox", "runs_selected").options[0].startswith(f"{RUN} · ")
    return filtered


def trail(store: RunStore) -> list[tuple[str, str, list[str]]]:
    return [(r.action, r.who, r.run_ids) for r in store.audit_trail(AUDITOR).itertuples()]


def in_trash(store: RunStore) -> bool:
    return RUN in set(store.trashed()["run_id"])


def test_the_trash_posted_by_hand_over_the_websocket_moves_the_run_for_an_admin_only(browser, team_server):
    url, store, roles = team_server
    before = trail(store)
    assert [action for action, _, _ in before] == ["import", "migrate"]  # the store was created, then filled
    cookies = {login: session_cookies(browser, url, login) for login in (VIEWER, MEMBER, ADMIN)}

    # A viewer and a member: their page shows the trash controls disabled with the reason; the hand-made messages
    # tick the confirmation, then press Move to trash, as a tab does. Streamlit drops a disabled widget's posted value
    # and skips its callback, so the page's action never starts: nothing is done, the run stays, the trail is as it
    # was, and the answer is the same page with the same one-line reason under the disabled controls.
    sent = {}
    for login, role in ((VIEWER, "viewer"), (MEMBER, "member")):
        reason = f"trash needs the admin role; {login} is a {role}"  # a control's help text, as it is
        with stream(url, cookies[login]) as connection:
            page = runs_page(connection)
            sure = widget(page, "checkbox", f"runs_trash_sure_{RUN}")
            assert sure.disabled and sure.help == reason and widget(page, "button", "runs_trash").disabled
            ticked = connection.rerun(forged_trash(page)[:3])
            answer = connection.rerun(forged_trash(page))
            sent[login] = [state.id for state in forged_trash(page)]
        for shown in (page, ticked, answer):
            assert [p.body for k, p in elements(shown) if k == "markdown" and p.body.startswith("Not moved")] == \
                [f"Not moved to the trash: {plain(reason, None)}"]
            assert not [p.body for k, p in elements(shown) if k == "alert" and "trash" in p.body]
            assert widget(shown, "checkbox", f"runs_trash_sure_{RUN}").help == reason
            assert widget(shown, "button", "runs_trash").disabled
        assert store.has_run(RUN) and not in_trash(store) and trail(store) == before

    # An admin whose role is taken away (the roles file edited) between ticking the confirmation and pressing the
    # button: the controls were enabled on the page they pressed, so the press reaches the page's action, and the
    # action's own check refuses it in one line.
    with stream(url, cookies[ADMIN]) as connection:
        page = runs_page(connection)
        ticked = connection.rerun(forged_trash(page)[:3])
        assert not widget(ticked, "button", "runs_trash").disabled
        roles.write_text(ROLES.replace('"group:gpu-admins" = "admin"\n', ""))
        try:
            answer = connection.rerun(forged_trash(page))
        finally:
            roles.write_text(ROLES)
    assert errors(answer) == [NOT_TRASHED + plain(f"trash needs the admin role; {ADMIN} is a member", None)]
    assert store.has_run(RUN) and not in_trash(store) and trail(store) == before

    # The positive control: the same hand-made messages from an admin's session move the run to the trash.
    with stream(url, cookies[ADMIN]) as connection:
        page = runs_page(connection)
        connection.rerun(forged_trash(page)[:3])
        answer = connection.rerun(forged_trash(page))
    assert not errors(answer)
    assert [p.body for k, p in elements(answer) if k == "alert" and p.body.startswith(f"Moved run {RUN}")]
    assert in_trash(store) and not store.has_run(RUN)
    assert trail(store) == [("trash", ADMIN, [RUN])] + before
    # the messages were the same: a widget's id comes from its key and page, not from who is looking
    assert [state.id for state in forged_trash(page)] == sent[VIEWER] == sent[MEMBER]
