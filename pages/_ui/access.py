"""The person at this page: ``current_actor()`` is who every action on the page is done by, and is checked.

Served on the loopback address only (gpu.core.serving), the app is the machine owner's own tool: the actor is the
OS user, an admin. Served to a team, the actor is the person signed in through OpenID Connect (``st.user``, which
Streamlit fills from its signed session cookie only), with the role the roles file gives them. Nothing from the
address or the page (a query parameter, a widget's value) ever names a person or a role.

``sign_in_gate`` (app.py, before any page) shows the sign-in screen to a visitor who has not signed in and the
person and their role in the sidebar to one who has. A page asks ``why_not(action)`` to disable a control (the
reason is its help text), and an action starts with ``permitted(action)``: the check that counts, made by the
action itself whatever the browser sent.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import streamlit as st
from streamlit import config

from gpu.core import serving as srv
from gpu.core.access import Actor, Role, require
from gpu.core.errors import AccessRefused, StoreError
from gpu.core.text import plain
from gpu.results.persistence.store import RunStore


def serving_now() -> srv.Serving:
    """This server's serving settings (ServingError when they cannot be used: serve.py refuses to start then)."""
    return srv.serving(os.environ, config.get_option("server.address"))


_roles_cache: dict[tuple[str, int, int], srv.Roles] = {}


def roles() -> srv.Roles:
    """The roles file, read again whenever it changes: an operator's edit applies at the next page view."""
    path = srv.roles_path()
    try:
        stat = path.stat()
    except OSError:
        return srv.read_roles(path)  # raises the one line that says what is missing
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _roles_cache:
        _roles_cache.clear()
        _roles_cache[key] = srv.read_roles(Path(path))
    return _roles_cache[key]


# who → when they last signed out on this server (seconds since the epoch): at once, even where the store cannot
# record it; the store (``RunStore.sign_out``) keeps it for every server of the store and across restarts.
_signed_out: dict[str, float] = {}


_stored_sign_outs: dict[str, tuple[float, float | None]] = {}  # who → (when asked, the store's answer)
STORED_SIGN_OUT_TTL_S = 2.0  # a page view asks for its actor many times: the store once per person per 2 s


@st.cache_resource(show_spinner=False, max_entries=8)
def _sign_out_store(url: str | None) -> RunStore:
    return RunStore(url)  # one per store address (PINPOINT_DB_URL as it is now), shared by every session


def sign_out_store() -> RunStore | None:
    """The runs store that keeps sign-outs; None when it cannot be opened (then this server's memory keeps them)."""
    try:
        return _sign_out_store(os.environ.get("PINPOINT_DB_URL") or None)
    except StoreError:
        return None


def signed_out_at(who: str) -> float | None:
    """When ``who`` last signed out, on this server or in the runs store; None when never (or unknown)."""
    here = _signed_out.get(who)
    asked, stored = _stored_sign_outs.get(who, (-1e18, None))
    if time.monotonic() - asked > STORED_SIGN_OUT_TTL_S:
        store = sign_out_store()
        try:
            stored = store.signed_out_at(who) if store is not None else None
        except StoreError:
            stored = None
        _stored_sign_outs[who] = (time.monotonic(), stored)
    times = [t for t in (here, stored) if t is not None]
    return max(times) if times else None


def sign_out() -> None:
    """The Sign out button's on_click: the sign-in is revoked (on this server at once, and in the runs store's audit
    trail), then Streamlit's cookie is cleared. A copy of the cookie no longer signs anyone in."""
    try:
        actor = current_actor()
    except (AccessRefused, srv.ServingError):
        actor = None
    if actor is not None:
        _signed_out[actor.who] = float(int(time.time()))  # to the second, as the store keeps it
        _stored_sign_outs.pop(actor.who, None)
        store = sign_out_store()
        if store is not None:
            try:
                store.sign_out(actor)
            except (StoreError, AccessRefused):
                pass  # kept on this server; the store cannot record it (read-only, or gone)
    st.logout()


def signed_in_actor(claims: dict) -> Actor:
    """The actor of a signed-in session's claims (the ID token's, as Streamlit keeps them in its signed cookie);
    NotSignedIn when the session is over, was signed out, or the roles file turns the person away."""
    if reason := srv.session_expired(claims, srv.session_hours()):
        raise srv.NotSignedIn(reason)
    email = claims.get("email") if isinstance(claims.get("email"), str) else None
    groups = claims.get("groups") if isinstance(claims.get("groups"), list) else []
    who = email or str(claims.get("sub") or "")
    if not who:
        raise srv.NotSignedIn("the sign-in provider named nobody (no email or sub claim)")
    out = signed_out_at(who)
    if out is not None and float(claims["iat"]) < out:  # a sign-in from before the sign-out: revoked
        raise srv.NotSignedIn(f"{who} signed out of this sign-in: sign in again")
    role = roles().role_for(email, groups, email_verified=claims.get("email_verified") is not False)
    if role is None:
        raise srv.NotSignedIn(f"{who} is not on this server's roles list: ask its operator for a role")
    return Actor(who, role, "app")


