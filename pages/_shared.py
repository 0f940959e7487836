"""PinPoint's pages: the table that app.py routes and Overview links from (file, title, address, icon, blurb), in
navigation order. An experiment's page is declared by the experiment that owns it (``PAGE_ENTRY``, gathered by the
registry); this module lists the pages that show no one experiment, so there is one page table. What the pages
share at run time lives in pages/_ui/."""

from __future__ import annotations

from gpu.core import paths
from gpu.experiments import registry
from gpu.experiments.page import PageEntry

OWN_PAGES = [
    PageEntry("pages/overview.py", "Overview", "", ":material/push_pin:", "", place=0),
    PageEntry("pages/runs.py", "Runs", "runs", ":material/folder_open:",
              "Runs: every stored and bundled run; import from other machines", place=100),
    PageEntry("pages/compare.py", "Compare runs", "compare", ":material/compare_arrows:",
              "Compare runs: verdicts beyond noise, provenance diff, HTML report", place=101),
    PageEntry("pages/fleet.py", "Fleet", "fleet", ":material/dns:",
              "Fleet: every board against its model's median, outliers and groups named, drift over time", place=102),
    PageEntry("pages/talk.py", "Talk: claims, measured", "talk", ":material/co_present:",
              "Talk: tutorial claims about GPU memory, each judged by a measurement (a talk's scenes, on stage)",
              place=103),
]
PAGES = sorted([*OWN_PAGES, *registry.page_entries()], key=lambda page: page.place)
ICON = PAGES[0].icon  # PinPoint's own


def entry(file: str) -> PageEntry:
    """The table's entry of the page in ``file`` (pages/runs.py …)."""
    return next(p for p in PAGES if p.file == file)
# The browser tab's icon: a file, since a Material icon there is fetched from Google's font server (offline venues).
FAVICON = str(paths.asset("pinpoint-icon.png"))
