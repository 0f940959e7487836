"""The stage in a real browser at 1920×1080 (replay mode): every page with ?present=1 and every talk scene reached
with → fits the screen, reads from the back of the room, and every chart (desk and stage) is drawn right.

Screenshots are kept in out/screenshots/ (git-ignored) for a person to look at."""

import re

import pytest

from pages._shared import PAGES as ENTRIES
from tests.browser_helper import CHROMIUM, SHOTS, wait_for_charts, wait_for_shortcut

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing"),
]
WIDTH, HEIGHT = 1920, 1080
PAGES = ["", "transfers", "coalescing", "reductions", "occupancy", "streams", "memory-modes", "runs", "compare"]
CHART_PAGES = {"transfers", "coalescing", "reductions", "occupancy", "streams", "memory-modes", "compare"}

# Per chart: its log axes' rendered ranges against the data drawn on them, and pairs of series drawn on top of each
# other with the same look (every point within 3 px of the other's, same marker and dash): the lower one is hidden.
CHART_CHECKS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map((gd, index) => {
  const full = gd._fullLayout, problems = [];
  if (!full) return {index, problems: ['not drawn']};
  for (const [name, axis] of Object.entries(full)) {
    if (!/^[xy]axis\\d*$/.test(name) || axis.type !== 'log') continue;
    const letter = name[0], id = letter + name.slice(5);
    const values = [];
    for (const t of gd._fullData) {
      if (!t.visible || t.visible === 'legendonly' || (t[letter + 'axis'] || letter) !== id) continue;
      for (const v of (t[letter] || [])) if (typeof v === 'number' && v > 0) values.push(v);
    }
    if (!values.length) continue;
    const low = Math.log10(Math.min(...values)), high = Math.log10(Math.max(...values));
    const [r0, r1] = axis.range;
    if (r0 < low - 2 || r1 > high + 2) problems.push(`${name} shows 10^${r0.toFixed(1)}…10^${r1.toFixed(1)} for data `
                                                      + `10^${low.toFixed(1)}…10^${high.toFixed(1)}`);
    const ticks = Array.from(gd.querySelectorAll(`.${letter}${name.slice(5)}tick text`)).map(e => e.textContent);
    const bad = ticks.filter(t => /^[0-9.]+[kMGTB]$/.test(t.trim()));
    if (bad.length) problems.push(`${name} has SI-suffixed ticks ${bad.join(', ')}`);
  }
  const traces = gd._fullData.filter(t => t.type === 'scatter' && t.visible === true && t.x && t.x.length);
  const pixels = t => {
    const xa = full[(t.xaxis || 'x').replace('x', 'xaxis')], ya = full[(t.yaxis || 'y').replace('y', 'yaxis')];
    return Array.from(t.x, (x, i) => [xa.c2p(x), ya.c2p(t.y[i])]);
  };
  const look = t => [t.mode, (t.marker || {}).symbol, (t.line || {}).dash].join('/');
  for (let i = 0; i < traces.length; i++) for (let j = i + 1; j < traces.length; j++) {
    const a = traces[i], b = traces[j];
    if ((a.xaxis || 'x') !== (b.xaxis || 'x') || (a.yaxis || 'y') !== (b.yaxis || 'y') || look(a) !== look(b)) continue;
    const pa = pixels(a), pb = pixels(b);
    const near = (p, set) => set.some(q => Math.abs(p[0] - q[0]) <= 3 && Math.abs(p[1] - q[1]) <= 3);
    if (pa.every(p => near(p, pb))) problems.push(`${a.name} is hidden under ${b.name}`);
    else if (pb.every(p => near(p, pa))) problems.push(`${b.name} is hidden under ${a.name}`);
  }
  // The legend's box never covers an axis' tick labels or titles, and holds every entry inside the figure.
  const legend = gd.querySelector('.legend'), rect = e => e.getBoundingClientRect();
  if (legend) {
    const box = rect(legend.querySelector('.bg') || legend), paper = rect(gd.querySelector('.main-svg'));
    const cover = (a, b) => a.left < b.right - 1 && b.left < a.right - 1
                            && a.top < b.bottom - 1 && b.top < a.bottom - 1;
    const labels = Array.from(gd.querySelectorAll('.xtick text, .ytick text, .xtitle, .ytitle, [class*="xtitle"], '
                                                  + '[class*="ytitle"]')).filter(e => e.textContent.trim());
    const covered = labels.filter(e => cover(box, rect(e))).map(e => e.textContent.trim());
    if (covered.length) problems.push(`the legend covers ${covered.slice(0, 4).join(', ')}`);
    const cut = Array.from(legend.querySelectorAll('.traces')).filter(e => rect(e).bottom > Math.min(box.bottom,
                                                                                                 paper.bottom) + 1);
    if (cut.length) problems.push(`${cut.length} legend entries cut off`);
  }
  const siTicks = Array.from(gd.querySelectorAll('.xtick text')).map(e => e.textContent.trim())
    .filter(t => /^[0-9.]+[kMGT]$/.test(t) && /size|bytes|set/i.test(full.xaxis.title && full.xaxis.title.text || ''));
  if (siTicks.length) problems.push(`byte ticks written ${siTicks.join(', ')}`);
  return {index, title: (full.title && full.title.text || '').split('<br>')[0], problems};
})"""

# On stage: the rendered size of every tick label, legend entry, annotation and axis title.
FONT_SIZES = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(gd => {
  const size = e => parseFloat(getComputedStyle(e).fontSize);
  const pick = (selector, kind) => Array.from(gd.querySelectorAll(selector))
    .filter(e => e.textContent.trim()).map(e => ({kind, text: e.textContent.slice(0, 30), size: size(e)}));
  return [...pick('.xtick text, .ytick text', 'tick'), ...pick('.legendtext', 'legend'),
          ...pick('.annotation-text', 'annotation'), ...pick('.xtitle, .ytitle, [class^="xtitle"], [class^="ytitle"]',
          'axis title'), ...pick('.bartext, .textpoint text', 'label')];
})"""

