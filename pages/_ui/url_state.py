"""Links that reproduce a view: the page's controls restored from the URL and mirrored back into it, as one object
per session (``UrlState``), and the ``?page=`` links PinPoint hands out."""

from __future__ import annotations

from datetime import date
from urllib.parse import urlencode

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from gpu.core import text
from pages._shared import PAGES
from pages._ui.stage import presenting

# --- links that reproduce a view ---------------------------------------------------------------------------
URL_RESERVED = ("run", "present")  # read by every page (app.py); the talk's ``scene`` is its own

# PinPoint's links address the app's root and name the page in ``?page=`` (/?page=transfers&…). Streamlit's
# frontend, loaded straight at a page's path (/transfers), first looks for its server one level down
# (/transfers/_stcore/health and …/host-config: two 404s in the browser's console), then at the root, unless the
# page names the server in ``window.__streamlit``, as serve.py's answer at every page's address does. Loaded at
# the root it asks the root only, whichever server runs the app (``streamlit run app.py`` too).
LINK_PAGE = "page"


def open_linked_page(navigation) -> None:
    """Before the page runs: ``?page=NAME`` (a PinPoint link) opens that page with the link's other values; the
    address then reads /NAME?… as if the page had been opened from the menu. An unknown name is said and dropped."""
    UrlState.session().single_values()
    wanted = st.query_params.get(LINK_PAGE)
    UrlState.session().page_path = navigation.url_path
    if wanted is None:
        return
    entry = next((p for p in PAGES if p.url_path and p.url_path == wanted.strip()), None)
    rest = {k: st.query_params.get_all(k) for k in st.query_params if k != LINK_PAGE}
    if entry is None:
        st.warning(f"page={text.plain(wanted)} is not a page of PinPoint, so Overview is shown (pages: "
                   f"{', '.join(p.url_path for p in PAGES if p.url_path)}).")
        del st.query_params[LINK_PAGE]
    elif entry.url_path == navigation.url_path:
        del st.query_params[LINK_PAGE]
    else:
        st.switch_page(entry.file, query_params=rest)


def view_link(params: dict[str, str]) -> str:
    """The address of this view: the app's root (this page's address without its own path) with ``?page=`` and
    ``params``, so the link loads without the frontend's 404 probe (see LINK_PAGE)."""
    current = UrlState.session().page_path
    address = (getattr(st.context, "url", None) or "").split("?")[0].split("#")[0]
    if current and address.endswith("/" + current):
        address = address[: -len(current)]
    elif address and not address.endswith("/"):
        address += "/"
    return address + "?" + urlencode(({LINK_PAGE: current} if current else {}) | params)


def parse_url_value(raw: str, kind: str, options=None):
    """A control's value from its text in the URL; ValueError (with the reason) when it is not one it can take.

    Kinds: int, str, bool, ints / strs (several, comma-separated), int_range ("low~high"), date_range
    ("2026-11-01~2026-11-25"). ``options`` is the list of allowed values (or a (low, high) pair for a numeric slider
    or a date range); None allows any value of the kind."""
    def one_int(value: str) -> int:
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"'{text.shorten(value)}' is not a whole number") from None

    def one_date(value: str) -> date:
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"'{text.shorten(value)}' is not a date (YYYY-MM-DD)") from None

    def allowed(value):
        if options is None:
            return value
        if isinstance(options, tuple) and len(options) == 2 and kind in ("int", "date_range") \
                and not isinstance(options[0], str):
            if not options[0] <= value <= options[1]:
                raise ValueError(f"{value} is outside {options[0]}…{options[1]}")
            return value
        if value not in options:
            shown = ", ".join(map(str, list(options)[:8])) + (" …" if len(options) > 8 else "")
            raise ValueError(f"{text.shorten(repr(value))} is not one of the choices ({shown})")
        return value

    value = str(raw).strip()
    if kind == "bool":
        if value not in ("0", "1", "true", "false"):
            raise ValueError(f"'{text.shorten(value)}' is not 0 or 1")
        return value in ("1", "true")
    if kind == "int":
        return allowed(one_int(value))
    if kind == "str":
        return allowed(value)
    if kind in ("ints", "strs"):
        items = [t for t in value.split(",") if t.strip()]
        return [allowed(one_int(t) if kind == "ints" else t.strip()) for t in items]
    if kind == "int_range":
        low, sep, high = value.partition("~")
        if not sep:
            raise ValueError(f"'{text.shorten(value)}' is not a range low~high")
        return (allowed(one_int(low)), allowed(one_int(high)))
    if kind == "date_range":
        low, sep, high = value.partition("~")
        if not sep:
            raise ValueError(f"'{text.shorten(value)}' is not a range of dates first~last")
        return (allowed(one_date(low)), allowed(one_date(high)))
    raise ValueError(f"unknown kind {kind}")


