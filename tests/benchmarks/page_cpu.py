"""Server CPU per page view (prints, does not assert; target: ≤ 0.4 s per full browser load of any page).

Starts the app as ``make app`` does (``streamlit run serve.py``; ``app.py`` in a checkout without serve.py) in
replay mode (with a throwaway runs store), opens each page in headless Debian Chromium (Playwright) at 1920×1080,
waits until the script has finished and its charts are drawn, and reads the server process's CPU time (user +
system, from /proc/<pid>/stat) before and after. Each page is visited twice, each time in a new browser tab (a new
Streamlit session, as a second reviewer opening the same link): the first view after the server starts, and a
repeat view. Wall time is until the page's script is done and its charts drawn.

With ``--sessions N``, each view is instead a full browser load as a new visitor's: every page of
pages/_shared.PAGES is visited once (a warm-up, not counted) and then N times, each time in a fresh browser context
(no cookies, an empty HTTP cache: every frontend file is fetched again, and a new websocket and Streamlit session).
The CPU time counted is the server's and its children's (utime + stime of the server and of every process under it,
and cutime + cstime of the children it has reaped), from just before the navigation until the script has finished,
the charts are drawn and the server's CPU time has stopped rising (trailing websocket work is counted). It prints
the median and max per page, the script runs each load started and the megabytes its websocket carried, the
machine's load beside them, and whether every page is within the target.

Run: ``python3 tests/benchmarks/page_cpu.py [--sessions 5] [--pages transfers,compare] [--present]
[--root OTHER_CHECKOUT]`` (Linux, /usr/bin/chromium). CPU time grows when other processes compete for the cores:
compare checkouts in turns.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CHROMIUM = "/usr/bin/chromium"
PAGES = ["", "transfers", "coalescing", "reductions", "occupancy", "streams", "roofline", "memory-modes", "runs",
         "compare", "talk"]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
TARGET_S = 0.4  # server CPU per full browser load of any page
BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
VIEWPORT = {"width": 1920, "height": 1080}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (fields 14 and 15 of /proc/<pid>/stat, after the name)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the process's name (field 3 onwards)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def descendants(pid: int) -> list[int]:
    """Every live process under ``pid`` (children of each of its threads, recursively)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(child) for child in (task / "children").read_text().split()]
            except OSError:  # the thread ended meanwhile
                continue
            found += children
            todo += children
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and everything under it so far: utime + stime of each live process, and cutime +
    cstime (fields 14–17) of the children each has reaped."""
    total = 0
    for process in [pid, *descendants(pid)]:
        try:
            fields = stat_fields(process)
        except OSError:  # ended between the listing and the read: its time is in its parent's cutime/cstime
            continue
        total += sum(int(value) for value in fields[11:15])
    return total / CLOCK_TICKS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def script(root: Path) -> str:
    """What ``make app`` runs in that checkout."""
    return "serve.py" if (root / "serve.py").is_file() else "app.py"


def start_server(port: int, store: str, root: Path = ROOT) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", script(root), "--server.headless", "true", "--server.port",
         str(port), "--server.address", "127.0.0.1", "--server.fileWatcherType", "none",
         "--browser.gatherUsageStats", "false"],
        cwd=root, env={**os.environ, "PINPOINT_BACKEND": "replay", "PINPOINT_DB_URL": f"sqlite:///{store}"},
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                return process
        except OSError:
            time.sleep(0.3)
    process.kill()
    sys.exit("streamlit did not become healthy")


def settled_cpu(pid: int, quiet_s: float = 0.6, limit_s: float = 30, read=cpu_seconds) -> float:
    """The server's CPU time once it has stopped rising for ``quiet_s`` (the rerun and its messages are done)."""
    last, since, deadline = read(pid), time.monotonic(), time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = read(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return last


def wait_until_drawn(tab) -> None:
    """Until the page's script is done and its charts are drawn."""
    tab.wait_for_selector("[data-testid='stApp']", timeout=120_000)
    # The script state reads "notRunning" before the first run starts too: wait until the page's title is drawn
    # (every page has one) and the script is done.
    tab.wait_for_function("""() => { const s = document.querySelector('[data-test-script-state]');
        return s && s.getAttribute('data-test-script-state') === 'notRunning'
            && document.querySelector('[data-testid="stMain"] h1') !== null; }""", timeout=120_000, polling=50)
    if tab.locator(".js-plotly-plot").count():
        tab.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)


def view(browser, url: str, pid: int) -> tuple[float, float]:
    """(server CPU s, wall s) for one page view in a new tab."""
    tab = browser.new_page(viewport=VIEWPORT)
    before = settled_cpu(pid)
    start = time.monotonic()
    tab.goto(url)
    wait_until_drawn(tab)
    wall = time.monotonic() - start
    used = settled_cpu(pid) - before
    tab.close()
    return used, wall


