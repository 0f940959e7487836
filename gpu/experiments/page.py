"""A page of PinPoint's navigation, as the experiment that owns it declares it (``PAGE_ENTRY``) or pages/_shared.py
lists it (the pages that show no one experiment): its file, title, address, icon, the Overview's link text and its
place in the navigation. The registry gathers the experiments' entries, so there is one page table
(``pages/_shared.PAGES``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageEntry:
    file: str  # pages/coalescing.py …: the path Streamlit routes (relative to app.py's folder, or absolute)
    title: str  # in the navigation
    url_path: str
    icon: str  # Streamlit's Material icons render without an emoji font (many projector laptops have none)
    blurb: str  # the Overview's link text
    place: float = 0.0  # its place in the navigation (Overview 0, the experiments' pages, then Runs, Compare …)
