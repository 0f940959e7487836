"""How the app is served, and to whom: this machine only (the default) or a team, signed in with roles.

- **This machine only** (``PINPOINT_SERVE`` unset or ``local``): the server listens on the loopback address, and
  the person at the page is the machine's own user, an admin (``Actor.local``). An address beyond this machine
  without the team setting is refused at start-up: listening everywhere is never an accident.
- **A team** (``PINPOINT_SERVE=team``): the operator chooses the address (``--server.address``), and every visitor
  signs in through OpenID Connect (Streamlit's ``st.login``, providers in ``.streamlit/secrets.toml``). Their role
  comes from the roles file (``pinpoint-roles.toml``, or ``PINPOINT_ROLES``). Only
  ``PINPOINT_NO_SIGN_IN=anyone-who-can-reach-it-is-admin`` serves a team without sign-in, every visitor an admin.

The roles file maps e-mail addresses, whole domains (``@example.org``) and the provider's groups claim
(``group:gpu-perf``) to a role; a signed-in person gets the highest role any of their entries gives, and someone on
no entry gets the ``unknown`` role (``viewer`` unless the file says ``refuse``). A file with an error is refused
with its line. No streamlit here: serve.py checks all of it at start-up, and the pages ask it for every visitor.
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import re
import socket
import stat
import threading
import tomllib
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from gpu.core import paths
from gpu.core.access import Role
from gpu.core.errors import AccessRefused, PinPointError

SERVE_ENV = "PINPOINT_SERVE"
MODES = ("local", "team")
NO_SIGN_IN_ENV = "PINPOINT_NO_SIGN_IN"
NO_SIGN_IN_VALUE = "anyone-who-can-reach-it-is-admin"  # the whole value, so it cannot be set by a guess or a typo
ROLES_ENV = "PINPOINT_ROLES"
ROLES_FILE = "pinpoint-roles.toml"  # in the folder the server is started from, beside .streamlit/
SESSION_HOURS_ENV = "PINPOINT_SESSION_HOURS"
SESSION_HOURS = 12.0  # a sign-in older than this is signed in again (Streamlit's own cookie lasts 30 days)
LOOPBACK = ("127.0.0.1", "::1", "localhost")
LOCAL_ADDRESS = "127.0.0.1"
# What Streamlit binds when server.address is empty (set to "") or not set at all: every interface.
EMPTY_BINDS = "0.0.0.0"
UNSET_BINDS = "::"
ROLES_MAX_BYTES = 1 << 20  # a roles file is a list of people: a megabyte is tens of thousands of lines
SESSION_HOURS_RANGE = (1.0, 168.0)  # an hour to a week
# The guide a message points to, in this copy: a checkout's docs/, or the installed copy's (setup.py ships docs/).
DOCS = paths.ROOT / "docs" / "operations" / "team-server.md"
# The keys Streamlit's st.login needs in secrets.toml's [auth] (and in a named provider's [auth.NAME]).
AUTH_KEYS = ("redirect_uri", "cookie_secret")
PROVIDER_KEYS = ("client_id", "client_secret", "server_metadata_url")


class ServingError(PinPointError, ValueError):
    """A serving setting, roles file or sign-in set-up that cannot be used: one line naming the bad value."""


class NotSignedIn(AccessRefused):
    """A team server's visitor who has not signed in, whose sign-in expired, or whom the roles file refuses."""


