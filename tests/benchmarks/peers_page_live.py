"""How long the Peers page's live Measure takes with its defaults (the matrix at 256 MiB), on a machine of two or more
GPUs, beside the estimate the page shows before it starts. Prints, never asserts.

1. From a client, as the page asks (every GPU of the machine, the declaration's defaults, interactive profile): when
   the first row reached the client (the page draws it at its next poll, 0.1 s later) and the whole answer, twice
   (the first on a fresh worker); with ``--full``, the full sweep too.
2. The page itself through AppTest, live: the page opened (its worker started), then Measure pressed: when the page
   first drew a partial matrix (its preview) and when the run ended, twice.

Targets (issue: the Peers page answers first): the first cell within 1 s, the matrix within 6 s on 2 GPUs and 15 s on
4. Run on the GPU machine, from the project's root: ``python3 tests/benchmarks/peers_page_live.py [--full]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

TARGET_FIRST_S = 1.0
TARGET_TOTAL_S = {2: 6.0, 4: 15.0}


def page_request(full: bool = False) -> dict:
    """The page's request (pages/peers.py ``peer_request``): the declared defaults, or with the full sweep."""
    from gpu.experiments import peers, registry

    request = {axis.name: axis.default for axis in registry.BY_NAME[peers.NAME].arguments}
    return {**request, **peers.FULL_SWEEP} if full else request


def estimate_line(gpus: int, full: bool) -> str:
    from gpu.experiments import peers
    from gpu.experiments.peers import cost as peer_cost
    from gpu.service.backends import ReplayBackend

    recorded = peer_cost.pricing_run(ReplayBackend().data)
    params = peers.with_devices(peers.parse_params(
        {k: v for k, v in page_request(full).items() if k != "profile"}), list(range(gpus)))
    return peer_cost.sentence(peer_cost.estimate(params, recorded))


def timed(backend, request: dict) -> tuple[object, float, float]:
    """(frame, seconds to the first streamed row, seconds to the whole answer)."""
    from gpu.service.backends import submit_values

    started = time.perf_counter()
    handle = submit_values(backend, "peers", {**request, "profile": "interactive"})
    first = None
    while not handle.wait(0.005):
        if first is None and handle.rows:
            first = time.perf_counter() - started
    total = time.perf_counter() - started
    frame = handle.outcome()
    return frame, (first if first is not None else total), total


def from_client(count: int, full: bool) -> None:
    from gpu.service.backends import LiveBackend
    from gpu.service.client import WorkerClient

    started = time.perf_counter()
    client = WorkerClient(service_options={"devices": list(range(count))})
    backend = LiveBackend(client)
    print(f"CLIENT worker for {count} GPUs ready in {time.perf_counter() - started:.1f} s", flush=True)
    target = TARGET_TOTAL_S.get(count)
    try:
        runs = [("matrix (fresh worker)", False), ("matrix (warm)", False)] + ([("full sweep", True)] if full else [])
        for name, whole in runs:
            frame, first, total = timed(backend, page_request(whole))
            latency = frame[frame["variant"] == "latency"]
            ns = ", ".join(f"{int(r.gpu_index)}→{int(r.peer_index)} {r.median_ms * 1e6:,.1f} ns"
                           for r in latency.itertuples())
            goal = f" (targets: first <= {TARGET_FIRST_S:.0f} s, whole <= {target:.0f} s)" if not whole and target \
                else ""
            print(f"CLIENT {name}: {len(frame)} points, first row {first:.2f} s, whole {total:.2f} s{goal}; "
                  f"estimate shown: {estimate_line(count, whole)}; latency {ns}; device "
                  f"{frame['device_name'].iloc[0]}", flush=True)
    finally:
        client.close()


def on_the_page() -> None:
    """The Peers page live through AppTest, Measure pressed twice with its defaults."""
    from streamlit.testing.v1 import AppTest

    from gpu.experiments.peers import view as charts

    drawn: list[tuple[float, int]] = []  # (when, rows) of each live matrix drawn
    original = charts.matrix_figure

    def recording_matrix(frame, view, *args, **kwargs):
        if "backend" in frame and (frame["backend"] == "live").all():  # the page's preview of a running job
            drawn.append((time.perf_counter(), len(frame)))
        return original(frame, view, *args, **kwargs)

    charts.matrix_figure = recording_matrix
    started = time.perf_counter()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    at.switch_page("pages/peers.py").run()
    opened = time.perf_counter() - started
    said = [c.value.replace("\\", "") for c in at.caption if "an estimate" in c.value]
    print(f"PAGE opened live in {opened:.1f} s (its worker started); estimate shown: {said[0] if said else '—'}",
          flush=True)
    for attempt in ("first Measure", "second Measure"):
        drawn.clear()
        pressed = time.perf_counter()
        at.button(key="peers_measure").click().run()
        total = time.perf_counter() - pressed
        problems = [e.value for e in at.error] + [str(e.value) for e in at.exception]
        rows = len(at.dataframe[-1].value) if at.dataframe else 0
        partial = [when for when, n in drawn if n < rows]
        if partial:
            first = f"{partial[0] - pressed:.2f} s"
        else:
            first = f"none (the whole matrix came before the first poll; drawn {drawn[0][0] - pressed:.2f} s)" \
                if drawn else "none"
        note = "; " + " | ".join(problems) if problems else ""
        print(f"PAGE {attempt}: first partial matrix drawn {first}, page done {total:.2f} s, {rows} rows in the "
              f"numbers table, {len(partial)} partial draws{note}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--full", action="store_true", help="also time the full sweep from the client")
    parser.add_argument("--no-page", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("PINPOINT_DB_URL", f"sqlite:///{tempfile.mkdtemp()}/runs.sqlite")
    import subprocess

    count = int(subprocess.run([sys.executable, "-c", "import pycuda.driver as d; d.init(); print(d.Device.count())"],
                               capture_output=True, text=True).stdout.strip() or 0)
    if count < 2:
        sys.exit(f"the Peers page measures between GPUs; this machine has {count}")
    from_client(count, args.full)
    if not args.no_page:
        on_the_page()


if __name__ == "__main__":
    main()
