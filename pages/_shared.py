"""PinPoint's pages: the table that app.py routes and Overview links from (file, title, address, icon, blurb).
What the pages share at run time lives in pages/_ui/."""

from __future__ import annotations

from dataclasses import dataclass

from gpu.core import paths


@dataclass(frozen=True)
class PageEntry:
    file: str
    title: str  # in the navigation
    url_path: str
    icon: str  # Streamlit's Material icons render without an emoji font (many projector laptops have none)
    blurb: str  # the Overview's link text


PAGES = [
    PageEntry("pages/overview.py", "Overview", "", ":material/push_pin:", ""),
    PageEntry("pages/transfers.py", "Transfers: pinned vs pageable", "transfers", ":material/swap_vert:",
              "Transfers: pinned vs pageable memory"),
    PageEntry("pages/coalescing.py", "Coalescing", "coalescing", ":material/view_week:",
              "Coalescing: access patterns vs bandwidth"),
    PageEntry("pages/reductions.py", "Reductions: dot product", "reductions", ":material/functions:",
              "Reductions: a dot product, five ways"),
    PageEntry("pages/occupancy.py", "Occupancy", "occupancy", ":material/bar_chart:",
              "Occupancy: calculator and measurement"),
    PageEntry("pages/streams.py", "Streams: overlap", "streams", ":material/view_timeline:",
              "Streams: hiding copies behind compute, with a timeline"),
    PageEntry("pages/roofline.py", "Roofline", "roofline", ":material/roofing:",
              "Roofline: every kernel under the measured memory and compute ceilings"),
    PageEntry("pages/memory_modes.py", "Memory modes", "memory-modes", ":material/memory:",
              "Memory modes: managed memory, pools, batching and host-memory latency"),
    PageEntry("pages/runs.py", "Runs", "runs", ":material/folder_open:",
              "Runs: every stored and bundled run; import from other machines"),
    PageEntry("pages/compare.py", "Compare runs", "compare", ":material/compare_arrows:",
              "Compare runs: verdicts beyond noise, provenance diff, HTML report"),
    PageEntry("pages/fleet.py", "Fleet", "fleet", ":material/dns:",
              "Fleet: every board against its model's median, outliers and groups named, drift over time"),
    PageEntry("pages/talk.py", "Talk: claims, measured", "talk", ":material/co_present:",
              "Talk: tutorial claims about GPU memory, each judged by a measurement (a talk's scenes, on stage)"),
]
ICON = PAGES[0].icon  # PinPoint's own


def entry(file: str) -> PageEntry:
    """The table's entry of the page in ``file`` (pages/runs.py …)."""
    return next(p for p in PAGES if p.file == file)
# The browser tab's icon: a file, since a Material icon there is fetched from Google's font server (offline venues).
FAVICON = str(paths.asset("pinpoint-icon.png"))