BOTTOMS = """() => {
  const box = s => { const e = document.querySelector(s); return e ? e.getBoundingClientRect() : null; };
  const title = box('h1'), chart = box('.js-plotly-plot'), takeaway = box('[class*="st-key-stage_takeaway"]');
  return {scrollY: (document.querySelector('[data-testid="stMain"]') || {}).scrollTop || window.scrollY,
          title: title && title.top, chart: chart && chart.bottom, takeaway: takeaway && takeaway.bottom,
          focus: document.activeElement && document.activeElement.tagName};
}"""


def settle(page, chart: bool = False, takeaway: bool = False) -> None:
    """Wait for the page's title (a fresh page reports 'notRunning' before its first run), the end of the run and,
    where expected, a drawn chart and the takeaway; missing ones are reported by the checks."""
    page.wait_for_selector("h1", timeout=90_000)
    page.wait_for_selector("[data-test-script-state='notRunning']", timeout=90_000)
    # A visible chart: charts of a tab not shown are in the page too, hidden (waiting on the first would time out).
    for wanted, selector in ((chart, ".js-plotly-plot .main-svg >> visible=true"),
                             (takeaway, "[class*='st-key-stage_takeaway']")):
        if wanted:
            try:
                page.wait_for_selector(selector, timeout=60_000)
            except Exception:  # noqa: BLE001  (reported below with the page's name)
                pass
    try:
        wait_for_charts(page, timeout=30_000)
    except Exception:  # noqa: BLE001  (a chart still changing is reported by the checks)
        pass


def check_charts(page, where: str) -> list[str]:
    return [f"{where}, chart {c['index']} ({c.get('title', '')}): {p}"
            for c in page.evaluate(CHART_CHECKS) for p in c["problems"]]


def check_stage(page, where: str, needs_chart: bool) -> list[str]:
    problems = []
    box = page.evaluate(BOTTOMS)
    if box["title"] is None or box["title"] < 0:
        problems.append(f"{where}: title top {box['title']} (off screen)")
    if needs_chart:
        if box["chart"] is None or box["chart"] > HEIGHT:
            problems.append(f"{where}: first chart ends at {box['chart']} px")
        if box["takeaway"] is None or box["takeaway"] > HEIGHT:
            problems.append(f"{where}: takeaway ends at {box['takeaway']} px")
        for text in page.evaluate(FONT_SIZES):
            floor = 22 if text["kind"] == "axis title" else 20
            if text["size"] < floor:
                problems.append(f"{where}: {text['kind']} '{text['text']}' at {text['size']} px")
    if page.locator("[data-testid='stException']").count():
        problems.append(f"{where}: an exception is shown")
    return problems


def open_page(browser, errors: list[str]):
    """A tab whose console errors (every one: 404s included) and page errors are collected in ``errors``."""
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    page.on("console", lambda m: m.type == "error" and errors.append(f"{m.text} ({m.location.get('url', '')})"))
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page


def link(address: str, path: str, query: str = "") -> str:
    """The address PinPoint hands out for a page (pages._ui.url_state.view_link): the root, with the page in ?page=,
    which loads cleanly under any server. A page's own address (/transfers) loads cleanly under serve.py: see
    test_every_page_address_typed_or_reloaded_loads_without_a_404."""
    return f"{address}/?" + "&".join(([f"page={path}"] if path else []) + ([query] if query else []))


