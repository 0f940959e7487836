"""Real-browser smoke tests: `streamlit run` + headless Debian Chromium driven by Playwright (one server for the
session and one Chromium for the module: conftest's ``server`` and ``browser``; the first visit has a fresh server
of its own)."""

from pathlib import Path

import pytest

from tests.browser_helper import (
    CHROMIUM,
    Socket,
    runs_begun,
    streamlit_app,
    wait_for_charts,
    wait_for_run,
    wait_for_shortcut,
    watch_runs,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture
def fresh_server():
    """A server no browser has visited yet (the session's ``server`` may have served other tests first)."""
    with streamlit_app() as url:
        yield url


def test_each_page_renders_its_banner_and_a_chart(fresh_server, browser):
    server = fresh_server
    page = browser.new_page(viewport={"width": 1400, "height": 1600})
    # Each load opens a websocket and runs the page's script once: a rerun on load (st.rerun, or state changed while
    # the page is drawn) would double the server's work per view.
    socket = Socket(page)
    watch_runs(page)  # waits follow the script's runs, not a clock: a loaded machine takes its time
    # A fresh server's first visit goes straight to /transfers: it must still run through app.py.
    page.goto(f"{server}/transfers")
    wait_for_run(page)
    page.wait_for_selector(".js-plotly-plot .main-svg .scatterlayer .trace", timeout=0)  # drawn after the run
    wait_for_charts(page)
    assert page.get_by_text("not measured now", exact=False).first.is_visible()  # the app-wide banner
    assert page.locator(".js-plotly-plot").count() >= 3
    assert "Bandwidth vs size" in page.locator(".js-plotly-plot").first.inner_text()
    runs, socket.runs = socket.runs, 0
    assert runs == 1
    for path, title in [("coalescing", "Copy kernels"), ("reductions", "Dot product, kernel only"),
                        ("occupancy", "Occupancy vs block size"), ("streams", "Timeline: pinned"),
                        ("memory-modes", "Managed memory"), ("compare", "Candidate speed vs baseline")]:
        page.goto(f"{server}/{path}")
        wait_for_run(page)
        page.wait_for_selector(".js-plotly-plot .main-svg .trace", timeout=0)
        wait_for_charts(page)
        assert page.get_by_text("not measured now", exact=False).first.is_visible(), path
        assert title in page.locator(".js-plotly-plot").first.inner_text(), path
        runs, socket.runs = socket.runs, 0
        assert runs == 1, (path, runs)
    page.goto(server)
    wait_for_run(page)
    page.wait_for_selector("text=Recorded runs", timeout=0)
    assert page.get_by_text("not measured now", exact=False).first.is_visible()
    assert socket.runs == 1
    page.close()


def test_the_review_report_opens_offline_with_its_charts_drawn(browser, tmp_path):
    from gpu.core import schema
    from gpu.results.analysis import report
    from gpu.results.exchange.catalog import BUNDLED_DIRS

    h200 = schema.read_results(next(BUNDLED_DIRS[0].glob("transfers_nvidia-h200_*.parquet")))
    h100 = schema.read_results(next(BUNDLED_DIRS[1].glob("transfers_nvidia-h100*.parquet")))
    path = tmp_path / "review.html"
    path.write_text(report.render(h200, [h100]), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    page.route("**/*", lambda route: route.abort() if not route.request.url.startswith("file:") else
               route.continue_())  # offline: nothing may load from the network
    page.goto(path.as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg .scatterlayer .trace", timeout=60_000)
    assert page.locator(".js-plotly-plot").count() == 2  # ratio and normalized charts
    assert "points slower beyond noise" in page.locator(".headline").first.inner_text() or \
        "none of" in page.locator(".headline").first.inner_text()
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 20_000  # a drawn page, not a blank one
    page.close()


def test_the_built_in_talk_steps_through_every_scene_with_the_keyboard(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1920, "height": 1080})
    watch_runs(page)
    page.goto(f"{server}/talk?present=1")
    headlines, begun = [], None
    for number in range(1, 7):
        wait_for_run(page, begun)  # the run the last key started (the first: the page's own)
        page.wait_for_function(f"document.body.innerText.includes('scene {number} of 6')", timeout=0)
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=0)
        if headlines:  # the new scene's verdict, not the last one's still on screen
            page.wait_for_function("(old) => { const h = document.querySelector('h2'); "
                                   "return h && h.innerText !== old; }", arg=headlines[-1], timeout=0)
        headline = page.locator("h2").first.inner_text()
        assert headline and not headline.startswith("No verdict"), headline
        headlines.append(headline)
        assert not page.locator("[data-testid='stSidebar']").is_visible()  # stage: no sidebar
        page.screenshot(path=str(tmp_path / f"scene-{number}.png"))
        assert (tmp_path / f"scene-{number}.png").stat().st_size > 20_000
        page.mouse.click(5, 1070)  # focus the page, not a widget
        if number < 6:
            wait_for_shortcut(page, "arrowright")
            begun = runs_begun(page)
            page.keyboard.press("ArrowRight")
    assert not page.get_by_text("Measure live").count()  # replaying: nothing to measure live
    assert len(set(headlines)) == 6
    page.close()
