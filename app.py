"""PinPoint: a live GPU memory-performance lab. Run with ``streamlit run app.py``.

Routes explicitly with ``st.navigation`` (so Streamlit ignores its legacy auto-discovery of pages/) and
shows on every page where the numbers come from: the live GPU, or recorded runs.
"""

import streamlit as st

from pages import _shared as shared

st.set_page_config(page_title="PinPoint", page_icon="📌", layout="wide")

navigation = st.navigation([
    st.Page("pages/overview.py", title="Overview", icon="📌", default=True),
    st.Page("pages/transfers.py", title="Transfers: pinned vs pageable", icon="🚚", url_path="transfers"),
    st.Page("pages/coalescing.py", title="Coalescing", icon="🧵", url_path="coalescing"),
    st.Page("pages/reductions.py", title="Reductions: dot product", icon="➕", url_path="reductions"),
    st.Page("pages/occupancy.py", title="Occupancy", icon="📊", url_path="occupancy"),
    st.Page("pages/streams.py", title="Streams: overlap", icon="🌊", url_path="streams"),
    st.Page("pages/memory_modes.py", title="Memory modes", icon="🧠", url_path="memory-modes"),
    st.Page("pages/runs.py", title="Runs", icon="🗂️", url_path="runs"),
    st.Page("pages/compare.py", title="Compare runs", icon="⚖️", url_path="compare"),
    st.Page("pages/talk.py", title="Talk: claims, measured", icon="🎤", url_path="talk"),
])
shared.source_sidebar()
shared.check_present_value()
if shared.presenting():
    shared.stage_style()
    shared.stage_exit()
else:
    shared.source_banner()
navigation.run()
