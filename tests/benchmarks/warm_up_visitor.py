"""A visitor during the server's warm-up (prints, does not assert): how long a page's first view takes when it is
opened the moment the server answers, while serve.py makes every page's first view in the background.

Starts ``streamlit run serve.py`` in replay mode (a throwaway runs store), polls /_stcore/health, and as soon as it
answers opens a page over Streamlit's websocket as a browser does (its address, no query) and times it until the
script has finished. Then it waits for the warm-up's log line ("first visit: … pages in …") and opens the same page
again, as a visitor of the warmed-up server. It prints both times, the server's CPU time when it first answered and
when the warm-up was over (from /proc), and the warm-up's line. ``--root OTHER_CHECKOUT`` runs the same for another
checkout, in turns: the 2-core machines are shared, so compare runs made together.

Run: ``python3 tests/benchmarks/warm_up_visitor.py [--page transfers] [--repeat 2] [--root /path/to/main]`` (Linux)
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as answer:
            return answer.read() == b"ok"
    except OSError:
        return False


def page_view(port: int, url_path: str) -> float:
    """Seconds from opening Streamlit's websocket to the page script's end, as a browser opening the address."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ClientState_pb2 import ClientState
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect

    started = time.perf_counter()
    with connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"], open_timeout=30) as ws:
        ws.send(BackMsg(rerun_script=ClientState(page_name=url_path)).SerializeToString())
        while True:
            msg = ForwardMsg()
            msg.ParseFromString(ws.recv(timeout=120))
            if msg.WhichOneof("type") == "script_finished" and msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                return time.perf_counter() - started  # not a run that ended early for another (the page's own)


def one_start(root: Path, page: str) -> dict:
    port = free_port()
    with tempfile.TemporaryDirectory() as home:
        env = {key: value for key, value in os.environ.items() if not key.startswith(("PINPOINT_", "STREAMLIT_"))}
        env.update(HOME=home, XDG_DATA_HOME=f"{home}/data", PINPOINT_BACKEND="replay", PYTHONPATH=str(root),
                   PINPOINT_DB_URL=f"sqlite:///{home}/runs.sqlite")
        log = Path(home) / "server.log"
        with log.open("w") as out:
            server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless",
                                       "true", "--server.port", str(port), "--server.fileWatcherType", "none"],
                                      cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            started = time.monotonic()
            while not healthy(port):
                if server.poll() is not None or time.monotonic() - started > 180:
                    raise SystemExit(f"{root}: the server did not answer:\n{log.read_text()}")
                time.sleep(0.05)
            answered_s, answered_cpu = time.monotonic() - started, cpu_s(server.pid)
            during = page_view(port, page)
            while not (line := re.search(r"first visit: .*", log.read_text())):
                if server.poll() is not None or time.monotonic() - started > 300:
                    raise SystemExit(f"{root}: no warm-up line:\n{log.read_text()}")
                time.sleep(0.2)
            warm_cpu = cpu_s(server.pid)
            after = page_view(port, page)
        finally:
            server.terminate()
            server.wait(timeout=30)
    return {"answered_s": answered_s, "answered_cpu": answered_cpu, "during": during, "after": after,
            "warm_cpu": warm_cpu, "line": line.group(0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--page", default="transfers")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--root", type=Path, action="append", default=[])
    args = parser.parse_args()
    for turn in range(args.repeat):
        for root in [ROOT, *args.root]:
            got = one_start(root, args.page)
            print(f"{root} (start {turn + 1}): answered after {got['answered_s']:.1f} s ({got['answered_cpu']:.1f} s "
                  f"of CPU); /{args.page} opened then: {got['during']:.2f} s; once warm: {got['after']:.2f} s; "
                  f"CPU at the warm-up's end {got['warm_cpu']:.1f} s; load {os.getloadavg()[0]:.1f}\n    {got['line']}",
                  flush=True)


if __name__ == "__main__":
    main()
