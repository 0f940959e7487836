"""Presentation mode, defined once for every page: the stage CSS, when to show desk-only parts, the folded "More
settings", takeaways under charts, stage-sized charts and keyboard shortcuts."""

from __future__ import annotations

import json
import re

import streamlit as st

from gpu.core import text
from gpu.present.charts._common import stage_figure

# --- presentation mode ---------------------------------------------------------------------------------------
# The stage is a 1920×1080 projector: title, one or two controls, the main chart whole and its takeaway, no
# scrolling. Fonts are sized for the back of the room; the leave button floats at the top right.
STAGE_CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], header[data-testid="stHeader"],
[data-testid="stToolbar"], [data-testid="stDecoration"], [data-testid="stStatusWidget"] { display: none !important; }
.stMainBlockContainer, .block-container { padding-top: 0.6rem !important; padding-bottom: 1rem !important;
  max-width: 96vw !important; }
html, body, [data-testid="stAppViewContainer"] { font-size: 22px; }
.stMarkdown h1, h1 { font-size: 2.3rem !important; padding: 0.2rem 0 0.4rem !important; }
.stMarkdown h2 { font-size: 1.8rem !important; padding: 0.3rem 0 !important; }
.stMarkdown h3 { font-size: 1.45rem !important; padding: 0.2rem 0 !important; }
[data-testid="stVerticalBlock"] { gap: 0.6rem !important; }
[data-testid="stButtonGroup"] > div { flex-wrap: wrap !important; }
.st-key-present_leave { position: fixed !important; top: 0.3rem; right: 1rem; z-index: 1000; width: auto !important; }
.st-key-present_leave button { font-size: 0.75rem !important; opacity: 0.6; }
button:focus-visible, button:focus { box-shadow: none !important; outline: none !important; }
[data-testid="stMain"]:focus, [data-testid="stMain"]:focus-visible,
[data-testid="stMain"]:focus::before, [data-testid="stMain"]:focus-visible::before {
  outline: none !important; box-shadow: none !important; }