def full_load(browser, url: str, pid: int):
    """(CPU s of the server and its children, wall s, what the websocket carried: a browser_helper.Socket) for one
    full browser load of ``url`` in a fresh browser context: a new visitor's first load, with an empty cache, a new
    websocket and a new Streamlit session. The wall time is until the script is done and every chart drawn and
    steady; the CPU time also counts what the server does after that (the session's last messages, its garbage
    collection) until its CPU time stops rising. The context is closed (its websocket with it) after the reading:
    closing a session is not a page view."""
    from tests.browser_helper import Socket, wait_for_charts

    context = browser.new_context(viewport=VIEWPORT)
    tab = context.new_page()
    socket = Socket(tab)
    before = settled_cpu(pid, read=tree_cpu_seconds)
    start = time.monotonic()
    tab.goto(url)
    wait_until_drawn(tab)
    wait_for_charts(tab)
    wall = time.monotonic() - start
    used = settled_cpu(pid, read=tree_cpu_seconds) - before
    context.close()
    return used, wall, socket


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def full_loads(browser, port: int, pid: int, paths: list[str], sessions: int, present: bool, root: Path) -> None:
    """Per page: a warm-up load, then ``sessions`` full loads each in a fresh context; median and max CPU s."""
    print(f"server CPU per full browser load (s; the server and its children), streamlit run {script(root)}, "
          f"replay, 1920×1080, {os.cpu_count()} CPUs; a warm-up load per page, then {sessions} loads each in a "
          f"fresh browser context; target ≤ {TARGET_S} s")
    print(f"{'page':<14}{'median':>8}{'max':>8}{'runs':>6}{'MB':>6}   {'each load (wall s until drawn)':<40} "
          "load average")
    worst = 0.0
    for path in paths:
        url = f"http://127.0.0.1:{port}/{path}" + ("?present=1" if present else "")
        full_load(browser, url, pid)
        figures = [full_load(browser, url, pid) for _ in range(sessions)]
        cpu = [used for used, _, _ in figures]
        worst = max(worst, max(cpu))
        each = " ".join(f"{used:.2f}({wall:.1f})" for used, wall, _ in figures)
        runs = "/".join(sorted({str(socket.runs) for _, _, socket in figures}))  # script runs per load
        sent = statistics.median(socket.bytes for _, _, socket in figures) / 1e6
        print(f"{path or 'overview':<14}{statistics.median(cpu):>8.2f}{max(cpu):>8.2f}{runs:>6}{sent:>6.2f}   "
              f"{each:<40} {load_average()}", flush=True)
    print(f"every page ≤ {TARGET_S} s: {'yes' if worst <= TARGET_S else 'NO'} (the most: {worst:.2f} s); "
          f"load average now {load_average()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", default=None,
                        help="comma-separated url paths ('' is Overview); every page of pages/_shared.PAGES with "
                             "--sessions, else " + ",".join(PAGES))
    parser.add_argument("--present", action="store_true", help="open every page with ?present=1")
    parser.add_argument("--repeats", type=int, default=2, help="views per page (the first is the first view)")
    parser.add_argument("--sessions", type=int, default=0,
                        help="full browser loads per page, each in a fresh browser context after a warm-up load")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the checkout to serve (e.g. an older commit unpacked with git archive, to compare)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from pages._shared import PAGES as ENTRIES
    paths = (args.pages.split(",") if args.pages is not None
             else [entry.url_path for entry in ENTRIES] if args.sessions else PAGES)

    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(port, f"{folder}/runs.sqlite", args.root)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_FLAGS)
                # What serve.py does for the first visitors at start-up (each page's first view) is not a view.
                settled_cpu(server.pid, quiet_s=2, limit_s=120, read=tree_cpu_seconds)
                if args.sessions:
                    full_loads(browser, port, server.pid, paths, args.sessions, args.present, args.root)
                    browser.close()
                    return
                print(f"server CPU per page view (s), streamlit run {script(args.root)}, replay, "
                      f"{os.cpu_count()} CPUs; wall s until drawn in brackets")
                print(f"{'page':<14}" + "".join(f"{'view ' + str(i + 1):>18}" for i in range(args.repeats)))
                for path in paths:
                    url = f"http://127.0.0.1:{port}/{path}" + ("?present=1" if args.present else "")
                    figures = [view(browser, url, server.pid) for _ in range(args.repeats)]
                    print(f"{path or 'overview':<14}" + "".join(f"{cpu:>10.2f} ({wall:4.1f})" for cpu, wall in figures),
                          flush=True)
                browser.close()
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
