"""In a real browser, runs whose variant, device, host, label, notes and id hold HTML tags and Markdown links draw no
live link or image anywhere: Compare (ratio chart, legend, history chart), Runs, Memory modes and the review report
(`streamlit run` + headless Debian Chromium driven by Playwright; the report opened from a file)."""

import urllib.parse
from pathlib import Path

import pytest

from gpu.core import schema
from gpu.results.analysis import report
from gpu.results.exchange import catalog
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence.store import RunStore
from tests.browser_helper import CHROMIUM, streamlit_app, wait_for_charts, wait_for_run, watch_runs
from tests.test_hostile_content import HOSTILE

MANAGED = next(BUNDLED_DIRS[1].glob("managed_*.parquet"))
TRANSFERS = next(BUNDLED_DIRS[1].glob("transfers_nvidia-h100*.parquet"))
DEVICE = f"0 {HOSTILE}"  # sorts first, so the history chart opens on it
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]
# Every element that could carry a link or fetch an image, in HTML and in Plotly's SVG (xlink:href).
LIVE = """() => [...document.querySelectorAll('a, image, img')].map(e =>
    (e.getAttribute('href') || '') + (e.getAttribute('xlink:href') || '') + (e.getAttribute('src') || ''))
    .filter(t => t.includes('evil.example'))"""


def hostile(frame, run_id: str, day: int):
    frame = frame.assign(run_id=run_id, device_name=DEVICE, host=HOSTILE,
                         timestamp=f"2026-12-0{day}T10:00:00+00:00")  # newer than any bundled run
    first = frame["variant"].iloc[0]
    frame["variant"] = frame["variant"].where(frame["variant"] != first, HOSTILE)
    return frame


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("browser-hostile")
    url = f"sqlite:///{folder}/runs.sqlite"
    store = RunStore(url)
    transfers = schema.read_results(TRANSFERS)
    for run_id, day in (("evil1", 1), ("evil2", 2)):
        store.save(hostile(transfers, run_id, day), "import", label=HOSTILE, notes=HOSTILE)
    store.save(hostile(schema.read_results(MANAGED), "evilmem", 3), "import", label=HOSTILE, notes=HOSTILE)
    runs = catalog.Catalog(store)
    page = folder / "report.html"
    page.write_text(report.render(runs.load("evil1"), [runs.load("evil2")]), encoding="utf-8")
    with streamlit_app(PINPOINT_DB_URL=url) as address:
        yield address, page


def test_hostile_run_content_draws_no_live_link_or_image(hostile_server):
    from playwright.sync_api import sync_playwright

    address, report_page = hostile_server
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 2400})
            watch_runs(page)
            visits = [("/compare?" + urllib.parse.urlencode({"compare_baseline": "evil1",
                                                            "compare_candidates": "evil2"}), 2),
                      ("/runs", 0), ("/memory-modes?run=evilmem", 0)]
            for path, charts in visits:
                page.goto(address + path)
                wait_for_run(page)  # the page's run ended, not a state left from before it began
                wait_for_charts(page)  # Plotly draws after the script ends
                if path == "/runs":  # the newest run (a hostile one) is shown under the table: label, notes, host
                    page.get_by_text("Notes:", exact=False).first.wait_for(timeout=0)
                if charts:
                    page.wait_for_selector(".js-plotly-plot .legend", timeout=0)
                    assert page.locator(".js-plotly-plot").count() >= charts, path
                    assert "evil.example" in page.locator(".js-plotly-plot").first.inner_text(), path  # as text
                assert "evil.example" in page.locator("[data-testid='stMain']").inner_text(), path
                assert page.evaluate(LIVE) == [], path
            page.goto(report_page.as_uri())
            page.wait_for_selector(".js-plotly-plot .legend", timeout=60_000)
            assert "evil.example" in page.locator(".js-plotly-plot").first.inner_text()
            assert page.evaluate(LIVE) == []
        finally:
            browser.close()