def current_actor() -> Actor:
    """Who this page's actions are done by. AccessRefused (NotSignedIn) for a team server's visitor who is not
    signed in; ServingError when the serving settings or the roles file cannot be used."""
    plan = serving_now()
    if plan.mode == "local":
        return Actor.local(source="app")
    if not plan.sign_in:  # the operator's explicit opt-out: whoever reaches the server is an admin
        return Actor(f"anyone@{st.context.ip_address or 'unknown'}", Role.ADMIN, "app")
    if not st.user.is_logged_in:
        raise srv.NotSignedIn("sign in first")
    return signed_in_actor(st.user.to_dict())


def why_not(action: str) -> str | None:
    """None when this page's person may do ``action``, else the one line a disabled control shows as its reason (as
    plain text: it names the person as their provider spells them)."""
    try:
        reason = current_actor().why_not(action)
    except (AccessRefused, srv.ServingError) as exc:
        reason = str(exc)
    return plain(reason, None) if reason else None


def permitted(action: str) -> bool:
    """An action's first step: True when this page's person may do it; else the refusal is shown (one line) and
    nothing is done. Checked here, in the action, whatever the browser sent (the store checks the actor it is given
    again, in the same transaction as the change)."""
    try:
        require(current_actor(), action)
    except (AccessRefused, srv.ServingError) as exc:
        st.error(f"Refused: {plain(exc, None)}", icon=":material/block:")
        return False
    return True


def auth_settings():
    """secrets.toml's [auth] (None where there is no secrets file or no [auth]); a secrets file that cannot be read
    is a ServingError naming why."""
    try:
        return st.secrets.get("auth")
    except FileNotFoundError as exc:  # StreamlitSecretNotFoundError: no secrets file, or one that is not TOML
        if str(exc).startswith("No secrets found"):
            return None
        raise srv.ServingError(f"the secrets file cannot be read: {str(exc).strip().splitlines()[0]}") from None


@st.cache_data(ttl=15, show_spinner=False)
def provider_problems(urls: tuple[str, ...]) -> dict[str, str | None]:
    """Each provider's ``provider_problem``, all asked at once: the sign-in screen waits for the slowest one's
    deadline, not for the sum of them. Asked again after 15 s, so a provider back up is used without a restart."""
    with ThreadPoolExecutor(max_workers=max(1, len(urls)), thread_name_prefix="provider-check") as pool:
        return dict(zip(urls, pool.map(provider_problem, urls), strict=True))


def provider_problem(url: str) -> str | None:
    """Why the provider behind ``url`` (its OpenID discovery document) cannot sign anyone in now, or None."""
    try:  # one deadline for connecting and reading: a provider that trickles is cut off like a silent one
        document = json.loads(srv.fetch_discovery(url))
    except (OSError, ValueError) as exc:
        return f"the sign-in provider at {url} does not answer ({getattr(exc, 'reason', None) or exc})"
    if not isinstance(document, dict) or "authorization_endpoint" not in document:
        return f"the sign-in provider at {url} answers no OpenID Connect discovery document"
    return None


def sign_in_screen(plan: srv.Serving) -> None:
    """What a visitor of a team server sees before signing in: a Sign in button per provider that answers; when
    none does, that it is down and nothing else."""
    st.title("PinPoint")
    try:
        found = srv.providers(auth_settings())
    except srv.ServingError as exc:
        st.error(f"Sign-in is not set up on this server: {plain(exc, None)}")
        return
    st.markdown("This PinPoint server is shared by a team: **sign in** to see its runs and, with a role that "
                "allows it, to measure, import and manage runs.")
    problems = provider_problems(tuple(dict.fromkeys(found.values())))
    down = {name: problem for name, url in found.items() if (problem := problems[url])}
    for name in found:
        if name in down:
            continue
        label = f"Sign in with {name}" if name else "Sign in"
        st.button(label, key=f"sign_in_{name or 'default'}", type="primary",
                  on_click=st.login, args=(name,) if name else ())
    for problem in down.values():
        st.error(f"Nobody can sign in now: {plain(problem, None)}. Nothing is served until it answers.",
                 icon=":material/cloud_off:")


def sign_in_gate() -> Actor | None:
    """Before any page: the actor of this page view, shown in the sidebar; None when the page must not run (the
    visitor was shown the sign-in screen, or why they may not come in)."""
    try:
        plan = serving_now()
    except srv.ServingError as exc:
        st.error(f"This server's settings cannot be used: {plain(exc, None)}")
        return None
    if plan.sign_in and not st.user.is_logged_in:
        sign_in_screen(plan)
        return None
    try:
        actor = current_actor()
    except srv.NotSignedIn as exc:
        st.title("PinPoint")
        st.warning(plain(exc, None), icon=":material/lock:")
        st.button("Sign in again" if "sign in again" in str(exc) else "Sign out", key="sign_out", on_click=st.logout)
        return None
    except srv.ServingError as exc:  # the roles file went wrong after start-up: nobody gets a role from it
        st.error(f"The roles file cannot be used: {plain(exc, None)}")
        return None
    with st.sidebar:
        if plan.mode == "local":
            st.caption(f"This machine only · {plain(actor.who)} · {actor.role.word}")
        elif not plan.sign_in:
            st.caption(f"No sign-in on this server: every visitor is an {actor.role.word}")
        else:
            st.markdown(f"**Signed in** · {plain(actor.who)} · {actor.role.word}")
            st.button("Sign out", key="sign_out", on_click=sign_out)
    return actor
