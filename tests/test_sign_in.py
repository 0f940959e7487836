"""Serving a team: the serving mode and its address, the opt-out, the roles file and a signed-in session's age (pure
Python), and serve.py refusing to start with one line."""

import os
import re
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpu.core import serving as srv
from gpu.core.access import Role

ROOT = Path(__file__).resolve().parent.parent
ROLES = """\
unknown = "viewer"

[roles]
"Ada@Example.org" = "admin"
"@example.org" = "member"
"group:gpu-admins" = "admin"
"""
AUTH = {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": "x" * 32, "client_id": "pinpoint",
        "client_secret": "s", "server_metadata_url": "http://127.0.0.1:1/.well-known/openid-configuration"}


def test_by_default_the_app_serves_this_machine_only_without_sign_in():
    plan = srv.serving({}, "127.0.0.1")  # .streamlit/config.toml's address
    assert (plan.mode, plan.address, plan.sign_in) == ("local", "127.0.0.1", False)
    assert plan.startup_line(8501).startswith("PinPoint serves http://127.0.0.1:8501 to this machine only")
    assert "PINPOINT_SERVE=team" in plan.startup_line()
    assert srv.serving({}, "localhost").mode == "local"


def test_the_start_up_line_names_a_guide_this_copy_holds():
    """Not a path into a checkout: an installed copy ships docs/ (tests/test_install.py reads the installed line)."""
    from pathlib import Path

    from gpu.core import paths

    guide = Path(srv.DOCS)
    assert guide.is_absolute() and guide.is_file() and guide.is_relative_to(paths.ROOT)
    assert f"({guide})" in srv.serving({}, "127.0.0.1").startup_line()


def test_an_address_beyond_this_machine_needs_the_team_setting_and_then_sign_in():
    with pytest.raises(srv.ServingError, match="server.address 0.0.0.0 serves beyond this machine: set "
                                               "PINPOINT_SERVE=team"):
        srv.serving({}, "0.0.0.0")
    plan = srv.serving({"PINPOINT_SERVE": "team"}, "0.0.0.0")
    assert (plan.mode, plan.sign_in) == ("team", True)
    assert "sign-in required" in plan.startup_line() and "the network" in plan.startup_line()


def test_only_the_whole_opt_out_value_serves_a_team_without_sign_in():
    env = {"PINPOINT_SERVE": "team", "PINPOINT_NO_SIGN_IN": srv.NO_SIGN_IN_VALUE}
    plan = srv.serving(env, "10.0.0.5")
    assert not plan.sign_in and "every visitor is an admin" in plan.startup_line()
    for guess in ("1", "true", "yes"):
        with pytest.raises(srv.ServingError, match=f"PINPOINT_NO_SIGN_IN='{guess}' is not the opt-out"):
            srv.serving({**env, "PINPOINT_NO_SIGN_IN": guess}, "10.0.0.5")
    with pytest.raises(srv.ServingError, match="'everyone' is not a serving mode"):
        srv.serving({"PINPOINT_SERVE": "everyone"}, None)


def test_the_roles_file_gives_the_highest_role_of_a_persons_entries():
    roles = srv.parse_roles(ROLES)
    assert roles.role_for("ada@example.org") is Role.ADMIN  # addresses compare without case
    assert roles.role_for("bob@example.org") is Role.MEMBER  # the domain
    assert roles.role_for("eve@elsewhere.net", groups=["gpu-admins"]) is Role.ADMIN  # the groups claim
    assert roles.role_for("eve@elsewhere.net", groups=["GPU-ADMINS"]) is Role.VIEWER  # groups keep their case
    assert roles.role_for("eve@elsewhere.net") is Role.VIEWER  # unknown
    assert roles.role_for(None) is Role.VIEWER


def test_an_address_the_provider_has_not_verified_matches_no_address_or_domain():
    roles = srv.parse_roles(ROLES)
    assert roles.role_for("ada@example.org", email_verified=False) is Role.VIEWER
    assert roles.role_for("ada@example.org", groups=["gpu-admins"], email_verified=False) is Role.ADMIN


def test_unknown_people_can_be_refused():
    roles = srv.parse_roles(ROLES.replace('unknown = "viewer"', 'unknown = "refuse"'))
    assert roles.role_for("eve@elsewhere.net") is None and roles.role_for("bob@example.org") is Role.MEMBER


