"""Uploads are bounded before Streamlit keeps them (pages/_ui/uploads.py): raw PUTs to the upload route, as a browser
or a script sends them, through the middleware serve.py puts in front of it. Nothing from a session that has not
signed in on a team server; per session a count and a total; a session that ended frees its share."""

import time

import pytest
from starlette.testclient import TestClient

from gpu.core import serving as srv
from pages._ui import uploads

TEAM = srv.Serving("team", "0.0.0.0", sign_in=True)
LOCAL = srv.Serving("local", "127.0.0.1", sign_in=False)
ROLES = '[roles]\n"ada@example.org" = "admin"\n"vic@example.org" = "viewer"\n'
MB = 1024 * 1024


class Streamlit:
    """Stands for Streamlit's upload handler: keeps each body it is sent and answers 204."""

    def __init__(self):
        self.kept: dict[tuple[str, str], int] = {}

    async def __call__(self, scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        _, session, file_id = scope["path"].rsplit("/", 2)
        if scope["method"] == "PUT":
            self.kept[(session, file_id)] = len(body)
        else:
            self.kept.pop((session, file_id), None)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def roles(monkeypatch, tmp_path):
    path = tmp_path / "roles.toml"
    path.write_text(ROLES)
    monkeypatch.setenv("PINPOINT_ROLES", str(path))
    monkeypatch.setenv("PINPOINT_DB_URL", f"sqlite:///{tmp_path}/runs.sqlite")


def server(users: dict, plan=TEAM, alive=None, **limits):
    inner = Streamlit()
    middleware = uploads.UploadLimits(inner, "/lab", user_of=users.get, plan=lambda: plan,
                                      alive=alive or (lambda s: s in users), **limits)
    return TestClient(middleware), inner


def put(client, session: str, file_id: str, size: int):
    return client.put(f"/lab/_stcore/upload_file/{session}/{file_id}", files={"file": ("run.parquet", b"x" * size)},
                      headers={"X-Xsrftoken": "t"})


def signed_in(email: str) -> dict:
    return {"is_logged_in": True, "email": email, "email_verified": True, "iat": int(time.time()) - 60, "sub": email}


def test_nothing_is_uploaded_before_sign_in(roles):
    client, inner = server({"screen": {"is_logged_in": False}})
    for i in range(3):  # the hostile pass's burst: 3 x 40 MB from the sign-in screen's session
        answer = put(client, "screen", f"f{i}", 40 * MB)
        assert answer.status_code == 403 and answer.text == "upload refused: sign in first: nothing is uploaded " \
                                                            "before sign-in"
    assert put(client, "no-such-session", "f", 10).status_code == 403
    assert inner.kept == {}  # nothing reached Streamlit's memory


def test_a_signed_in_viewer_or_an_expired_sign_in_uploads_nothing(roles):
    old = {**signed_in("ada@example.org"), "iat": int(time.time()) - 13 * 3600}
    client, inner = server({"viewer": signed_in("vic@example.org"), "old": old})
    assert put(client, "viewer", "f", 10).text == "upload refused: import needs the member role; vic@example.org " \
                                                  "is a viewer"
    assert "sign in again" in put(client, "old", "f", 10).text
    assert inner.kept == {}


def test_each_session_keeps_a_bounded_count_and_total_freed_when_it_ends(roles):
    users = {"ada": signed_in("ada@example.org"), "other": signed_in("ada@example.org")}
    client, inner = server(users, max_files=3, max_bytes=5 * MB)
    assert [put(client, "ada", f"f{i}", MB).status_code for i in range(3)] == [204, 204, 204]
    refused = put(client, "ada", "f3", 10)
    assert refused.status_code == 413 and "this session keeps 3 files, its limit" in refused.text
    client.delete("/lab/_stcore/upload_file/ada/f0", headers={"X-Xsrftoken": "t"})  # removed from the uploader
    assert put(client, "ada", "f3", MB).status_code == 204
    client.delete("/lab/_stcore/upload_file/ada/f1", headers={"X-Xsrftoken": "t"})
    too_big = put(client, "ada", "f4", 4 * MB)  # 2 MB kept + 4 MB
    assert too_big.status_code == 413 and "over its limit of 5,242,880" in too_big.text
    assert put(client, "other", "g0", 4 * MB).status_code == 204  # another session has its own share
    del users["ada"]  # the session ends: Streamlit drops its files, and its share is forgotten
    assert "ada" not in {s for s in client.app.kept if client.app.alive(s)}
    put(client, "other", "g1", 10)
    assert "ada" not in client.app.kept


def test_this_machines_own_server_bounds_uploads_without_sign_in():
    client, inner = server({"me": {"is_logged_in": False}}, plan=LOCAL, max_files=1)
    assert put(client, "me", "f", 10).status_code == 204
    assert put(client, "me", "g", 10).status_code == 413


def test_the_files_of_a_session_streamlit_forgot_are_dropped():
    """Streamlit forgets a disconnected session after server.disconnectedSessionTTL without dropping its files; the
    sweep drops the files of every session it no longer keeps, and only those."""
    from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
    from streamlit.runtime.uploaded_file_manager import UploadedFileRec

    class Sessions:
        def __init__(self, known):
            self.known = known

        def get_session_info(self, session_id):
            return object() if session_id in self.known else None

    class Runtime:
        uploaded_file_mgr = MemoryUploadedFileManager("/_stcore/upload_file")
        _session_mgr = Sessions({"connected", "waiting-for-its-browser"})

    for session in ("connected", "waiting-for-its-browser", "forgotten"):
        Runtime.uploaded_file_mgr.add_file(session, UploadedFileRec("f", "run.parquet", "x", b"x" * MB))
    assert uploads.drop_ended_uploads(Runtime) == MB
    assert set(Runtime.uploaded_file_mgr.file_storage) == {"connected", "waiting-for-its-browser"}
    assert uploads.drop_ended_uploads(Runtime) == 0