def check_address(page, path: str, where: str) -> list[str]:
    """After a link opened its page, the address names the page as the menu does (/transfers?…)."""
    shown = page.evaluate("window.location.pathname")
    return [] if shown == f"/{path}" else [f"{where}: the address reads {shown}, not /{path}"]


def test_every_page_fits_the_stage_and_draws_its_charts_right(server, browser):
    problems, errors = [], []
    page = open_page(browser, errors)
    for path in PAGES:
        name = path or "overview"
        for present in (True, False):
            page.goto(link(server, path, "present=1" if present else ""))
            settle(page, chart=path in CHART_PAGES, takeaway=present and path in CHART_PAGES)
            where = f"{name} ({'stage' if present else 'desk'})"
            problems += check_address(page, path, where)
            if present:
                problems += check_stage(page, where, path in CHART_PAGES)
                page.screenshot(path=str(SHOTS / f"stage-{name}.png"))
            else:
                page.screenshot(path=str(SHOTS / f"desk-{name}.png"), full_page=True)
            problems += check_charts(page, where)
            if path == "transfers" and not present:  # the page's own "Link to this view" loads cleanly too
                page.get_by_text("Link to this view").click()
                address = page.locator("[data-testid='stCode'] code").first.inner_text().strip()
                if not address.startswith(f"{server}/?page=transfers&"):
                    problems.append(f"{where}: the link to this view is {address}")
                page.goto(address)
                settle(page, chart=True)
                problems += check_address(page, path, f"{where}, its link")
    page.close()
    problems += [f"console: {e}" for e in errors]
    assert not problems, "\n".join(problems)


# The focused element (and its ::before, where Streamlit draws the main area's focus ring) with a visible ring.
FOCUS_FRAME = """() => { const e = document.activeElement; if (!e || e === document.body) return null;
  for (const pseudo of [null, '::before', '::after']) { const s = getComputedStyle(e, pseudo);
    if (s.outlineStyle !== 'none' || s.boxShadow !== 'none')
      return `${e.tagName} ${e.getAttribute('data-testid')}${pseudo || ''} draws outline ${s.outlineStyle}, ` +
             `box-shadow ${s.boxShadow}`; }
  return null; }"""


def test_every_talk_scene_reached_with_the_arrow_key_fits_the_stage(server, browser):
    problems, errors = [], []
    page = open_page(browser, errors)
    page.goto(link(server, "talk", "present=1"))
    for number in range(1, 7):
        page.wait_for_function(f"document.body.innerText.includes('scene {number} of 6')", timeout=90_000)
        settle(page, chart=True, takeaway=True)
        where = f"talk scene {number}"
        problems += check_stage(page, where, needs_chart=True)
        problems += check_charts(page, where)
        box = page.evaluate(BOTTOMS)
        if box["scrollY"]:
            problems.append(f"{where}: scrolled by {box['scrollY']} px")
        if box["focus"] == "BUTTON":
            problems.append(f"{where}: a button keeps the focus")
        notes = page.locator("[data-testid='stExpander']").filter(has_text="Speaker notes")
        if re.search(r"\{'", notes.inner_text() if notes.count() else ""):
            problems.append(f"{where}: speaker notes print a Python dict")
        page.screenshot(path=str(SHOTS / f"talk-scene-{number}.png"))
        if number == 3:  # the presenter clicked the page before →: no focus frame around the main area
            frame = page.evaluate(FOCUS_FRAME)
            if frame:
                problems.append(f"{where}: after a click and →, {frame}")
        if number == 2:
            page.mouse.click(WIDTH - 60, 600)  # a click on the page's empty right margin focuses the main area
        if number < 6:
            wait_for_shortcut(page, "arrowright")
            page.keyboard.press("ArrowRight")
    # replaying: no "Measure live" on stage, and m changes nothing
    if page.get_by_text("Measure live").count():
        problems.append("talk scene 6: 'Measure live' is offered while replaying")
    # Esc: back at the desk, with the sidebar
    page.keyboard.press("Escape")
    page.wait_for_selector("[data-testid='stSidebar']", state="visible", timeout=60_000)
    settle(page)
    page.screenshot(path=str(SHOTS / "talk-after-escape.png"))
    if page.evaluate("parseFloat(getComputedStyle(document.querySelector('h1')).fontSize)") > 48:
        problems.append("after Esc the talk keeps its stage fonts")
    page.close()
    problems += [f"console: {e}" for e in errors]
    assert not problems, "\n".join(problems)


