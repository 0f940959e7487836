"""The Roofline page in a real browser at 1920×1080 (replay mode), desk and stage: the chart is drawn with its log-log
axes and every placed kernel as a marker, the stage view fits the screen with its takeaway, and the console stays
free of errors. Runs on whatever recordings are bundled (with or without ceiling recordings)."""

import pytest

from tests.browser_helper import CHROMIUM
from tests.test_stage_browser import (
    BOTTOMS,
    NO_SCROLL,
    SHOTS,
    WIDTH,
    check_charts,
    check_stage,
    link,
    open_page,
    settle,
)

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


def test_the_roofline_draws_every_kernel_on_log_axes_at_the_desk_and_fits_the_stage(server, browser):
    from gpu.present import roofline as rl
    from gpu.service.backends import ReplayBackend

    data = ReplayBackend().data
    runs = rl.newest_runs(data, rl.device_models(data)[0])  # the model the page opens on
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


# Every roof and ridge label on the roofline figure, and the kernel markers any of them covers (boxes that overlap).
LABELS = """() => {
  const gd = Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(g => /Roofline: every kernel/.test(g._fullLayout.title.text || ''));
  if (!gd) return null;
  const rect = e => e.getBoundingClientRect();
  const labels = Array.from(gd.querySelectorAll('.annotation')).filter(a => /roof|GB\\/s|FLOP/.test(a.textContent))
    .map(a => ({text: a.textContent, box: rect(a.querySelector('.annotation-text') || a)}))
    .filter(l => !/^Kernels with|^Kernels without/.test(l.text));
  const points = Array.from(gd.querySelectorAll('.scatterlayer .point')).map(rect).filter(b => b.width > 0);
  const cover = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  return labels.map(l => ({text: l.text, covers: points.filter(p => cover(l.box, p)).length}));
}"""


def test_each_roof_is_labelled_clear_of_the_kernels_a_hover_reads_its_sentence_and_the_stage_fits_960(
        server, browser):
    from gpu.present import roofline as rl
    from gpu.service.backends import ReplayBackend

    data = ReplayBackend().data
    runs = rl.newest_runs(data, rl.device_models(data)[0])  # the model the page opens on
    roofs = rl.measured_roofs(runs)
    problems, errors = [], []
    page = open_page(browser, errors)
    page.goto(link(server, "roofline"))
    settle(page, chart=True)
    labels = page.evaluate(LABELS) or []
    texts = " | ".join(label["text"] for label in labels)
    for roof in rl.memory_roofs(roofs) + [r for r in roofs if r.kind == "compute"]:
        if f"{roof.name} {rl.roof_rate(roof)}" not in texts:
            problems.append(f"desk: no label for the {roof.name} roof among {texts}")
    if rl.ridges(roofs) and "ridge" not in texts:
        problems.append(f"desk: the ridge is not named on the chart: {texts}")
    problems += [f"desk: the label '{label['text']}' covers {label['covers']} kernel markers" for label in labels
                 if label["covers"]]
    # Hover a kernel marker of the left panel: its sentence shows, naming a roof and a fraction, inside the chart.
    page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
    said, hover = "", page.locator(".hoverlayer .hovertext").first
    for point in page.locator(".js-plotly-plot .scatterlayer .point").all()[:40]:
        box = point.bounding_box()
        if not box or box["width"] < 4:  # the ridge's foot is a marker of size 0
            continue
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        try:  # this marker's hover text: a hover box that differs from the last one read
            page.wait_for_function("(old) => { const h = document.querySelector('.hoverlayer .hovertext'); "
                                   "return h && h.textContent !== old; }", arg=said, polling=50, timeout=2_000)
        except Exception:  # noqa: BLE001  (a marker without a hover text: the next one is tried)
            pass
        said = hover.text_content() if hover.count() else ""
        if " · " in said:  # a kernel's marker (not a roof's or the ridge's)
            break
    if " · " not in said or (rl.ridges(roofs) and " % of the " not in said.replace("\n", " ")):
        problems.append(f"desk: hovering a kernel shows '{said}', not its sentence with a roof and a fraction")
    elif hover.bounding_box()["x"] < 0 or hover.bounding_box()["x"] + hover.bounding_box()["width"] > WIDTH:
        problems.append(f"desk: the hover sentence runs off the screen: {hover.bounding_box()}")
    page.screenshot(path=str(SHOTS / "desk-roofline-hover.png"))
    page.close()
    small = browser.new_page(viewport={"width": WIDTH, "height": 960})
    small.on("pageerror", lambda e: errors.append(str(e)))
    small.goto(link(server, "roofline", "present=1"))
    settle(small, chart=True, takeaway=True)
    box = small.evaluate(BOTTOMS)
    if box["takeaway"] is None or box["takeaway"] > 960 or small.evaluate(NO_SCROLL) > 2:
        problems.append(f"stage at 1920×960: takeaway ends at {box['takeaway']} px, scrolls by "
                        f"{small.evaluate(NO_SCROLL)} px")
    stage_labels = small.evaluate(LABELS) or []
    problems += [f"stage at 1920×960: the label '{label['text']}' covers {label['covers']} kernel markers"
                 for label in stage_labels if label["covers"]]
    said = " | ".join(label["text"] for label in stage_labels)  # on stage too, each roof and ridge drawn is named
    for name in [f"{r.name} {rl.roof_rate(r)}" for r in rl.memory_roofs(roofs) + [r for r in roofs
                                                                                 if r.kind == "compute"]] + \
            [f"ridge {rl.number(r.intensity)} FLOP/B" for r in rl.ridges(roofs)]:
        if name not in said:
            problems.append(f"stage at 1920×960: '{name}' is not named on the chart: {said}")
    small.screenshot(path=str(SHOTS / "stage-roofline-960.png"))
    small.close()
    problems += [f"console: {e}" for e in errors]
    assert not problems, "\n".join(problems)
