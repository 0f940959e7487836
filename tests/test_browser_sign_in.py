"""A team server in a real browser: a viewer, a member and an admin sign in through a real OpenID Connect
provider's login page (oidc-provider, tests/oidc_helper.py) and each sees what their role allows; a tampered or
too old session cookie and a role in the address get nobody in (`streamlit run serve.py` with PINPOINT_SERVE=team,
headless Debian Chromium driven by Playwright)."""

import http.client
import json
import re
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpu.core import schema
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence.store import RunStore
from tests.browser_helper import (
    CHROMIUM,
    SERVER_PIDS,
    free_port,
    resident_mib,
    runs_begun,
    streamlit_app,
    wait_for_run,
    watch_runs,
)
from tests.oidc_helper import oidc_provider, stop

MANAGED = next(BUNDLED_DIRS[1].glob("managed_*.parquet"))
COOKIE_SECRET = "pinpoint-browser-test-cookie-secret-0123456789"
USER_COOKIE = "_streamlit_user"  # Streamlit's signed session cookie
ROLES = """\
unknown = "viewer"

[roles]
"@example.org" = "member"
"group:gpu-admins" = "admin"
"""
ACCOUNTS = {"ada@example.org": {"groups": ["gpu-admins"]}, "bob@example.org": {}, "vic@elsewhere.net": {}}
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


# Streamlit keeps a session whose browser went away this long for a reconnect (its default: 120 s), then forgets it
DISCONNECTED_TTL_S = 2


@contextmanager
def signed_in_server(folder: Path, store_url: str):
    """A provider (``ACCOUNTS``) and a team server whose sign-in it is (roles ``ROLES``), over ``store_url`` with
    one run, ``teamrun01``, stored, its start-up's first page views done: (the server's address, the provider)."""
    port = free_port()
    address = f"http://127.0.0.1:{port}"
    RunStore(store_url).save(schema.read_results(MANAGED).assign(run_id="teamrun01"), "import", label="team review")
    (folder / "roles.toml").write_text(ROLES)
    with oidc_provider(folder, f"{address}/oauth2callback", ACCOUNTS) as provider:
        (folder / ".streamlit").mkdir()
        (folder / ".streamlit" / "secrets.toml").write_text(provider.secrets(f"{address}/oauth2callback",
                                                                             COOKIE_SECRET))
        with streamlit_app(log=folder / "server.log", ready="first visit:", port=port, PINPOINT_SERVE="team",
                           HOME=str(folder), PINPOINT_ROLES=str(folder / "roles.toml"), PINPOINT_DB_URL=store_url,
                           STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL=str(DISCONNECTED_TTL_S)) as url:
            assert url == address
            yield url, provider


@pytest.fixture(scope="module")
def team_server(tmp_path_factory):
    """A provider and a team server whose sign-in it is, over a store holding one run."""
    folder = tmp_path_factory.mktemp("team-server")
    with signed_in_server(folder, f"sqlite:///{folder}/runs.sqlite") as (url, provider):
        yield url, provider


def settled(page):
    """The page's run ended (a page of this module is watched from its first load: ``watched``)."""
    wait_for_run(page)


def watched(context):
    """A new page of ``context`` whose script runs are counted (``browser_helper.watch_runs``)."""
    page = context.new_page()
    watch_runs(page)
    return page


def text_of(locator) -> str:
    return locator.inner_text().replace("\u200b", "")


def sign_in(page, url: str, login: str) -> None:
    """Through the provider's own login and consent pages, back to the app."""
    watch_runs(page)
    page.goto(url)
    settled(page)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_selector("input[name=login]", timeout=30_000)
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any password")
    page.locator("button[type=submit]").click()
    page.wait_for_url(re.compile(r".*/interaction/.*"), timeout=30_000)
    page.locator("button[type=submit]").click()  # the consent page: Continue
    page.wait_for_url(re.compile(rf"^{re.escape(url)}/?(\?.*)?$"), timeout=30_000)
    page.get_by_text("Signed in", exact=False).first.wait_for(timeout=60_000)


def runs_page(page, url: str) -> None:
    page.goto(f"{url}/runs")
    settled(page)
    label = page.get_by_label("Label contains")
    label.fill("team review")
    begun = runs_begun(page)
    label.press("Enter")
    wait_for_run(page, begun)  # the run the filter started, not the one before it
    page.locator(".st-key-runs_trash_sure_teamrun01").wait_for(timeout=0)


@pytest.mark.parametrize("login,role,imports,deletes", [("vic@elsewhere.net", "viewer", False, False),
                                                        ("bob@example.org", "member", True, False),
                                                        ("ada@example.org", "admin", True, True)])