@dataclass(frozen=True)
class Serving:
    """Where the server listens and whether its visitors sign in."""

    mode: str  # "local" | "team"
    address: str
    sign_in: bool

    def startup_line(self, port: int | str = 8501) -> str:
        """The one line the server prints at start-up: where it listens, and how to serve a team."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        where = f"http://{host}:{port}"
        if self.mode == "local":
            return (f"PinPoint serves {where} to this machine only (loopback). To serve a team: "
                    f"{SERVE_ENV}=team with --server.address 0.0.0.0, sign-in and a roles file ({DOCS}).")
        reach = ("loopback: reached through a proxy on this machine" if is_loopback(self.address) else
                 "every interface: the network" if every_interface(self.address) else "the network")
        how = ("sign-in required, roles from the roles file" if self.sign_in else
               f"NO sign-in ({NO_SIGN_IN_ENV}): every visitor is an admin")
        return f"PinPoint serves a team at {where} ({reach}): {how}."


def bound_address(address: str | None) -> str:
    """The address Streamlit binds for its ``server.address`` option: an empty value binds every interface
    (0.0.0.0), as does an unset one (::, both IPv4 and IPv6)."""
    if address is None:
        return UNSET_BINDS
    return address or EMPTY_BINDS


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def every_interface(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_unspecified
    except ValueError:
        return False


def serving(env: Mapping[str, str] | None = None, address: str | None = None) -> Serving:
    """The serving settings from ``env`` (the process's environment) and Streamlit's ``server.address``: the
    address reported is the one Streamlit binds. Every interface (an empty or unset address, 0.0.0.0, ::) is served
    only to a team with sign-in; any other spelling is refused with one line."""
    env = os.environ if env is None else env
    mode = (env.get(SERVE_ENV) or "local").strip().lower()
    if mode not in MODES:
        raise ServingError(f"{SERVE_ENV}={env.get(SERVE_ENV)[:40]!r} is not a serving mode: use local (this "
                           "machine only, the default) or team")
    bound = bound_address(address)
    if bound != bound.strip() or any(c.isspace() for c in bound) or bound == "*":
        raise ServingError(f"server.address {bound[:60]!r} is not an address to listen on: use {LOCAL_ADDRESS} (this "
                           f"machine only), or {EMPTY_BINDS} for every interface with {SERVE_ENV}=team and sign-in")
    opt_out = env.get(NO_SIGN_IN_ENV, "").strip()
    if opt_out and opt_out != NO_SIGN_IN_VALUE:
        raise ServingError(f"{NO_SIGN_IN_ENV}={opt_out[:40]!r} is not the opt-out: to serve a team without sign-in, "
                           f"set it to exactly {NO_SIGN_IN_VALUE}")
    shown = bound[:60] if address == bound else \
        f"{'not set' if address is None else repr(address)} (Streamlit binds {bound}: every interface)"
    if mode == "local":
        if not is_loopback(bound):
            raise ServingError(f"server.address {shown} serves beyond this machine: set {SERVE_ENV}=team to "
                               f"serve a team (sign-in required, {DOCS}), or serve on {LOCAL_ADDRESS}")
        return Serving("local", bound, sign_in=False)
    if opt_out and every_interface(bound):
        raise ServingError(f"server.address {shown} listens on every interface, and {NO_SIGN_IN_ENV} would make "
                           "everyone on the network an admin: serve every interface with sign-in, or without it "
                           "on one address (this machine's own on the team's network, or loopback behind a proxy)")
    return Serving("team", bound, sign_in=not opt_out)


# --- the roles file -------------------------------------------------------------------------------------------
ROLE_WORDS = {role.word: role for role in Role}
UNKNOWN_CHOICES = (*ROLE_WORDS, "refuse")
TOP_KEYS = {"unknown", "roles"}
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
DOMAIN = re.compile(r"^@[^@\s]+\.[^@\s]+$")


def roles_path(env: Mapping[str, str] | None = None, folder: Path | None = None) -> Path:
    env = os.environ if env is None else env
    path = Path(env.get(ROLES_ENV) or ROLES_FILE).expanduser()
    return path if path.is_absolute() else (folder or Path.cwd()) / path


@dataclass(frozen=True)
class Roles:
    """The roles file, read: who gets which role."""

    emails: dict[str, Role] = field(default_factory=dict)
    domains: dict[str, Role] = field(default_factory=dict)  # "example.org"
    groups: dict[str, Role] = field(default_factory=dict)
    unknown: Role | None = Role.VIEWER  # None: someone on no entry is refused

    def role_for(self, email: str | None, groups: Iterable[str] = (), email_verified: bool = True) -> Role | None:
        """The highest role any entry gives; ``unknown`` when none does (None: refused). An e-mail address the
        provider says it has not verified matches no address or domain entry."""
        found: list[Role] = []
        if email and email_verified:
            email = email.strip().lower()
            found += [self.emails[email]] if email in self.emails else []
            domain = email.rpartition("@")[2]
            found += [self.domains[domain]] if domain in self.domains else []
        found += [self.groups[g] for g in groups if isinstance(g, str) and g in self.groups]
        return max(found) if found else self.unknown


def _line_of(text: str, key: str) -> int | None:
    """The line that sets ``key`` (bare or quoted, or as a [table]): tomllib reports no positions for values."""
    setting = re.compile(rf"""^\s*(?:(["']?){re.escape(key)}\1\s*=|\[\s*{re.escape(key)}\s*\])""")
    for number, line in enumerate(text.splitlines(), start=1):
        if setting.match(line):
            return number
    return None


def parse_roles(text: str, name: str = ROLES_FILE) -> Roles:
    """Read a roles file's text; ServingError names the file, the line and what is wrong with it."""
    def refuse(problem: str, needle: str | None = None) -> ServingError:
        line = _line_of(text, needle) if needle else None
        return ServingError(f"{name}{f', line {line}' if line else ''}: {problem}")

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        detail = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc)).strip()
        raise ServingError(f"{name}{f', line {match.group(1)}' if match else ''}: not TOML ({detail})") from None
    for key in data:
        if key not in TOP_KEYS:
            raise refuse(f"unknown setting {key!r} (the settings are unknown and [roles])", key)
    unknown_word = data.get("unknown", "viewer")
    if unknown_word not in UNKNOWN_CHOICES:
        raise refuse(f"unknown = {str(unknown_word)[:40]!r} is not one of {', '.join(UNKNOWN_CHOICES)}", "unknown")
    table = data.get("roles", {})
    if not isinstance(table, dict):
        raise refuse("roles must be a table ([roles], one line per person, domain or group)", "roles")
    roles = Roles(unknown=ROLE_WORDS.get(unknown_word))
    for key, word in table.items():
        shown = key[:60]
        if not isinstance(word, str) or word not in ROLE_WORDS:
            raise refuse(f"{shown!r} = {str(word)[:40]!r}: the role is one of {', '.join(ROLE_WORDS)}", key)
        role = ROLE_WORDS[word]
        entry = key.strip().lower()
        # Addresses and domains compare case-folded, so two spellings of one person are one entry: the highest role
        # of the two wins, whatever their order in the file.
        if entry.startswith("group:") and entry[6:].strip():
            _raise(roles.groups, key.strip()[6:].strip(), role)  # groups keep their case: providers send them so
        elif DOMAIN.match(entry):
            _raise(roles.domains, entry[1:], role)
        elif EMAIL.match(entry):
            _raise(roles.emails, entry, role)
        else:
            raise refuse(f"{shown!r} is not an e-mail address, a domain (@example.org) or a group (group:NAME)", key)
    return roles


def _raise(entries: dict[str, Role], key: str, role: Role) -> None:
    entries[key] = max(entries.get(key, role), role)


def read_roles(path: Path) -> Roles:
    """The roles file at ``path``: a regular file of at most ROLES_MAX_BYTES (a FIFO or a device is never opened
    for reading, so it cannot hang the server or fill its memory)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ServingError(f"no roles file at {path}: a team server with sign-in needs one ({ROLES_ENV} names "
                           f"another path; {DOCS})") from None
    except OSError as exc:
        raise ServingError(f"the roles file {path} cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ServingError(f"the roles file {path} is not a regular file: name a TOML file ({ROLES_ENV})")
    if info.st_size > ROLES_MAX_BYTES:
        raise ServingError(f"the roles file {path} is {info.st_size:,} bytes, over the {ROLES_MAX_BYTES:,}-byte "
                           "limit of a roles file")
    try:
        with path.open("rb") as handle:
            data = handle.read(ROLES_MAX_BYTES + 1)  # the file may have grown since stat
        if len(data) > ROLES_MAX_BYTES:
            raise ServingError(f"the roles file {path} is over the {ROLES_MAX_BYTES:,}-byte limit of a roles file")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ServingError(f"the roles file {path} cannot be read: {exc}") from None
    return parse_roles(text, str(path))


# --- the sign-in set-up and a signed-in session ---------------------------------------------------------------
def providers(auth: Mapping | None) -> dict[str, str]:
    """The sign-in providers of secrets.toml's [auth]: name → discovery address ("" is the default provider, the
    one ``st.login()`` without a name uses). ServingError names the first setting that is missing."""
    if not auth:
        raise ServingError(f"a team server with sign-in needs [auth] in .streamlit/secrets.toml ({DOCS})")
    for key in AUTH_KEYS:
        if not auth.get(key):
            raise ServingError(f".streamlit/secrets.toml: [auth] has no {key}")
    found: dict[str, str] = {}
    if auth.get("server_metadata_url") or auth.get("client_id"):
        found[""] = auth.get("server_metadata_url", "")
    for name, section in auth.items():  # [auth.NAME]; a table of settings (client_kwargs) is not a provider
        if isinstance(section, Mapping) and any(key in section for key in PROVIDER_KEYS):
            found[name] = section.get("server_metadata_url", "")
    if not found:
        raise ServingError(".streamlit/secrets.toml: [auth] names no provider (client_id, client_secret and "
                           "server_metadata_url, in [auth] or in [auth.NAME])")
    for name, _ in found.items():
        section = auth if name == "" else auth[name]
        for key in PROVIDER_KEYS:
            if not section.get(key):
                raise ServingError(f".streamlit/secrets.toml: [auth{'.' + name if name else ''}] has no {key}")
    return found


PROVIDER_DEADLINE_S = 4.0  # connect, send and read the whole discovery document: a page says why within 5 s
PROVIDER_MAX_BYTES = 1_000_000


def fetch_discovery(url: str, deadline_s: float = PROVIDER_DEADLINE_S) -> bytes:
    """The body of a provider's discovery document, fetched within ``deadline_s`` in all (connecting and reading
    together): a provider that answers a byte at a time is cut off at the deadline like a silent one. OSError (or
    ValueError for an address that is not http(s)) says why not."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url[:80]} is not an http(s) address")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=deadline_s)
    found: dict = {}

    def fetch() -> None:
        try:
            connection.request("GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                               headers={"Accept": "application/json"})
            answer = connection.getresponse()
            if answer.status != 200:
                raise OSError(f"HTTP {answer.status} {answer.reason}")
            found["body"] = answer.read(PROVIDER_MAX_BYTES + 1)
        except Exception as exc:  # handed to the caller, whatever it is
            found["error"] = exc

    worker = threading.Thread(target=fetch, name="provider-discovery", daemon=True)
    worker.start()
    worker.join(deadline_s)
    if worker.is_alive():  # wake the read that waits for the next byte, so the thread ends now
        try:
            if connection.sock is not None:
                connection.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        connection.close()
        raise TimeoutError(f"no whole answer within {deadline_s:g} s")
    connection.close()
    if "error" in found:
        raise found["error"]
    if len(found["body"]) > PROVIDER_MAX_BYTES:
        raise ValueError(f"an answer over {PROVIDER_MAX_BYTES:,} bytes")
    return found["body"]


def session_hours(env: Mapping[str, str] | None = None) -> float:
    env = os.environ if env is None else env
    raw = env.get(SESSION_HOURS_ENV, "").strip()
    if not raw:
        return SESSION_HOURS
    try:
        hours = float(raw)
    except ValueError:
        hours = float("nan")
    low, high = SESSION_HOURS_RANGE
    if not low <= hours <= high:  # also refuses nan and inf: a sign-in that never expires is not a setting
        raise ServingError(f"{SESSION_HOURS_ENV}={raw[:20]!r} is not a number of hours from {low:g} to {high:g}")
    return hours


def session_expired(claims: Mapping, hours: float, now: datetime | None = None) -> str | None:
    """Why a signed-in session is over (one line), or None: its sign-in (the ID token's ``iat``) is older than
    ``hours``, or has no time at all."""
    issued = claims.get("iat")
    if not isinstance(issued, int | float) or isinstance(issued, bool):
        return "this sign-in carries no time: sign in again"
    now = now or datetime.now(UTC)
    age_h = (now.timestamp() - float(issued)) / 3600
    if age_h > hours:
        return f"this sign-in is {age_h:.0f} h old, longer than this server's {hours:g} h: sign in again"
    return None
