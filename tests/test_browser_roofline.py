"""The Roofline page in a real browser at 1920×1080 (replay mode), desk and stage: the chart is drawn with its log-log
axes and every placed kernel as a marker, the stage view fits the screen with its takeaway, and the console stays
free of errors. Runs on whatever recordings are bundled (with or without ceiling recordings)."""

import pytest

from tests.browser_helper import CHROMIUM
from tests.test_browser import server  # noqa: F401  (one streamlit server per module)
from tests.test_stage_browser import SHOTS, browser, check_charts, check_stage, link, open_page, settle  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]

# The roofline figure as drawn: its axes' types and the markers on each panel.
DRAWN = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => ({
  title: (gd._fullLayout.title && gd._fullLayout.title.text || '').split('<br>')[0],
  x: gd._fullLayout.xaxis.type, y: gd._fullLayout.yaxis.type,
  markers: gd._fullData.filter(t => t.visible === true && /markers/.test(t.mode || '') && t.name !== 'highlighted'
                               && !/^ridge/.test(t.name)).reduce((n, t) => n + t.x.length, 0),
  points: gd.querySelectorAll('.scatterlayer .point').length,
}))"""


def test_the_roofline_draws_every_kernel_on_log_axes_at_the_desk_and_fits_the_stage(server, browser):  # noqa: F811
    from gpu.results import roofline as rl
    from gpu.service.backends import ReplayBackend

    data = ReplayBackend().data
    runs = rl.newest_runs(data, sorted(set(data["device_name"]))[0])
    placed = len(rl.kernel_points(runs, rl.measured_roofs(runs)))
    problems, errors = [], []
    page = open_page(browser, errors)
    for present in (False, True):
        where = f"roofline ({'stage' if present else 'desk'})"
        page.goto(link(server, "roofline", "present=1" if present else ""))
        settle(page, chart=True, takeaway=present)
        every = page.evaluate(DRAWN)
        drawn = [c for c in every if "Roofline: every kernel" in c["title"]]
        if len(drawn) != 1:
            problems.append(f"{where}: {len(drawn)} roofline charts among {every}")
        else:
            chart = drawn[0]
            if (chart["x"], chart["y"]) != ("log", "log"):
                problems.append(f"{where}: axes {chart['x']}/{chart['y']}, not log-log")
            if chart["markers"] < placed or chart["points"] < placed or placed < 12:
                problems.append(f"{where}: {chart['markers']} markers ({chart['points']} drawn) for {placed} kernels")
        problems += check_charts(page, where)
        if present:
            problems += check_stage(page, where, needs_chart=True)
        page.screenshot(path=str(SHOTS / f"{'stage' if present else 'desk'}-roofline.png"), full_page=not present)
    page.close()
    problems += [f"console: {e}" for e in errors]
    assert not problems, "\n".join(problems)