def test_each_role_signs_in_through_the_provider_and_sees_what_it_may_use(browser, team_server, login, role,
                                                                         imports, deletes):
    url, _ = team_server
    context = browser.new_context(viewport={"width": 1400, "height": 1400})
    page = watched(context)
    try:
        sign_in(page, url, login)
        sidebar = text_of(page.locator("[data-testid='stSidebar']"))
        assert f"Signed in · {login} · {role}" in sidebar
        runs_page(page, url)
        dropzone = page.locator(".st-key-runs_upload [data-testid='stFileUploaderDropzone']")
        assert (dropzone.get_attribute("aria-disabled") != "true") == imports
        assert page.locator(".st-key-runs_trash_sure_teamrun01 input").is_enabled() == deletes
        page.goto(f"{url}/runs?role=admin&email=ada@example.org")  # a role in the address changes nothing
        settled(page)
        page.get_by_text("Signed in", exact=False).first.wait_for(timeout=60_000)
        assert f"Signed in · {login} · {role}" in text_of(page.locator("[data-testid='stSidebar']"))
        assert next(c for c in context.cookies() if c["name"] == USER_COOKIE)["httpOnly"]  # Streamlit's session
    finally:
        context.close()


def signed_cookie(url: str, claims: dict, secret: str = COOKIE_SECRET) -> dict:
    """A session cookie as Streamlit writes it (itsdangerous, salted with the cookie's name)."""
    from itsdangerous import URLSafeTimedSerializer

    payload = json.dumps({**claims, "origin": url, "is_logged_in": True, "provider": "default"})
    value = URLSafeTimedSerializer(secret, salt=USER_COOKIE).dumps(payload)
    return {"name": USER_COOKIE, "value": value, "url": url}


def test_a_forged_or_too_old_session_gets_nobody_in(browser, team_server):
    url, _ = team_server
    admin = {"email": "ada@example.org", "email_verified": True, "groups": ["gpu-admins"], "sub": "ada@example.org"}
    cases = [
        # signed with a secret other than the server's: Streamlit drops it, the visitor is not signed in
        (signed_cookie(url, {**admin, "iat": int(time.time())}, secret="guessed-secret"), "Sign in"),
        # the server's own signature over a session signed in 13 h ago: PinPoint's limit is 12 h
        (signed_cookie(url, {**admin, "iat": int(time.time()) - 13 * 3600}), "Sign in again"),
    ]
    for cookie, button in cases:
        context = browser.new_context()
        page = watched(context)
        try:
            context.add_cookies([cookie])
            page.goto(f"{url}/runs")
            settled(page)
            page.get_by_role("button", name=button, exact=True).wait_for(timeout=60_000)
            assert page.get_by_text("Signed in", exact=False).count() == 0
            assert page.locator(".st-key-runs_filter_label").count() == 0  # no page ran
        finally:
            context.close()


def test_a_tampered_session_cookie_gets_nobody_in(browser, team_server):
    url, _ = team_server
    context = browser.new_context()
    page = watched(context)
    try:
        sign_in(page, url, "vic@elsewhere.net")
        cookie = next(c for c in context.cookies() if c["name"] == USER_COOKIE)
        # the payload rewritten to name the admin, the server's timestamp and signature kept (itsdangerous:
        # PAYLOAD.TIMESTAMP.SIGNATURE, the payload compressed behind a leading dot): the signature no longer matches
        payload, stamp, signature = cookie["value"].rsplit(".", 2)
        forged = signed_cookie(url, {"email": "ada@example.org", "groups": ["gpu-admins"], "iat": int(time.time())},
                               secret="x")["value"].rsplit(".", 2)[0]
        assert forged != payload
        context.clear_cookies(name=USER_COOKIE)
        context.add_cookies([{"name": USER_COOKIE, "value": f"{forged}.{stamp}.{signature}", "url": url}])
        assert next(c for c in context.cookies() if c["name"] == USER_COOKIE)["value"].startswith(forged)
        page.goto(f"{url}/runs")
        settled(page)
        page.get_by_role("button", name="Sign in", exact=True).wait_for(timeout=60_000)
        assert page.get_by_text("Signed in", exact=False).count() == 0
    finally:
        context.close()


