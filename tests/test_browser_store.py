"""In a real browser, Markdown payloads from a link or the runs store stay text: no link is drawn and no request
leaves the app's own server (`streamlit run` + headless Debian Chromium driven by Playwright)."""

import urllib.parse
from pathlib import Path

import pytest

from gpu.core import schema
from gpu.results.exchange.catalog import BUNDLED_DIRS
from gpu.results.persistence.store import RunStore
from tests.browser_helper import CHROMIUM, free_port, streamlit_app, wait_for_run, watch_runs

MANAGED = next(BUNDLED_DIRS[1].glob("managed_*.parquet"))
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture(scope="module")
def payload_server(tmp_path_factory):
    """`streamlit run` on a store holding one run whose label and notes are Markdown payloads, and the payload
    itself, whose image points at a port on this machine that nothing serves."""
    trap = free_port()
    payload = (f"[phish](https://evil.example/x) ![x](http://127.0.0.1:{trap}/p.png) "
               "![y](https://evil.example/p.png) **bold**")
    url = f"sqlite:///{tmp_path_factory.mktemp('browser-store')}/runs.sqlite"
    frame = schema.read_results(MANAGED).assign(run_id="payload01", timestamp="2026-12-01T00:00:00+00:00")
    RunStore(url).save(frame, "import", label=payload, notes=payload)
    with streamlit_app(PINPOINT_DB_URL=url) as address:
        yield address, payload


def test_markdown_payloads_render_as_text_and_fetch_nothing(payload_server):
    from playwright.sync_api import sync_playwright

    address, payload = payload_server
    requests = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1600})
            watch_runs(page)
            page.on("request", lambda request: requests.append(request.url))
            quoted = urllib.parse.quote(payload)
            for path, text in ((f"/transfers?run={quoted}", "from the address cannot be shown"),
                               (f"/compare?compare_baseline={quoted}", "Not used as written in this link"),
                               ("/runs", "Notes:")):
                page.goto(address + path)
                wait_for_run(page)
                page.get_by_text(text, exact=False).first.wait_for(timeout=0)
                main = page.locator("[data-testid='stMain']")
                assert main.get_by_text("[phish](https:", exact=False).count() >= 1, path  # shown as typed
                live = main.locator("a[href*='evil.example'], img[src*='evil.example'], img[src*='p.png']")
                shown = [live.nth(i).evaluate("e => e.outerHTML") for i in range(live.count())]
                assert not shown, (path, shown)
                page.wait_for_timeout(500)  # room for an image request, were one made
        finally:
            browser.close()
    foreign = [u for u in requests if not u.startswith((address, "data:", "blob:", "about:"))]
    assert requests and not foreign, foreign
