"""Every state of every page on stage, in a real browser: the states are read from what each page draws on stage (its
keyed widgets: every tab, every toggle, every entry of every radio and menu, each a change from the page's default)
and every talk scene; several tabs of one Chromium check them side by side against one server.

Each state, at 1920 × ``height`` with ``?present=1``, must fit without scrolling, keep every text and tick at 14 px or
more with no two chart texts on top of each other, draw a chart with data (or say in one line why there is none), and
show exactly one takeaway. Used by tests/test_stage_states.py; ``python -m tests.stage_states URL`` prints the
states, their problems and the time taken against a running server."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

from pages._shared import PAGES
from tests.browser_helper import CHARTS_STEADY, CHROMIUM, FLAGS, SHOTS, STEADY_MS

WIDTH = 1920
MIN_TEXT_PX = 14
# Pages with a chart and a takeaway on stage; the others (Overview, Runs) are lists, checked for fit and text only.
NO_CHART = {"", "runs"}
# A menu with more entries than this (a kernel to highlight, a run among many; a long menu lists only the entries in
# view) is checked at its first, middle and last entries: every entry of a device or recording menu is checked.
WHOLE_MENU = 10
TALK_SCENES = 6

# Counts the script runs the page has started (Streamlit marks its app view while a run is under way), so an action
# is followed by the run it caused, never by the state before it.
RUN_COUNTER = """(() => { window.__pinpointRuns = 0; let running = false;
  new MutationObserver(() => { const e = document.querySelector('[data-test-script-state]');
    const now = !!e && e.getAttribute('data-test-script-state') === 'running';
    if (now && !running) window.__pinpointRuns += 1; running = now; })
  .observe(document, {subtree: true, attributes: true, attributeFilter: ['data-test-script-state'], childList: true});
})();"""

# The keyed controls a speaker can change on stage: outside any box, or in the page's "More settings". The sidebar
# (hidden on stage), Runs' import box and the calculator's box are not stage controls.
CONTROLS = """() => {
  const keyOf = e => { for (let n = e; n; n = n.parentElement) { const c = Array.from(n.classList || [])
    .find(c => c.startsWith('st-key-')); if (c) return c.slice(7); } return null; };
  const place = e => { const box = e.closest('[data-testid=stExpander]');
    if (!box) return 'stage'; return /More settings/.test(box.querySelector('summary').innerText) ? 'more' : null; };
  const main = document.querySelector('[data-testid=stMain]'), found = [];
  for (const e of main.querySelectorAll('[data-testid=stRadio]')) {
    const labels = Array.from(e.querySelectorAll('[role=radiogroup] label')).map(l => l.textContent.trim());
    const chosen = Array.from(e.querySelectorAll('input')).findIndex(i => i.checked);
    found.push({kind: 'radio', key: keyOf(e), place: place(e), labels, chosen});
  }
  for (const e of main.querySelectorAll('[data-testid=stCheckbox]'))
    found.push({kind: 'toggle', key: keyOf(e), place: place(e), labels: [e.innerText.trim()], chosen: -1});
  for (const e of main.querySelectorAll('[data-testid=stSelectbox]'))
    found.push({kind: 'menu', key: keyOf(e), place: place(e), labels: [], chosen: -1,
                current: (e.querySelector('input') || {}).value});
  const tabs = Array.from(main.querySelectorAll('[role=tab]')).filter(t => !t.closest('[data-testid=stExpander]'));
  if (tabs.length) found.push({kind: 'tab', key: 'tab', place: 'stage', labels: tabs.map(t => t.innerText.trim()),
                               chosen: tabs.findIndex(t => t.getAttribute('aria-selected') === 'true')});
  return found.filter(c => c.key && c.place);
}"""

# What one stage state must hold, measured in the page: the overflow, small and overlapping texts, the charts shown
# (and whether any has data), the one-line reason shown instead, the takeaways.
CHECKS = """(minPx) => {
  const main = document.querySelector('[data-testid=stMain]');
  const shown = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0
    && getComputedStyle(e).visibility !== 'hidden' && !e.closest('[hidden], details:not([open]) > div'); };
  const problems = [];
  const overflow = Math.max(main.scrollHeight - main.clientHeight,
                            document.documentElement.scrollHeight - window.innerHeight);
  if (overflow > 2) problems.push(`scrolls by ${overflow} px`);
  const small = new Set();
  for (const e of main.querySelectorAll('*')) {
    if (e.closest('.js-plotly-plot') && e.tagName !== 'text') continue;
    const own = Array.from(e.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own || !shown(e)) continue;
    const size = parseFloat(getComputedStyle(e).fontSize);
    if (size < minPx) small.add(`'${e.textContent.trim().slice(0, 40)}' at ${size.toFixed(1)} px`);
  }
  if (small.size) problems.push(`text under ${minPx} px: ${Array.from(small).slice(0, 4).join('; ')}`
                                + (small.size > 4 ? ` (and ${small.size - 4} more)` : ''));
  const charts = Array.from(main.querySelectorAll('.js-plotly-plot')).filter(shown);
  let drawn = 0;
  charts.forEach((gd, index) => {
    const data = (gd._fullData || []).filter(t => t.visible === true);
    const points = t => ['x', 'y', 'z', 'values', 'lat', 'r'].some(k => t[k] && t[k].length) ||
                        (t.cells && t.cells.values && t.cells.values.length);
    if (data.some(points)) drawn += 1;
    else problems.push(`chart ${index + 1} is drawn empty`);
    // Each line of a text (Plotly writes a line break as a tspan of class "line"; blank lines take no room)
    const texts = Array.from(gd.querySelectorAll('text')).filter(t => t.textContent.trim() && shown(t))
      .flatMap((t, n) => { const lines = Array.from(t.querySelectorAll('tspan.line'))
        .filter(l => l.textContent.replace(/\u00a0/g, ' ').trim());
        return (lines.length ? lines : [t]).map(l => ({t: l.textContent.trim().slice(0, 30), n,
                                                       r: l.getBoundingClientRect()})); });
    const paper = gd.querySelector('.main-svg').getBoundingClientRect();
    const cut = texts.filter(({r}) => r.top < paper.top - 2 || r.bottom > paper.bottom + 2 || r.left < paper.left - 2
                                      || r.right > paper.right + 2).map(x => `'${x.t}'`);
    if (cut.length) problems.push(`chart ${index + 1}: ${cut.slice(0, 3).join(', ')} cut off at its edge`);
    const clash = [];
    for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
      if (texts[i].n === texts[j].n) continue;  // lines of one text
      const a = texts[i].r, b = texts[j].r;
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 2 && h > 2) clash.push(`'${texts[i].t}' and '${texts[j].t}'`);
    }
    if (clash.length) problems.push(`chart ${index + 1}: ${clash.slice(0, 3).join(', ')} overlap`
                                    + (clash.length > 3 ? ` (and ${clash.length - 3} more)` : ''));
  });
  const reasons = Array.from(main.querySelectorAll('[data-testid=stAlert], [data-testid=stCaption]')).filter(shown)
    .map(e => e.innerText.trim()).filter(Boolean);
  const takeaways = Array.from(main.querySelectorAll('[class*="st-key-stage_takeaway"]')).filter(shown).length;
  return {problems, drawn, reasons, takeaways,
          exception: main.querySelectorAll('[data-testid=stException]').length};
}"""


@dataclass
class State:
    path: str
    action: tuple = ()  # (kind, key, index, label) of the one control changed from the default; () the default
    scene: int | None = None

    @property
    def name(self) -> str:
        where = "talk" if self.scene is not None else (self.path or "overview")
        if self.scene is not None:
            return f"{where} scene {self.scene}"
        return f"{where} default" if not self.action else f"{where} {self.action[1]}={self.action[3]}"


@dataclass
class Outcome:
    """What the check found: the states checked (each at every height), the problems, the time it took."""
    heights: tuple
    states: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    seconds: float = 0.0


def states_of(path: str, controls: list[dict], menus: dict[str, list[str]]) -> list[State]:
    """Each control's states other than the default it shows now, one at a time."""
    found = [State(path)]
    if path in NO_CHART:
        return found
    for c in controls:
        if c["kind"] == "toggle":
            found.append(State(path, ("toggle", c["key"], 0, "flipped")))
            continue
        labels = menus.get(c["key"], []) if c["kind"] == "menu" else c["labels"]
        if c["kind"] == "menu" and c.get("current") in labels:  # the entry shown is the default
            c = {**c, "chosen": labels.index(c["current"])}
        picks = range(len(labels))
        if len(labels) > WHOLE_MENU:
            picks = sorted({0, len(labels) // 2, len(labels) - 1})
        found += [State(path, (c["kind"], c["key"], i, labels[i])) for i in picks if i != c["chosen"]]
    return found


def stage_address(server: str, state: State) -> str:
    if state.scene is not None:
        return f"{server}/talk?present=1&scene={state.scene}"
    return f"{server}/{state.path}?present=1"


async def runs_started(page) -> int:
    return await page.evaluate("window.__pinpointRuns || 0")


async def settle(page, before: int | None = None) -> None:
    """After a load (``before`` None) or an action: its run started and ended, then every chart drawn and still."""
    if before is not None:
        try:
            await page.wait_for_function("(n) => (window.__pinpointRuns || 0) > n", arg=before,
                                         timeout=5_000 if before else 90_000, polling=50)
        except Exception:  # noqa: BLE001  (a change drawn in the browser alone starts no run)
            pass
    await page.wait_for_selector("h1", timeout=90_000)
    await page.wait_for_selector("[data-test-script-state='notRunning']", timeout=90_000)
    try:
        await page.evaluate("delete window.__pinpointChartsSeen")
        await page.wait_for_function(CHARTS_STEADY, arg=STEADY_MS, polling=50, timeout=30_000)
    except Exception:  # noqa: BLE001  (a chart not drawn is reported by the checks)
        pass


async def open_more_settings(page) -> None:
    box = page.locator("[data-testid=stExpander] details:not([open]) summary").filter(has_text="More settings")
    if await box.count():
        await box.first.click()


async def close_more_settings(page) -> None:
    box = page.locator("[data-testid=stExpander] details[open] summary").filter(has_text="More settings")
    if await box.count():
        await box.first.click()
        await page.wait_for_function("() => !Array.from(document.querySelectorAll('details[open] summary'))"
                                     ".some(s => /More settings/.test(s.innerText))", timeout=10_000)


async def open_menu(page, key: str) -> None:
    """The menu ``key`` open, its entries listed (a click while its box still unfolds only focuses it: then the
    arrow key opens it)."""
    await page.locator(f".st-key-{key} .react-aria-ComboBox [role=group]").click()
    options = page.locator("[role=option]")
    try:
        await options.first.wait_for(timeout=3_000)
    except Exception:  # noqa: BLE001
        await page.locator(f".st-key-{key} input").press("ArrowDown")
        await options.first.wait_for(timeout=10_000)


async def menu_entries(page, key: str) -> list[str]:
    """The entries of the menu ``key``, read by opening it (and closed again with Escape)."""
    await open_more_settings(page)
    await open_menu(page, key)
    options = page.locator("[role=option]")
    labels = [t.strip() for t in await options.all_inner_texts()]
    await page.keyboard.press("Escape")
    await close_more_settings(page)
    return labels


async def apply(page, state: State) -> None:
    kind, key, index, _ = state.action
    before = await runs_started(page)
    if kind == "tab":
        tabs = page.locator("[data-testid=stMain] [role=tab]")
        await tabs.nth(index).click()
        await page.wait_for_function("(n) => document.querySelectorAll('[data-testid=stMain] [role=tab]')[n]"
                                     ".getAttribute('aria-selected') === 'true'", arg=index, timeout=30_000)
    else:
        await open_more_settings(page)
        where = page.locator(f".st-key-{key}")
        if kind == "toggle":
            await where.locator("label").first.click()
        elif kind == "radio":
            await where.locator("[role=radiogroup] label").nth(index).click()
        else:  # typed, so a long menu (which draws only the entries in view) shows the one wanted
            await open_menu(page, key)
            await where.locator("input").fill(state.action[3])
            try:
                await page.get_by_role("option", name=state.action[3], exact=True).first.click(timeout=5_000)
            except Exception:  # noqa: BLE001  (the list filtered to that entry: the keys pick it)
                await where.locator("input").press("ArrowDown")
                await where.locator("input").press("Enter")
    await settle(page, before)
    await close_more_settings(page)
    await settle(page)


async def check(page, state: State, height: int, shots: bool) -> list[str]:
    charted = state.scene is not None or state.path not in NO_CHART
    seen = await page.evaluate(CHECKS, MIN_TEXT_PX)
    if charted and not seen["drawn"] and not seen["reasons"]:
        # a page may run once more after its first run (its address written back): wait for what it draws then
        try:
            await page.wait_for_selector(".js-plotly-plot .main-svg >> visible=true", timeout=20_000)
        except Exception:  # noqa: BLE001  (reported below)
            pass
        await settle(page)
        seen = await page.evaluate(CHECKS, MIN_TEXT_PX)
    problems = list(seen["problems"])
    if seen["exception"]:
        problems.append("an exception is shown")
    if charted:
        if not seen["drawn"]:
            lines = [r for r in seen["reasons"] if "\n" not in r]
            if not lines:
                problems.append(f"no chart and no one-line reason (shown: {seen['reasons'][:2]})")
        elif seen["takeaways"] != 1:
            problems.append(f"{seen['takeaways']} takeaways")
    if shots:
        safe = "".join(ch if ch.isalnum() or ch in "-_=" else "-" for ch in state.name)
        await page.screenshot(path=str(SHOTS / f"states-{height}-{safe}.png"))
    return [f"{state.name} at 1920×{height}: {p}" for p in problems]


async def discover(page, server: str, path: str) -> list[State]:
    await page.goto(stage_address(server, State(path)))
    await settle(page, before=0)
    if path in NO_CHART:
        return states_of(path, [], {})
    # the page drawn to its end (a takeaway, or the line saying why not) before its controls are read
    await page.wait_for_selector("[class*='st-key-stage_takeaway'], [data-testid=stAlert] >> visible=true",
                                 timeout=60_000)
    await settle(page)
    controls = await page.evaluate(CONTROLS)
    menus = {c["key"]: await menu_entries(page, c["key"]) for c in controls if c["kind"] == "menu"}
    return states_of(path, controls, menus)


async def at_height(page, height: int) -> None:
    """The same state in a window ``height`` px high: the page lays itself out again (no script run)."""
    if page.viewport_size["height"] != height:
        await page.set_viewport_size({"width": WIDTH, "height": height})
        await settle(page)


async def worker(context, queue: asyncio.Queue, outcome: Outcome, server: str, shots: bool) -> None:
    """One browser tab taking jobs until the queue is cancelled: a page's states to read, or a state to check at every
    height (loaded and set once, then the window resized)."""
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    while True:
        job, what = await queue.get()
        name = what if job == "discover" else what.name
        try:
            if job == "discover":
                await at_height(page, outcome.heights[0])
                for state in await discover(page, server, what):
                    queue.put_nowait(("check", state))
            else:
                outcome.states.append(what)
                await at_height(page, outcome.heights[0])
                await page.goto(stage_address(server, what))
                await settle(page, before=0)
                if what.action:
                    await apply(page, what)
                for height in outcome.heights:
                    await at_height(page, height)
                    outcome.problems += await check(page, what, height, shots)
        except Exception as exc:  # noqa: BLE001  (one state's failure is reported, the rest go on)
            outcome.problems.append(f"{name or 'overview'}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
        outcome.problems += [f"{name or 'overview'}: page error {e}" for e in errors]
        errors.clear()
        queue.task_done()


async def check_all(server: str, heights: tuple[int, ...], tabs: int, shots: bool) -> Outcome:
    from playwright.async_api import async_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    outcome, started = Outcome(heights), time.monotonic()
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        context = await browser.new_context(viewport={"width": WIDTH, "height": heights[0]})
        await context.add_init_script(RUN_COUNTER)
        queue: asyncio.Queue = asyncio.Queue()
        for entry in PAGES:
            if entry.url_path != "talk":
                queue.put_nowait(("discover", entry.url_path))
        for scene in range(1, TALK_SCENES + 1):
            queue.put_nowait(("check", State("talk", scene=scene)))
        workers = [asyncio.create_task(worker(context, queue, outcome, server, shots)) for _ in range(tabs)]
        await queue.join()
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        await browser.close()
    outcome.seconds = time.monotonic() - started
    return outcome


def run(server: str, heights=(1080, 960), tabs: int = 3, shots: bool = True) -> Outcome:
    """``check_all`` on a thread of its own (Playwright's sync API may already hold this one's event loop)."""
    result: list = []
    failure: list = []

    def body():
        try:
            result.append(asyncio.run(check_all(server, tuple(heights), tabs, shots)))
        except BaseException as exc:  # noqa: BLE001  (raised again on the caller's thread)
            failure.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


if __name__ == "__main__":
    import sys

    found = run(sys.argv[1], tabs=int(sys.argv[2]) if len(sys.argv) > 2 else 3)
    print(f"{len(found.states)} states, each at 1920×{' and 1920×'.join(map(str, found.heights))}, "
          f"in {found.seconds:.0f} s")
    for state in found.states:
        print("  ", state.name)
    for problem in found.problems:
        print("   !", problem)
