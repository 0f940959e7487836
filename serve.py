"""PinPoint's server. Run with ``streamlit run serve.py``: Streamlit's own server (``st.App``) runs app.py and
every page exactly as ``streamlit run app.py`` does, with one addition.

- **A page's own address loads cleanly.** Loaded at /transfers (typed, or reloaded), Streamlit's frontend takes its
  server to be one level down and probes /transfers/_stcore/health and …/host-config before the root: two 404s in
  the browser's console. It takes its candidates from ``window.__streamlit.BACKEND_BASE_URL`` when a page sets it,
  else from the address. Here every page's address answers Streamlit's own index.html with one script in front
  that sets it to the address's parent (the app's root, also under a path prefix), so the frontend asks the root
  at once; the websocket, page links and query parameters are the root's, as before.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from streamlit import config, file_util

from pages._shared import PAGES

STATIC = Path(file_util.get_static_dir())

# --- a page's own address -------------------------------------------------------------------------------------
# Read by Streamlit's frontend before it looks for its server (tests/test_serve.py checks that the bundle still
# does). new URL(".", …) is the address without its last segment and its query: the root for /transfers?present=1.
BASE_SCRIPT = ('<script>window.__streamlit = Object.assign({}, window.__streamlit, '
               '{BACKEND_BASE_URL: new URL(".", window.location.href).href})</script>')


def page_html(index: str | None = None) -> str:
    """Streamlit's index.html with BASE_SCRIPT first in its head, before the frontend's own scripts."""
    index = (STATIC / "index.html").read_text(encoding="utf-8") if index is None else index
    if index.count("<head>") != 1:
        raise RuntimeError("Streamlit's index.html has no single <head> to put the base address in")
    return index.replace("<head>", "<head>\n    " + BASE_SCRIPT, 1)


def url_prefix() -> str:
    """Streamlit's server.baseUrlPath as a path prefix ('' or '/prefix')."""
    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}" if base else ""


def page_routes() -> list[Route]:
    """GET (and HEAD) of every page's address (/transfers …): the page HTML, never cached by the browser, as
    Streamlit serves its index.html. The root keeps Streamlit's own answer: loaded there, the frontend asks the
    root only."""
    html = page_html()

    async def page(_request) -> Response:
        return HTMLResponse(html, headers={"Cache-Control": "no-cache"})
    return [Route(f"{url_prefix()}/{entry.url_path}", page, methods=["GET"]) for entry in PAGES if entry.url_path]


app = st.App("app.py", routes=page_routes())
