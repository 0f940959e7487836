"""PinPoint: a live GPU memory-performance lab. Run with ``streamlit run serve.py`` (PinPoint's server, which runs
this script; ``streamlit run app.py`` runs it too, without what serve.py adds).

Routes explicitly with ``st.navigation`` (so Streamlit ignores its legacy auto-discovery of pages/) and
shows on every page where the numbers come from: the live GPU, or recorded runs.
"""

import streamlit as st

from pages import _shared as shared
from pages import _ui as ui

st.set_page_config(page_title="PinPoint", page_icon=shared.FAVICON, layout="wide")


def page(file: str) -> st.Page:
    """The page in ``file``, with the title, icon and address that ``shared.PAGES`` (which Overview's links read
    too) gives it."""
    entry = next(p for p in shared.PAGES if p.file == file)
    return st.Page(file, title=entry.title, icon=entry.icon, default=not entry.url_path,
                   url_path=entry.url_path or None)


# Every page, listed (tests/test_registry.py checks that each registered experiment's page is among them).
navigation = st.navigation([
    page("pages/overview.py"),
    page("pages/transfers.py"),
    page("pages/coalescing.py"),
    page("pages/reductions.py"),
    page("pages/occupancy.py"),
    page("pages/streams.py"),
    page("pages/roofline.py"),
    page("pages/memory_modes.py"),
    page("pages/runs.py"),
    page("pages/compare.py"),
    page("pages/fleet.py"),
    page("pages/talk.py"),
])
ui.open_linked_page(navigation)  # PinPoint's links read /?page=transfers&… (no 404 probe on load)
ui.open_run_page(navigation)  # /?run=ID opens the run on its page
ui.source_sidebar()
ui.check_present_value()
if ui.presenting():
    ui.stage_style()
    ui.stage_exit()
else:
    ui.source_banner()
navigation.run()