def test_every_page_address_typed_or_reloaded_loads_without_a_404(server, browser):
    """Every page at its own address (/transfers, /transfers?present=1, …), typed and then reloaded, as serve.py
    serves it: no failed request (Streamlit's frontend would otherwise probe /transfers/_stcore/health and
    …/host-config first: two 404s), no console error, its chart drawn, the address kept, one websocket to the root
    open; and at the desk its menu still opens the next page over that websocket."""
    problems, errors, failed, sockets = [], [], [], []
    page = open_page(browser, errors)
    page.on("response", lambda r: r.status >= 400 and failed.append(f"{r.status} {r.url}"))
    page.on("websocket", lambda socket: sockets.append(socket))
    stream = server.replace("http://", "ws://") + "/_stcore/stream"
    paths = [entry.url_path for entry in ENTRIES]
    for number, path in enumerate(paths):
        name, drawn = path or "overview", path in CHART_PAGES or path == "talk"
        for present in (False, True):
            for how in ("typed", "reloaded"):
                where = f"{name} ({'stage' if present else 'desk'}, {how})"
                if how == "typed":
                    page.goto(f"{server}/{path}" + ("?present=1" if present else ""))
                else:
                    page.reload()
                settle(page, chart=drawn)
                problems += check_address(page, path, where)
                if drawn and not page.locator(".js-plotly-plot .main-svg").count():
                    problems.append(f"{where}: no chart drawn")
                if page.locator("[data-testid='stException']").count():
                    problems.append(f"{where}: an exception is shown")
                if not sockets or sockets[-1].url != stream or sockets[-1].is_closed():
                    problems.append(f"{where}: the websocket is {sockets[-1].url if sockets else 'missing'}"
                                    f"{' (closed)' if sockets and sockets[-1].is_closed() else ''}, not {stream}")
            if not present:  # the menu opens the next page over the same websocket
                following = ENTRIES[(number + 1) % len(ENTRIES)]
                opened, title = len(sockets), page.locator("h1").first.inner_text()
                page.locator("[data-testid='stSidebarNav'] a").filter(has_text=following.title).first.click()
                page.wait_for_function("(path) => window.location.pathname === path", arg=f"/{following.url_path}",
                                       timeout=60_000)
                page.wait_for_function("(title) => { const h = document.querySelector('h1'); "
                                       "return h && h.innerText !== title; }", arg=title, timeout=60_000)
                settle(page, chart=following.url_path in CHART_PAGES or following.url_path == "talk")
                if len(sockets) != opened or sockets[-1].is_closed():
                    problems.append(f"{name} (desk): opening {following.title} from the menu reconnected")
    page.close()
    problems += [f"failed request: {f}" for f in failed] + [f"console: {e}" for e in errors]
    assert not problems, "\n".join(problems)


NO_SCROLL = """() => { const m = document.querySelector('[data-testid="stMain"]');
  return m ? m.scrollHeight - m.clientHeight : 0; }"""


@pytest.mark.parametrize("height", [1080, 960])
def test_every_stage_page_fits_without_scrolling_at_1920_by(server, browser, height):
    """At 1920×1080 and in a windowed 1920×960 browser every stage page shows its takeaway whole and does not
    scroll; a link with a bad value says so without pushing the takeaway off the screen."""
    problems, errors = [], []
    page = browser.new_page(viewport={"width": WIDTH, "height": height})
    page.on("pageerror", lambda e: errors.append(str(e)))
    for path in [*PAGES, "talk"]:
        for query in ("present=1", "present=1&not_a_setting=1"):
            page.goto(link(server, path, query))
            charted = path in CHART_PAGES or path == "talk"
            settle(page, chart=charted, takeaway=charted)
            where = f"{path or 'overview'} at 1920×{height}" + (" with a bad link value" if "not_a" in query else "")
            box = page.evaluate(BOTTOMS)
            if charted and (box["takeaway"] is None or box["takeaway"] > height):
                problems.append(f"{where}: takeaway ends at {box['takeaway']} px")
            overflow = page.evaluate(NO_SCROLL)
            if overflow > 2:
                problems.append(f"{where}: the stage scrolls by {overflow} px")
        page.screenshot(path=str(SHOTS / f"stage-{path or 'overview'}-{height}.png"))
    page.close()
    assert not problems and not errors, "\n".join(problems + errors)


def test_every_memory_modes_tab_draws_its_charts_right(server, browser):
    problems, errors = [], []
    page = open_page(browser, errors)
    for present in (False, True):
        page.goto(link(server, "memory-modes", "present=1" if present else ""))
        settle(page, chart=True)
        tabs = page.get_by_role("tab")
        for number in range(tabs.count()):
            tabs.nth(number).click()
            page.wait_for_function("(n) => document.querySelectorAll('[role=tab]')[n]"
                                   ".getAttribute('aria-selected') === 'true'", arg=number, timeout=30_000)
            settle(page, chart=True)
            problems += check_charts(page, f"memory modes tab {number + 1} ({'stage' if present else 'desk'})")
    page.close()
    assert not problems, "\n".join(problems)
