"""The line under a page's takeaway: its headline figure against its physical limit and the bundled recording
(``gpu.results.analysis.normal``), and how many of its points were not clean and why (``gpu.results.analysis.causes``),
computed by ``gpu.present.takeaways.context``. Plain text: the conditions are stored text."""

from __future__ import annotations

import streamlit as st

from gpu.core.text import plain
from gpu.present import takeaways
from pages._ui.cache import cached
from pages._ui.stage import keep_units, presenting


def context(frame, key: str = "stage_context") -> None:
    """At the desk a caption; on stage one line under the takeaway (only what was seen: not-clean points)."""
    line = cached(takeaways.context)(frame, presenting())
    if not line:
        return
    if presenting():
        with st.container(key=key):
            st.markdown(keep_units(plain(line, None)))
    else:
        st.caption(plain(line, None))
