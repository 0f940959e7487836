"""PinPoint: a live GPU memory-performance lab. Run with ``streamlit run app.py``.

Routes explicitly with ``st.navigation`` (so Streamlit ignores its legacy auto-discovery of pages/) and
shows on every page where the numbers come from: the live GPU, or recorded runs.
"""

import streamlit as st

from pages import _shared as shared

st.set_page_config(page_title="PinPoint", page_icon=shared.FAVICON, layout="wide")

navigation = st.navigation([st.Page(p.file, title=p.title, icon=p.icon, default=not p.url_path,
                                     url_path=p.url_path or None) for p in shared.PAGES])
shared.source_sidebar()
shared.check_present_value()
if shared.presenting():
    shared.stage_style()
    shared.stage_exit()
else:
    shared.source_banner()
navigation.run()
