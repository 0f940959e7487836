"""The Fleet page in a real browser at 1920×1080 on a stored simulated fleet (one board slowed, its PCIe link
recorded downtrained): at the desk the heatmap comes first and the slowed board is named; on stage (?present=1) the
heatmap, its board names (20 px or more) and the sentence naming the board fit 1920×960 without scrolling.
Screenshots go to out/screenshots/."""

from pathlib import Path

import pytest

from tests import fleet_page_helper as helper
from tests import simulated_fleet
from tests.browser_helper import CHROMIUM, streamlit_app, wait_for_charts, wait_for_run, watch_runs

pytestmark = [pytest.mark.browser, pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]
SHOTS = Path(__file__).resolve().parent.parent / "out" / "screenshots"
SLOW = f"GPU {simulated_fleet.board_uuid(helper.SLOW_BOARD)[-8:]} on node-0"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]
FITS = """() => { const m = document.querySelector('[data-testid="stMain"]');
  const h = document.querySelector('.js-plotly-plot'), t = document.querySelector('[class*="st-key-stage_takeaway"]');
  const names = [...document.querySelectorAll('.js-plotly-plot g.ytick text')]
    .map(e => parseFloat(getComputedStyle(e).fontSize));
  return {scroll: m.scrollHeight, view: m.clientHeight, heatmap: h && h.getBoundingClientRect().bottom,
          takeaway: t && t.getBoundingClientRect().bottom, names: names.length, smallest: Math.min(...names)}; }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('fleet') / 'runs.sqlite'}"
    helper.fill_store(url, boards=8, runs_per_board=2)
    with streamlit_app(PINPOINT_DB_URL=url) as address:
        yield address


def test_the_fleet_page_names_the_slowed_board_at_the_desk_and_on_stage(server):
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1920, "height": 1080})
        watch_runs(page)
        page.goto(f"{server}/fleet")
        wait_for_run(page)
        page.wait_for_selector(".js-plotly-plot .main-svg .heatmaplayer", timeout=0)  # drawn after the run
        heatmap = page.locator(".js-plotly-plot").first
        assert heatmap.bounding_box()["y"] < 1080  # the heatmap is on the first screen
        assert "node-0 · H200 · 00000003" in heatmap.inner_text()
        assert page.get_by_text(SLOW, exact=False).count() >= 1  # the outlier sentence
        assert page.get_by_text("Its run records PCIe Gen4 ×8, the others PCIe Gen5 ×16", exact=False).count()
        page.screenshot(path=str(SHOTS / "fleet-desk.png"))

        page.set_viewport_size({"width": 1920, "height": 960})  # the stage in a windowed browser
        page.goto(f"{server}/fleet?present=1")
        wait_for_run(page)
        page.wait_for_selector(".js-plotly-plot .main-svg .heatmaplayer", timeout=0)
        wait_for_charts(page)
        fits = page.evaluate(FITS)
        assert fits["scroll"] <= fits["view"] + 1, fits  # no scrolling on a 960 px screen
        assert fits["heatmap"] <= 960 and fits["takeaway"] <= 960, fits
        assert fits["names"] >= 8 and fits["smallest"] >= 20, fits  # every board named, readable from the back
        takeaway = page.locator("[class*='st-key-stage_takeaway']").inner_text()
        assert SLOW in takeaway and "PCIe Gen4 ×8" in takeaway
        page.screenshot(path=str(SHOTS / "fleet-stage.png"))
        browser.close()