def _session_ids(page) -> list[str]:
    """Streamlit's session id of each websocket the page opens, read from its first message (NewSession)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    found: list[str] = []

    def frame(payload) -> None:
        if isinstance(payload, bytes | bytearray):
            message = ForwardMsg()
            try:
                message.ParseFromString(bytes(payload))
            except Exception:  # noqa: BLE001 (not a ForwardMsg: not ours to read)
                return
            if message.HasField("new_session") and message.new_session.initialize.session_id:
                found.append(message.new_session.initialize.session_id)

    page.on("websocket", lambda socket: socket.on("framereceived", frame))
    return found


def _raw_put(context, url: str, session: str, name: str, size: int):
    xsrf = next((c["value"] for c in context.cookies() if c["name"] == "_streamlit_xsrf"), "")
    return context.request.put(f"{url}/_stcore/upload_file/{session}/{name}", headers={"X-Xsrftoken": xsrf},
                               multipart={"file": {"name": "run.parquet", "mimeType": "application/octet-stream",
                                                   "buffer": b"x" * size}})


def test_nothing_is_uploaded_before_sign_in_and_a_member_uploads_after(browser, team_server):
    url, _ = team_server
    context = browser.new_context()
    page = watched(context)
    try:
        sessions = _session_ids(page)
        page.goto(url)
        settled(page)
        page.get_by_role("button", name="Sign in", exact=True).wait_for(timeout=30_000)
        screen = sessions[-1]
        for i in range(3):  # the sign-in screen's own session, with its XSRF cookie: 3 x 4 MB
            answer = _raw_put(context, url, screen, f"f{i}", 4 * 1024 * 1024)
            assert answer.status == 403 and answer.text() == "upload refused: sign in first: nothing is uploaded " \
                                                              "before sign-in"
        sign_in(page, url, "bob@example.org")
        settled(page)
        member = sessions[-1]
        assert member != screen
        assert _raw_put(context, url, member, "g0", 1024).status == 204  # a member's import file is kept
    finally:
        context.close()


MIB = 1024 * 1024


def _streamed_put(context, url: str, session: str, name: str, size: int) -> int:
    """A raw PUT of ``size`` bytes to the upload route, streamed as a script sends it (the session's XSRF cookie and
    header): the HTTP status, or 0 when the server hung up before answering."""
    xsrf = next((c["value"] for c in context.cookies() if c["name"] == "_streamlit_xsrf"), "")
    boundary = "pinpoint-upload-test"
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="run.parquet"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        connection.putrequest("PUT", f"/_stcore/upload_file/{session}/{name}")
        for header, value in (("Content-Type", f"multipart/form-data; boundary={boundary}"),
                              ("Content-Length", str(len(head) + size + len(tail))), ("X-Xsrftoken", xsrf),
                              ("Cookie", f"_streamlit_xsrf={xsrf}")):
            connection.putheader(header, value)
        connection.endheaders()
        try:
            connection.send(head)
            for _ in range(size // MIB):
                connection.send(b"x" * MIB)
            connection.send(tail)
        except OSError:  # refused before its body was read: the server may close while it is still sent
            pass
        try:
            answer = connection.getresponse()
            answer.read()
            return answer.status
        except OSError:
            return 0
    finally:
        connection.close()


def test_uploads_before_sign_in_take_no_memory_and_a_members_are_freed_when_the_session_ends(browser, team_server):
    """The hostile pass's symptom: from the sign-in screen's websocket session, 40 MB PUTs answered 204 and the
    server's memory grew by them and stayed so. Now they are refused and the server's resident memory stays within
    one body of where it was; a member's are kept, and freed once the session ends (its browser gone for longer
    than Streamlit waits for a reconnect, DISCONNECTED_TTL_S here), which Streamlit alone never did."""
    url, _ = team_server
    server = SERVER_PIDS[url]
    context = browser.new_context()
    page = watched(context)
    try:
        sessions = _session_ids(page)
        page.goto(url)
        settled(page)
        page.get_by_role("button", name="Sign in", exact=True).wait_for(timeout=30_000)
        before = resident_mib(server)
        for burst in range(2):
            statuses = [_streamed_put(context, url, sessions[-1], f"b{burst}f{i}", 40 * MIB) for i in range(3)]
            assert set(statuses) <= {403, 0} and 403 in statuses, statuses
        assert resident_mib(server) - before < 40, (before, resident_mib(server))  # 240 MB refused, none kept

        sign_in(page, url, "bob@example.org")
        settled(page)
        member = sessions[-1]
        kept_from = resident_mib(server)
        assert [_streamed_put(context, url, member, f"m{i}", 40 * MIB) for i in range(3)] == [204] * 3
        assert resident_mib(server) - kept_from > 100  # what is measured here is where the files are kept
    finally:
        context.close()  # the member's session ends: its browser is gone
    deadline = time.monotonic() + 120  # Streamlit's wait for a reconnect, then the next sweep (uploads.SWEEP_S)
    while resident_mib(server) - kept_from >= 40:
        assert time.monotonic() < deadline, f"{resident_mib(server):.0f} MiB, {kept_from:.0f} before the uploads"
        time.sleep(1)


def test_a_provider_that_goes_down_is_named_and_nothing_is_served(browser, tmp_path):
    """With a provider and a team server of its own: it stops the provider, which the module's other tests use
    (they run in any order)."""
    with signed_in_server(tmp_path, f"sqlite:///{tmp_path}/runs.sqlite") as (url, provider):
        stop(provider)
        provider_down(browser, url)


def provider_down(browser, url: str) -> None:
    context = browser.new_context()
    page = watched(context)
    try:
        deadline = time.monotonic() + 60  # the app asks the provider again 15 s after its last answer
        while True:
            page.goto(f"{url}/runs")
            settled(page)
            if page.get_by_text("Nobody can sign in now", exact=False).count():
                break
            assert time.monotonic() < deadline, page.locator("body").inner_text()[:500]
            page.wait_for_timeout(2000)
        assert "does not answer" in text_of(page.locator("[data-testid='stMain']"))
        assert page.get_by_role("button", name="Sign in", exact=True).count() == 0
        assert page.locator(".st-key-runs_filter_label").count() == 0
    finally:
        context.close()



class TricklingProvider:
    """A sign-in provider on a loopback port that answers its discovery address one byte every ``every_s`` seconds
    (its status line included), for minutes; it notes when each connection came and when the server hung up."""

    def __init__(self, every_s: float = 2.0) -> None:
        self.every_s = every_s
        self.server = socket.create_server(("127.0.0.1", 0))
        self.came: list[float] = []
        self.hung_up: list[float] = []  # the same order as ``came``, for connections that ended
        self.stop = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.getsockname()[1]}/.well-known/openid-configuration"

    def serve(self) -> None:
        with self.server:
            self.server.settimeout(0.2)
            while not self.stop.is_set():
                try:
                    connection, _ = self.server.accept()
                except TimeoutError:
                    continue
                self.came.append(time.monotonic())
                threading.Thread(target=self.trickle, args=(connection,), daemon=True).start()

    def trickle(self, connection) -> None:
        answer = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{"authorization_endpoint": "x"}' * 10
        with connection:
            connection.settimeout(self.every_s)
            for byte in answer:
                try:
                    if connection.recv(65536) == b"":  # the server hung up
                        break
                except TimeoutError:  # nothing from the server for every_s: the next byte
                    pass
                except OSError:
                    break
                if self.stop.is_set():
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    break
            self.hung_up.append(time.monotonic())


def test_trickling_providers_are_named_on_the_sign_in_page_within_5_s(browser, tmp_path):
    """The hostile pass's provider, one byte every 2 s, kept every sign-in page waiting for over 75 s. Two such
    providers now: the server hangs up on each within 5 s of asking it, and a visitor's page names both within 5 s
    of the server asking (they are asked at once, not one after the other)."""
    providers = {"": TricklingProvider(), "second": TricklingProvider()}
    url = f"http://127.0.0.1:{free_port()}"
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "secrets.toml").write_text(
        f'[auth]\nredirect_uri = "{url}/oauth2callback"\ncookie_secret = "{COOKIE_SECRET}"\n'
        + "".join(f'{"[auth." + name + "]" if name else ""}\nclient_id = "pinpoint"\nclient_secret = "s"\n'
                  f'server_metadata_url = "{provider.url}"\n' for name, provider in providers.items()))
    (tmp_path / "roles.toml").write_text(ROLES)
    try:
        with streamlit_app(log=tmp_path / "server.log", ready="first visit:", port=int(url.rsplit(":", 1)[1]),
                           PINPOINT_SERVE="team", HOME=str(tmp_path), PINPOINT_ROLES=str(tmp_path / "roles.toml"),
                           PINPOINT_DB_URL=f"sqlite:///{tmp_path}/runs.sqlite"):
            # the start-up's first page views asked them: a visitor's page asks again once that answer is 15 s old
            while any(len(p.hung_up) < len(p.came) for p in providers.values()):
                time.sleep(0.2)
            time.sleep(max(0.0, max(p.hung_up[-1] for p in providers.values() if p.hung_up) + 15.5
                           - time.monotonic()))
            asked_before = {name: len(p.came) for name, p in providers.items()}
            context = browser.new_context()
            page = watched(context)
            try:
                page.goto(url)
                page.get_by_text("Nobody can sign in now", exact=False).nth(1).wait_for(timeout=120_000)
                named = time.monotonic()
                text = text_of(page.locator("[data-testid='stMain']"))
                assert page.get_by_role("button", name="Sign in", exact=True).count() == 0
            finally:
                context.close()
        asked = min(p.came[asked_before[name]] for name, p in providers.items())  # this visit's first question
        assert named - asked < 5, f"named {named - asked:.1f} s after the server asked"
        for provider in providers.values():
            assert provider.came and len(provider.hung_up) == len(provider.came)
            assert all(gone - came < 5 for came, gone in zip(provider.came, provider.hung_up, strict=True))
            assert f"the sign-in provider at {provider.url} does not answer (no whole answer within 4 s)" in text
    finally:
        for provider in providers.values():
            provider.stop.set()