@pytest.mark.parametrize("text,message", [
    ('[roles]\n"ada@example.org" = "owner"\n', r"roles.toml, line 2: 'ada@example.org' = 'owner': the role is one of "
                                               "viewer, member, admin"),
    ('[roles]\n"ada@example.org" = "admin"\n"example.org" = "member"\n',
     r"roles.toml, line 3: 'example.org' is not an e-mail address, a domain \(@example.org\) or a group"),
    ('unknown = "nobody"\n', r"roles.toml, line 1: unknown = 'nobody' is not one of viewer, member, admin, refuse"),
    ('admins = ["ada@example.org"]\n', r"roles.toml, line 1: unknown setting 'admins'"),
    ('[roles]\n"ada@example.org" = admin\n', r"roles.toml, line 2: not TOML \(Invalid value\)"),
    ('roles = "ada"\n', r"roles.toml, line 1: roles must be a table"),
])
def test_a_roles_file_with_an_error_is_refused_with_its_line(text, message):
    with pytest.raises(srv.ServingError, match=message):
        srv.parse_roles(text, "roles.toml")


def test_a_missing_roles_file_says_where_it_was_looked_for(tmp_path):
    path = srv.roles_path({"PINPOINT_ROLES": "team/roles.toml"}, tmp_path)
    assert path == tmp_path / "team" / "roles.toml"
    with pytest.raises(srv.ServingError, match=f"no roles file at {path}"):
        srv.read_roles(path)


def test_sign_in_settings_name_the_first_missing_one():
    assert srv.providers(AUTH) == {"": AUTH["server_metadata_url"]}
    assert srv.providers({**AUTH, "client_kwargs": {"prompt": "login"}}) == {"": AUTH["server_metadata_url"]}
    named = {"redirect_uri": AUTH["redirect_uri"], "cookie_secret": "c",
             "corp": {k: AUTH[k] for k in srv.PROVIDER_KEYS}}
    assert srv.providers(named) == {"corp": AUTH["server_metadata_url"]}
    with pytest.raises(srv.ServingError, match=r"needs \[auth\] in .streamlit/secrets.toml"):
        srv.providers(None)
    with pytest.raises(srv.ServingError, match=r"\[auth\] has no cookie_secret"):
        srv.providers({k: v for k, v in AUTH.items() if k != "cookie_secret"})
    with pytest.raises(srv.ServingError, match=r"\[auth.corp\] has no client_secret"):
        srv.providers({**named, "corp": {**named["corp"], "client_secret": ""}})


def test_a_sign_in_older_than_the_session_limit_is_over():
    now = datetime(2026, 11, 25, 12, tzinfo=UTC)
    assert srv.session_expired({"iat": now.timestamp() - 3600}, 12, now) is None
    assert "is 13 h old, longer than this server's 12 h" in srv.session_expired({"iat": now.timestamp() - 13 * 3600},
                                                                                12, now)
    assert "carries no time" in srv.session_expired({"iat": "yesterday"}, 12, now)
    assert srv.session_hours({}) == srv.SESSION_HOURS and srv.session_hours({"PINPOINT_SESSION_HOURS": "1.5"}) == 1.5
    for hours in ("-1", "0.5", "169", "inf", "nan", "1e12", "soon"):
        with pytest.raises(srv.ServingError, match=f"'{hours}' is not a number of hours from 1 to 168"):
            srv.session_hours({"PINPOINT_SESSION_HOURS": hours})
    assert srv.session_hours({"PINPOINT_SESSION_HOURS": "168"}) == 168


def test_two_spellings_of_one_address_give_the_higher_role_whatever_their_order():
    for first, second in (("admin", "viewer"), ("viewer", "admin")):
        roles = srv.parse_roles(f'[roles]\n"ada@example.org" = "{first}"\n"ADA@Example.org" = "{second}"\n'
                                f'"@Example.org" = "{first}"\n"@example.ORG" = "{second}"\n')
        assert roles.role_for("ada@example.org") is Role.ADMIN
        assert roles.role_for("bob@example.org") is Role.ADMIN


def test_the_roles_file_must_be_a_regular_file_under_the_size_limit(tmp_path):
    fifo = tmp_path / "roles.fifo"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    for path in (tmp_path, Path("/dev/zero"), fifo):  # on a build that opened them: a directory fails first
        with pytest.raises(srv.ServingError, match=f"the roles file {path} is not a regular file"):
            srv.read_roles(path)
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * srv.ROLES_MAX_BYTES + "\n")
    with pytest.raises(srv.ServingError, match=r"is 1,048,579 bytes, over the 1,048,576-byte limit"):
        srv.read_roles(big)


@pytest.mark.parametrize("address,bound", [(None, "::"), ("", "0.0.0.0"), ("0.0.0.0", "0.0.0.0"), ("::", "::")])
def test_every_interface_in_any_spelling_is_served_only_to_a_team_with_sign_in(address, bound):
    with pytest.raises(srv.ServingError, match="serves beyond this machine: set PINPOINT_SERVE=team"):
        srv.serving({}, address)
    plan = srv.serving({"PINPOINT_SERVE": "team"}, address)
    assert (plan.address, plan.sign_in) == (bound, True)  # the address Streamlit binds, not the loopback
    assert "(every interface: the network): sign-in required" in plan.startup_line()
    with pytest.raises(srv.ServingError, match="listens on every interface, and PINPOINT_NO_SIGN_IN would make "
                                               "everyone on the network an admin"):
        srv.serving({"PINPOINT_SERVE": "team", "PINPOINT_NO_SIGN_IN": srv.NO_SIGN_IN_VALUE}, address)