def url_text(value, kind: str) -> str:
    if kind == "bool":
        return "1" if value else "0"
    if kind in ("ints", "strs"):
        return ",".join(str(v) for v in value or [])
    if kind in ("int_range", "date_range"):
        return f"{value[0]}~{value[1]}"
    return str(value)


def repeated_note(key: str, values: list[str]) -> str:
    """The note for a parameter a link gives more than once: every value it gave, and the one used (the last)."""
    given = ", ".join(text.plain(v) for v in values)
    return (f"{text.plain(key)} is given {len(values)} times ({given}); only the last, "
            f"{text.plain(values[-1])}, is used")




class UrlState:
    """This session's link state, kept in one object in the session: what persists for the session (the controls
    already restored from the URL, the unknown parameters already named, the page's path) and what each page run
    starts afresh with ``start`` (the controls it registers, the problems to name, the warning slot and link box).

    A page gets it from ``ui.Page`` (which starts it before anything else), restores each control with ``restore``
    before creating the widget, and calls ``sync`` after its controls."""

    KEY = "_url_state"

    def __init__(self) -> None:
        self.restored: set[str] = set()  # a control's value is taken from the URL once per session
        self.named: set[tuple[str, str]] = set()  # (page, key): an unknown parameter is named once per page
        self.page_path = ""  # this page's own path (app.py sets it before the page runs)
        self.written: set[str] = set()  # parameters this session's pages have written into the address
        self.carried: list[str] = []  # notes found before the page ran (a repeated key), for its warning
        self._fresh()

    def _fresh(self) -> None:
        self.registered: dict[str, str] = {}  # widget key → kind, for this page run
        self.problems: list[str] = self.carried
        self.carried = []
        self.noted: list[str] = []  # what that warning says so far
        self.slot = None  # where the "Not used as written" warning goes
        self.link = None  # the "Link to this view" box
        self.unsynced = False  # a control was restored since the last sync

    @classmethod
    def session(cls) -> UrlState:
        """This session's state (created on first use)."""
        state = st.session_state.get(cls.KEY)
        if state is None:
            state = st.session_state[cls.KEY] = cls()
        return state

    @classmethod
    def start(cls) -> UrlState:
        """A page run begins: nothing registered yet."""
        state = cls.session()
        state._fresh()
        return state

    def single_values(self) -> None:
        """Before the page runs: a parameter the address gives more than once keeps its last value only, and the
        page's link warning says so (``present=1&present=0`` is read as ``present=0``, with a note)."""
        for key in list(st.query_params):
            values = st.query_params.get_all(key)
            if len(values) > 1:
                self.carried.append(repeated_note(key, values))
                st.query_params[key] = values[-1]

    def notes_here(self) -> None:
        """Put the warning that names what a link held but the page could not use here (``sync`` puts it where
        it is called when a page has not placed it)."""
        self.slot = st.empty()

    def restore(self, key: str, kind: str, options=None, check=None) -> bool:
        """Before creating the widget ``key``: take its value from the URL once per session (when valid; otherwise
        keep the default and say why), and mirror it into the URL from then on. ``check(value)`` may refuse a value
        of the right kind by raising ValueError with the reason. A reversed range is swapped, and a value named twice
        in a list kept once, with a note. True when the URL's value was set now."""
        self.registered[key] = kind
        self.unsynced = True
        if key in self.restored:
            return False
        self.restored.add(key)
        raw = st.query_params.get(key)
        if raw is None:
            return False
        named = f"{text.plain(key)}={text.plain(raw)}"
        try:  # the check first: it may say better than "not one of the choices" why a value is not offered
            if check is not None:
                check(parse_url_value(raw, kind))
            value = parse_url_value(raw, kind, options)
        except ValueError as exc:
            self.problems.append(f"{named}: {text.plain(exc, 160)}; the default is used")
            return False
        if kind in ("int_range", "date_range") and value[0] > value[1]:
            value = (value[1], value[0])
            self.problems.append(f"{named}: the range was reversed, so it is read as "
                                 f"{text.plain(url_text(value, kind))}")
        if kind in ("ints", "strs") and len(set(value)) < len(value):
            value = list(dict.fromkeys(value))
            self.problems.append(f"{named}: a value is named more than once, so it is read as "
                                 f"{text.plain(url_text(value, kind))}")
        st.session_state[key] = value
        return True

    def sync(self, final: bool = True, link: bool = True, own: tuple[str, ...] = ()) -> None:
        """After the controls: the URL holds each one's value; unknown or invalid parameters are named, and a link
        to this view is offered (``link=False``: a page without settings offers none, and leaves the address as it
        is). A page with controls further down calls it with ``final=False`` first (so their parameters are not yet
        taken for unknown ones), then again at the end. ``own``: parameters the page reads itself (the talk's
        ``scene``)."""
        unknown = [k for k in st.query_params if k not in self.registered and k not in URL_RESERVED
                   and k not in own and not k.startswith("_")] if final else []
        # A parameter this session wrote itself, whose control the page no longer shows (the Roofline's kernel
        # after a GPU with nothing to highlight was chosen), came from no link: it is dropped without a word.
        stale = [k for k in unknown if k in self.written]
        for key in stale:
            del st.query_params[key]
        unknown = [k for k in unknown if k not in self.written]
        self.unsynced = False
        ctx = get_script_run_ctx()
        page = ctx.page_script_hash if ctx else ""
        problems = self.problems + [f"{text.plain(k)} is not a setting of this page; it is ignored" for k in unknown
                                    if (page, k) not in self.named]
        for key in unknown:
            self.named.add((page, key))
            if link:
                del st.query_params[key]  # named once, then dropped, so a copied link is clean
        for key, kind in self.registered.items():
            value = st.session_state.get(key)
            shown = url_text(value, kind) if value is not None else ""
            if shown:
                st.query_params[key] = shown
                self.written.add(key)
            elif key in st.query_params:
                del st.query_params[key]
        note = "Not used as written in this link:\n" + "\n".join(f"- {p}" for p in problems)
        if problems and presenting():  # on stage a box would push the takeaway off the screen: a toast takes no room
            st.toast(note, icon=":material/link_off:", duration="long")
            self.problems = []
        elif problems:  # a page that syncs twice (Compare's history below) keeps the first sync's notes in the box
            self.noted += problems
            if self.slot is None:
                self.slot = st.empty()
            self.slot.warning("Not used as written in this link:\n" + "\n".join(f"- {p}" for p in self.noted))
            self.problems = []
        if not link:
            return
        address = view_link({k: st.query_params[k] for k in st.query_params})
        if not presenting() and self.link is None:  # the link box is for the desk
            with st.expander("Link to this view", icon=":material/link:"):
                self.link = st.empty()
                st.caption("Opening this link shows the same controls and the same recording (or the same live "
                           "request). The copy button is at the right of the box.")
        if self.link is not None:
            self.link.code(address, language=None)

    def scene(self, count: int) -> int:
        """The talk's first scene (0-based) from ``?scene=N`` (1 … count): a number outside is clamped and anything
        else ignored, with a note in the page's link warning."""
        raw = st.query_params.get("scene")
        if raw is None:
            return 0
        try:
            wanted = int(raw)
        except ValueError:
            self.problems.append(f"scene={text.plain(raw)} is not a scene number; the talk starts at scene 1")
            return 0
        shown = min(max(wanted, 1), count)
        if shown != wanted:
            self.problems.append(f"scene={wanted} is outside 1 … {count}; showing scene {shown}")
        return shown - 1
