"""Limits on what a browser session may upload (serve.py's middleware in front of Streamlit's upload route).

Streamlit keeps every uploaded file in the server's memory until its session ends, and bounds only each request
(``server.maxUploadSize``). A file is uploaded by a PUT to ``/_stcore/upload_file/SESSION/FILE`` before any script
runs, so no page's check sees it. Here, before the body is read:

- on a team server with sign-in, nothing is accepted from a session that has not signed in (the sign-in screen's
  session included), whose sign-in is over or signed out, or whose role may not import: 403 with one line;
- every session may keep at most ``MAX_FILES`` files and ``MAX_BYTES`` bytes at once (a file removed from its
  uploader frees its share; a request must say its length): 413 or 411 with one line;
- a session that has ended is forgotten, and so are its files: Streamlit drops a session's files when it closes
  it, but a session whose browser went away is kept for a reconnect (``server.disconnectedSessionTTL``, 120 s by
  default) and then forgotten with its files still in memory, for as long as the server runs.
  ``sweep_ended_uploads`` (started by serve.py) drops those every ``SWEEP_S`` seconds.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable

from starlette.responses import PlainTextResponse
from streamlit import config
from streamlit.logger import get_logger
from streamlit.runtime import Runtime

from gpu.core import serving as srv
from gpu.core.errors import AccessRefused
from pages._ui import access

MAX_FILES = 16  # files a session keeps at once (the Runs page's import takes a handful)
MAX_BYTES = 256 * 1024 * 1024  # bytes a session keeps at once, all its files together
SWEEP_S = 5.0  # how often the files of sessions Streamlit forgot are looked for
LOG = get_logger("pinpoint.uploads")


def session_user(session_id: str) -> dict | None:
    """What Streamlit knows of a session's person (its ``st.user``: ``is_logged_in`` and the sign-in's claims), or
    None when there is no such session."""
    if not Runtime.exists():
        return None
    info = Runtime.instance()._session_mgr.get_active_session_info(session_id)  # noqa: SLF001 (no public way)
    if info is None:
        return None
    return dict(getattr(info.session, "_user_info", {}) or {})


def session_alive(session_id: str) -> bool:
    """True while Streamlit keeps the session, and so its files: connected, or disconnected and waiting for its
    browser to come back (``server.disconnectedSessionTTL``)."""
    return Runtime.exists() and Runtime.instance()._session_mgr.get_session_info(session_id) is not None  # noqa: SLF001


def drop_ended_uploads(runtime: Runtime | None = None) -> int:
    """Drop the uploaded files of every session Streamlit no longer keeps (see the module's text); the bytes
    freed."""
    runtime = runtime or (Runtime.instance() if Runtime.exists() else None)
    kept = getattr(runtime.uploaded_file_mgr, "file_storage", None) if runtime is not None else None
    if kept is None:  # not Streamlit's in-memory store: nothing of ours to free
        return 0
    freed = 0
    for session_id in list(kept):
        if runtime._session_mgr.get_session_info(session_id) is None:  # noqa: SLF001 (no public way)
            freed += sum(len(file.data) for file in dict(kept.get(session_id, {})).values())
            runtime.uploaded_file_mgr.remove_session_files(session_id)
    return freed


async def sweep_ended_uploads(every_s: float = SWEEP_S) -> None:
    """serve.py's background task: ``drop_ended_uploads`` every ``every_s`` seconds, for as long as the server runs."""
    while True:
        await asyncio.sleep(every_s)
        try:
            freed = drop_ended_uploads()
        except Exception:  # noqa: BLE001 (the next sweep tries again; the server answers as before)
            LOG.warning("dropping the uploads of ended sessions failed", exc_info=True)
            continue
        if freed:
            LOG.info("dropped %d bytes of uploads kept by sessions that ended", freed)


def upload_refusal(user: dict | None, plan: srv.Serving) -> str | None:
    """Why a session with Streamlit's ``user`` may not upload on a server served as ``plan``, or None."""
    if user is None:
        return "no such session"
    if not plan.sign_in:
        return None
    if not user.get("is_logged_in"):
        return "sign in first: nothing is uploaded before sign-in"
    try:
        actor = access.signed_in_actor(user)
    except (AccessRefused, srv.ServingError) as exc:
        return str(exc)
    return actor.why_not("import")


class UploadLimits:
    """ASGI middleware in front of Streamlit's upload route: see the module's text."""

    def __init__(self, app, prefix: str = "", max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES,
                 user_of: Callable[[str], dict | None] = session_user,
                 alive: Callable[[str], bool] = session_alive,
                 plan: Callable[[], srv.Serving] | None = None) -> None:
        self.app = app
        self.route = re.compile(rf"^{re.escape(prefix)}/_stcore/upload_file/([^/]+)/([^/]+)$")
        self.max_files, self.max_bytes = max_files, max_bytes
        self.user_of, self.alive = user_of, alive
        self.plan = plan or (lambda: srv.serving(address=_address()))
        self.kept: dict[str, dict[str, int]] = {}  # session → file → bytes (reserved while a PUT is read)
        self.lock = threading.Lock()

    async def __call__(self, scope, receive, send) -> None:
        found = self.route.match(scope.get("path", "")) if scope["type"] == "http" else None
        if found is None or scope["method"] not in ("PUT", "DELETE"):
            await self.app(scope, receive, send)
            return
        session, file_id = found.groups()
        if scope["method"] == "DELETE":
            with self.lock:
                self.kept.get(session, {}).pop(file_id, None)
            await self.app(scope, receive, send)
            return
        status, refusal = self.reserve(session, file_id, dict(scope["headers"]).get(b"content-length"))
        if refusal:
            await PlainTextResponse(refusal, status_code=status)(scope, receive, send)
            return
        answered: dict = {}

        async def watched(message) -> None:
            if message["type"] == "http.response.start":
                answered["status"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            if answered.get("status") not in (200, 204):  # not kept by Streamlit: its share is free again
                with self.lock:
                    self.kept.get(session, {}).pop(file_id, None)

    def reserve(self, session: str, file_id: str, length: bytes | None) -> tuple[int, str | None]:
        """(HTTP status, one line) refusing the upload, or (0, None) with its bytes reserved for the session."""
        refusal = upload_refusal(self.user_of(session), self.plan())
        if refusal:
            return 403, f"upload refused: {refusal}"
        try:
            size = int(length) if length is not None else -1
        except ValueError:
            size = -1
        if size < 0:
            return 411, "upload refused: say the upload's length (Content-Length)"
        with self.lock:
            for gone in [s for s in self.kept if s != session and not self.alive(s)]:
                del self.kept[gone]  # its session ended: Streamlit dropped its files
            mine = {f: n for f, n in self.kept.get(session, {}).items() if f != file_id}
            if len(mine) >= self.max_files:
                return 413, f"upload refused: this session keeps {len(mine)} files, its limit (remove one first)"
            if sum(mine.values()) + size > self.max_bytes:
                return 413, (f"upload refused: this session would keep {sum(mine.values()) + size:,} bytes, over "
                             f"its limit of {self.max_bytes:,}")
            self.kept[session] = {**mine, file_id: size}
        return 0, None


def _address():
    return config.get_option("server.address")
