"""Server CPU per page view (prints, does not assert; targets: ≤ 0.5 s per page view, ≤ 1 s for Compare).

Starts the app as ``make app`` does (``streamlit run serve.py``; ``app.py`` in a checkout without serve.py) in
replay mode (with a throwaway runs store), opens each page in headless Debian Chromium (Playwright) at 1920×1080,
waits until the script has finished and its charts are drawn, and reads the server process's CPU time (user +
system, from /proc/<pid>/stat) before and after. Each page is visited twice, each time in a new browser tab (a new
Streamlit session, as a second reviewer opening the same link): the first view after the server starts, and a
repeat view. Wall time is until the page's script is done and its charts drawn.

Run: ``python3 tests/benchmarks/page_cpu.py [--pages transfers,compare] [--present] [--root OTHER_CHECKOUT]`` (Linux,
/usr/bin/chromium). CPU time grows when other processes compete for the cores: compare checkouts in turns.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
PAGES = ["", "transfers", "coalescing", "reductions", "occupancy", "streams", "roofline", "memory-modes", "runs",
         "compare", "talk"]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (fields 14 and 15 of /proc/<pid>/stat, after the name)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


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


def settled_cpu(pid: int, quiet_s: float = 0.6, limit_s: float = 30) -> float:
    """The server's CPU time once it has stopped rising for ``quiet_s`` (the rerun and its messages are done)."""
    last, since, deadline = cpu_seconds(pid), time.monotonic(), time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = cpu_seconds(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return last


def view(browser, url: str, pid: int) -> tuple[float, float]:
    """(server CPU s, wall s) for one page view in a new tab."""
    tab = browser.new_page(viewport={"width": 1920, "height": 1080})
    before = settled_cpu(pid)
    start = time.monotonic()
    tab.goto(url)
    tab.wait_for_selector("[data-testid='stApp']", timeout=120_000)
    # The script state reads "notRunning" before the first run starts too: wait until the page's title is drawn
    # (every page has one) and the script is done.
    tab.wait_for_function("""() => { const s = document.querySelector('[data-test-script-state]');
        return s && s.getAttribute('data-test-script-state') === 'notRunning'
            && document.querySelector('[data-testid="stMain"] h1') !== null; }""", timeout=120_000, polling=50)
    if tab.locator(".js-plotly-plot").count():
        tab.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
    wall = time.monotonic() - start
    used = settled_cpu(pid) - before
    tab.close()
    return used, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", default=",".join(PAGES), help="comma-separated url paths ('' is Overview)")
    parser.add_argument("--present", action="store_true", help="open every page with ?present=1")
    parser.add_argument("--repeats", type=int, default=2, help="views per page (the first is the first view)")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the checkout to serve (e.g. an older commit unpacked with git archive, to compare)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(port, f"{folder}/runs.sqlite", args.root)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--no-first-run"])
                print(f"server CPU per page view (s), streamlit run {script(args.root)}, replay, "
                      f"{os.cpu_count()} CPUs; wall s until drawn in brackets")
                print(f"{'page':<14}" + "".join(f"{'view ' + str(i + 1):>18}" for i in range(args.repeats)))
                for path in args.pages.split(","):
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