@pytest.mark.parametrize("address", [" ", "*", "\t127.0.0.1"])
def test_an_address_streamlit_cannot_bind_is_refused_in_one_line(address):
    for env in ({}, {"PINPOINT_SERVE": "team"}):
        with pytest.raises(srv.ServingError, match=f"server.address {re.escape(repr(address))} is not an address to "
                                                   "listen on"):
            srv.serving(env, address)


def start(tmp_path, address: str = "127.0.0.1", **env) -> subprocess.CompletedProcess:
    """serve.py's start-up check, as `streamlit run serve.py --server.address ADDRESS` runs it (the module imported
    once Streamlit's options are set), without a server."""
    code = f"from streamlit import config; config.set_option('server.address', {address!r}); import serve"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PINPOINT_BACKEND": "replay", "HOME": str(tmp_path), **env})


@pytest.mark.slow
def test_serve_refuses_to_start_with_one_line_when_a_team_setting_cannot_be_used(tmp_path):
    roles = tmp_path / "roles.toml"
    roles.write_text('[roles]\n"ada@example.org" = "owner"\n')
    secrets = tmp_path / ".streamlit" / "secrets.toml"
    secrets.parent.mkdir()
    secrets.write_text("[auth]\n" + "".join(f'{k} = "{v}"\n' for k, v in AUTH.items()))
    cases = [
        ({"PINPOINT_SERVE": "team", "PINPOINT_ROLES": str(roles)},
         f"PinPoint does not start: {roles}, line 2: 'ada@example.org' = 'owner': the role is one of"),
        ({"PINPOINT_SERVE": "team", "PINPOINT_ROLES": str(tmp_path / "none.toml"), "HOME": "/nonexistent"},
         "PinPoint does not start: a team server with sign-in needs [auth] in .streamlit/secrets.toml"),
        ({"address": "0.0.0.0"}, "PinPoint does not start: server.address 0.0.0.0 serves beyond this machine"),
        ({"address": ""}, "PinPoint does not start: server.address '' (Streamlit binds 0.0.0.0: every interface) "
                          "serves beyond this machine"),
        ({"address": " "}, "PinPoint does not start: server.address ' ' is not an address to listen on"),
    ]
    for env, line in cases:
        done = start(tmp_path, **env)
        assert done.returncode == 2, done.stderr[-2000:]
        assert "Traceback" not in done.stderr and line in done.stderr, done.stderr[-2000:]
    roles.write_text('[roles]\n"ada@example.org" = "admin"\n')
    done = start(tmp_path, PINPOINT_SERVE="team", PINPOINT_ROLES=str(roles))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "PinPoint serves a team at http://127.0.0.1:8501 (loopback: reached through a proxy on this machine): " \
           "sign-in required" in done.stdout


def _provider(handler_body) -> tuple[str, threading.Event]:
    """A provider on a loopback port whose connections are served by ``handler_body(connection, stop)``."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        with server:
            server.settimeout(0.2)
            while not stop.is_set():
                try:
                    connection, _ = server.accept()
                except TimeoutError:
                    continue
                threading.Thread(target=handler_body, args=(connection, stop), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{server.getsockname()[1]}/.well-known/openid-configuration", stop


def _trickle(connection, stop):
    """Answers one byte every 0.5 s, for a minute: every read gets something before its own timeout."""
    with connection:
        connection.recv(65536)
        body = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{"authorization_endpoint": "x"}' * 100
        for byte in body:
            if stop.wait(0.5):
                return
            try:
                connection.sendall(bytes([byte]))
            except OSError:
                return


def test_a_trickling_provider_is_cut_off_at_the_total_deadline():
    url, stop = _provider(_trickle)
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match="no whole answer within 1 s"):
            srv.fetch_discovery(url, deadline_s=1.0)
        # a read-by-read timeout would wait for the whole minute of bytes
        assert time.monotonic() - started < 30
        assert srv.PROVIDER_DEADLINE_S < 5  # so the sign-in page says why within 5 s
    finally:
        stop.set()


def test_an_answering_provider_is_read_whole():
    def answer(connection, stop):
        with connection:
            connection.recv(65536)
            connection.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 32\r\n\r\n{"authorization_endpoint": "x"}\n')

    url, stop = _provider(answer)
    try:
        assert srv.fetch_discovery(url) == b'{"authorization_endpoint": "x"}\n'
    finally:
        stop.set()
    with pytest.raises(ValueError, match="is not an http"):
        srv.fetch_discovery("file:///etc/passwd")
