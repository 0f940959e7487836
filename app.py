"""PinPoint: a live GPU memory-performance lab. Run with ``streamlit run serve.py`` (PinPoint's server, which runs
this script; ``streamlit run app.py`` runs it too, without what serve.py adds).

Routes explicitly with ``st.navigation`` (so Streamlit ignores its legacy auto-discovery of pages/) and
shows on every page where the numbers come from: the live GPU, or recorded runs.
"""

import streamlit as st

from pages import _shared as shared
from pages import _ui as ui

st.set_page_config(page_title="PinPoint", page_icon=shared.FAVICON, layout="wide")


def page(entry: shared.PageEntry) -> st.Page:
    """A page of ``shared.PAGES`` (which Overview's links and serve.py's routes read too), with its title, icon and
    address; the one without an address is the default page."""
    return st.Page(entry.file, title=entry.title, icon=entry.icon, default=not entry.url_path,
                   url_path=entry.url_path or None)


# Every page, in the table's order (tests/test_app.py opens each one through it), every one listed: past ten pages
# Streamlit would fold the rest behind "View more".
# Who is at the page comes first: a team server's visitor who has not signed in sees the sign-in screen only (the
# pages are routed, so their addresses stay valid, but none runs).
actor = ui.sign_in_gate()
navigation = st.navigation([page(entry) for entry in shared.PAGES], expanded=True,
                           position="sidebar" if actor else "hidden")
if actor is None:
    st.stop()
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