.st-key-stage_title_card { min-height: 88vh; justify-content: center; align-items: center; text-align: center; }
.st-key-stage_title_card h1 { font-size: 4.2rem !important; }
</style>
"""
STAGE_CHART_HEIGHT = 480  # px: with title, controls and takeaway the stage fits 1920×960 (a windowed browser) too


# A shortcut clicks its button, which would then keep the focus: the browser scrolls it into view and draws a focus
# ring. Remember the scroll before the key is handled, then blur the button and restore it. The script runs in the
# page itself (st.html): no iframe (streamlit-shortcuts used st.components.v1.html, deprecated, whose sandboxed
# iframe made the browser warn about allow-scripts with allow-same-origin on every stage page).
SHORTCUTS_JS = """<script>
(() => {
const doc = document, win = window;
win.__pinpointShortcuts = Object.assign(win.__pinpointShortcuts || {}, __KEYS__);
if (win.__pinpointKeys) return;
win.__pinpointKeys = true;
const boxes = () => [doc.scrollingElement, doc.querySelector('[data-testid="stMain"]'),
                     doc.querySelector('[data-testid="stAppViewContainer"]')].filter(Boolean);
win.addEventListener('keydown', (e) => {
  const typing = ['INPUT', 'TEXTAREA', 'SELECT'].includes((e.target.tagName || '').toUpperCase());
  if (typing || e.target.isContentEditable) return;
  if (e.ctrlKey || e.altKey || e.metaKey) return;
  const kept = boxes().map(b => [b, b.scrollTop]);
  const restore = () => {
    if (doc.activeElement && doc.activeElement.tagName === 'BUTTON') doc.activeElement.blur();
    kept.forEach(([b, top]) => { b.scrollTop = top; });
  };
  const pressed = e.key.toLowerCase();
  for (const [key, shortcut] of Object.entries(win.__pinpointShortcuts)) {
    if (shortcut !== pressed) continue;
    const button = doc.querySelector(`.st-key-${key} button`);
    if (!button || button.disabled) continue;
    e.preventDefault();
    button.click();
    break;
  }
  setTimeout(restore, 0);
  setTimeout(restore, 120);
}, true);
})();
</script>"""


def check_present_value() -> None:
    """``?present=`` takes 1 (the stage view) or 0; any other value is named once, dropped from the address, and
    the desk view is shown."""
    raw = st.query_params.get("present")
    if raw is None or raw in ("0", "1"):
        return
    st.warning(f"present={text.plain(raw)} is not 0 or 1, so presentation mode stays off (present=1 turns it on).")
    del st.query_params["present"]


def presenting() -> bool:
    """?present=1 in the address, or the sidebar switch."""
    return st.query_params.get("present") == "1" or st.session_state.get("present_mode", False)


def stage_style() -> None:
    """The stage look: no sidebar or toolbar, fonts readable at the back of a room."""
    st.html(STAGE_CSS)


def shortcuts(**keys: str) -> None:
    """Keyboard shortcuts for buttons (widget key = key name), which never move the page or leave a focus ring."""
    st.html(SHORTCUTS_JS.replace("__KEYS__", json.dumps({k: v.lower() for k, v in keys.items()})),
            unsafe_allow_javascript=True)


def leave_presentation() -> None:
    st.session_state["present_mode"] = False
    if "present" in st.query_params:
        del st.query_params["present"]


def stage_exit() -> None:
    """The sidebar is hidden on stage: a small button (and Esc) leaves presentation mode."""
    st.button("leave presentation (Esc)", key="present_leave", on_click=leave_presentation, type="tertiary",
              icon=":material/close:")
    shortcuts(present_leave="escape")


def desk() -> bool:
    """True off stage: intros, tables, downloads and secondary charts are shown only then."""
    return not presenting()


def more_settings():
    """Where a page puts its secondary controls: on stage they fold into a closed "More settings" box, so the
    one or two controls a scene is about stay in view; at the desk they are laid out as usual."""
    return st.expander("More settings", icon=":material/tune:") if presenting() else st.container()


# A number and its unit never break across lines in a verdict ("4 KiB", "3.4 %", "0.043 ms").
NUMBER_UNIT = re.compile(r"(\d) (?=(?:B|KiB|MiB|GiB|TiB|KB|MB|GB|GB/s|TB/s|ms|µs|ns|s|%|floats?|threads?)\b|%)")


def keep_units(line: str) -> str:
    """``line`` with a no-break space between each number and its unit."""
    return NUMBER_UNIT.sub("\\1\u00a0", line)


def takeaway(text: str | None, heading: str = "###", always: bool = False, key: str = "stage_takeaway") -> None:
    """On stage, the one sentence under a chart that says what it shows, computed from its data (gpu.present.takeaways).
    ``always``: shown at the desk too (a talk's verdict). ``key``: one per takeaway, starting "stage_takeaway"."""
    if text and (always or presenting()):
        with st.container(key=key):
            st.markdown(f"{heading} {keep_units(text)}")


# On stage a chart is quiet: no toolbar over it on hover, no tips popping up (Plotly's "Double-click on legend…"),
# legend clicks that hide nothing (stage_figure's itemclick).
QUIET = {"displayModeBar": False, "showTips": False, "displaylogo": False}


def plot(figure, key: str) -> None:
    """``st.plotly_chart``, quiet on stage (``QUIET``, legend clicks off); a figure already at stage size."""
    if presenting():
        figure.update_layout(legend={"itemclick": False, "itemdoubleclick": False})
        st.plotly_chart(figure, key=key, config=QUIET)
    else:
        st.plotly_chart(figure, key=key)


def chart(figure, key: str) -> None:
    """A chart at stage size when presenting (fonts for the back of the room, a height that fits), else as is."""
    if presenting():
        stage_figure(figure, STAGE_CHART_HEIGHT)
    plot(figure, key)
