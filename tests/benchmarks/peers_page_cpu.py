"""Where the Peers page's own time goes during and after a live Measure, on a machine without a GPU. Prints, never
asserts.

The page runs through AppTest against a stand-in live backend: a real worker process serving
``tests.fake_service:ScheduledPeerService``, which streams the matrix's rows (the bundled 2 × H100 recording's,
re-labelled for the node's pairs) at the times a real run produced them: on 4 × H200, 64 points over about 12 s, the
first at 0.14 s; on 2 GPUs, 16 points over 1.5 s. Measure is pressed with the page's defaults, several times; each
time it prints when the backend ended and the page finished (from the press), when the first partial matrix was
drawn, how often the page looked at the job and how often it drew the partial matrix, and the page script's CPU
seconds: in the partial draws, in the rest of following the job, in keeping the run (cache and runs store) and in
drawing the final page.

``python tests/benchmarks/peers_page_cpu.py [--gpus 2|4|both] [--measures N] [--dump DIR]``, from the project's root;
``--dump`` writes the last Measure's final page (each chart's Plotly JSON, the numbers table) to DIR, to compare two
versions of the page.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# (points, first row, last row) as the real runs streamed them: 4 × H200 and 2 × H200 (tests/benchmarks/
# peers_page_live.py, CLIENT lines)
SCHEDULES = {2: (16, 0.10, 1.5), 4: (64, 0.14, 12.0)}


class Clock:
    """The page script's CPU (its own thread) and the wall clock, by segment, for one Measure."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.preview_cpu, self.previews, self.polls, self.first_preview = 0.0, 0, 0, None
        self.follow_cpu = self.keep_cpu = 0.0
        self.followed_at_cpu = self.final_cpu = None
        self.backend_end = None


def instrument(clock: Clock) -> None:
    """Wrap the measure flow's steps, in this process (AppTest runs the page in it), to time each."""
    from gpu.service.jobs import JobHandle
    from pages._ui import measure

    finish, follow, save_run, download = JobHandle.finish, measure.follow, measure.save_run, None

    def timed_finish(self, state, result=None, error=None):
        if self.kind == "experiment" or clock.backend_end is None:
            clock.backend_end = time.perf_counter()
        return finish(self, state, result, error)

    def timed_follow(handle, preview=None, *args, **kwargs):
        wait = handle.wait

        def counted_wait(timeout=None):
            clock.polls += 1
            return wait(timeout)

        def timed_preview(frame, suffix):
            started = time.thread_time()
            try:
                return preview(frame, suffix)
            finally:
                clock.preview_cpu += time.thread_time() - started
                clock.previews += 1
                if clock.first_preview is None:
                    clock.first_preview = time.perf_counter()

        handle.wait = counted_wait
        started = time.thread_time()
        try:
            return follow(handle, timed_preview if preview is not None else None, *args, **kwargs)
        finally:
            handle.wait = wait
            clock.follow_cpu += time.thread_time() - started
            clock.followed_at_cpu = time.thread_time()

    def timed_save(*args, **kwargs):
        started = time.thread_time()
        try:
            return save_run(*args, **kwargs)
        finally:
            clock.keep_cpu += time.thread_time() - started

    import pages._ui as ui

    download = ui.download

    def timed_download(*args, **kwargs):
        result = download(*args, **kwargs)
        if clock.followed_at_cpu is not None:
            clock.final_cpu = time.thread_time() - clock.followed_at_cpu - clock.keep_cpu
        return result

    JobHandle.finish = timed_finish
    measure.follow, measure.save_run, ui.download = timed_follow, timed_save, timed_download


def run(gpus: int, measures: int, dump: str | None = None) -> list[dict]:
    points, first, last = SCHEDULES[gpus]
    os.environ.update({"PINPOINT_BACKEND": "auto", "PINPOINT_WORKER_SERVICE": "tests.fake_service:ScheduledPeerService",
                       "PINPOINT_FAKE_GPUS": str(gpus), "PINPOINT_FAKE_FIRST_S": str(first),
                       "PINPOINT_FAKE_LAST_S": str(last), "PINPOINT_FAKE_TIMESTAMP": "2026-11-28T12:00:00"})
    os.environ.pop("PINPOINT_DEVICE", None)
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_resource.clear()
    st.cache_data.clear()
    clock = Clock()
    instrument(clock)
    opened = time.perf_counter()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    at.switch_page("pages/peers.py").run()
    print(f"{gpus} GPUs ({points} points, first row at {first:.2f} s, last at {last:.1f} s): page opened live in "
          f"{time.perf_counter() - opened:.1f} s", flush=True)
    figures = []
    for attempt in range(1, measures + 1):
        clock.reset()
        # a fresh run each time: points kept from the last Measure would be reused, not measured
        at.session_state["reuse_points"] = False
        pressed, cpu = time.perf_counter(), time.process_time()
        at.button(key="peers_measure").click().run()
        done, cpu = time.perf_counter() - pressed, time.process_time() - cpu
        problems = [e.value for e in at.error] + [str(e.value) for e in at.exception]
        rows = len(at.dataframe[-1].value) if at.dataframe else 0
        figure = {"attempt": attempt, "backend_end": (clock.backend_end or pressed) - pressed, "page_done": done,
                  "first_preview": None if clock.first_preview is None else clock.first_preview - pressed,
                  "previews": clock.previews, "polls": clock.polls, "preview_cpu": clock.preview_cpu,
                  "follow_cpu": clock.follow_cpu - clock.preview_cpu, "keep_cpu": clock.keep_cpu,
                  "final_cpu": clock.final_cpu or 0.0, "process_cpu": cpu, "rows": rows}
        figures.append(figure)
        first_drawn = f"{figure['first_preview']:.2f} s" if figure["first_preview"] is not None else "none"
        print(f"  Measure {attempt}: backend ended {figure['backend_end']:.2f} s, page done {done:.2f} s "
              f"(+{done - figure['backend_end']:.2f} s); first partial matrix {first_drawn}; "
              f"{figure['previews']} partial draws in {figure['polls']} polls; page CPU: partial draws "
              f"{figure['preview_cpu']:.2f} s, other following {figure['follow_cpu']:.2f} s, keeping the run "
              f"{figure['keep_cpu']:.2f} s, final page {figure['final_cpu']:.2f} s; process CPU {cpu:.2f} s; "
              f"{rows} rows" + ("; " + " | ".join(problems) if problems else ""), flush=True)
    if dump:
        folder = Path(dump) / f"{gpus}gpus"
        folder.mkdir(parents=True, exist_ok=True)
        for i, chart in enumerate(at.get("plotly_chart")):
            (folder / f"chart{i}.json").write_text(chart.proto.spec)
        at.dataframe[-1].value.to_csv(folder / "numbers.csv", index=False)
    later = figures[1:] or figures  # the first Measure also warms caches and imports
    print(f"  median of Measures {later[0]['attempt']}–{later[-1]['attempt']}: page done "
          f"{statistics.median(f['page_done'] for f in later):.2f} s, after the backend "
          f"{statistics.median(f['page_done'] - f['backend_end'] for f in later):.2f} s, partial draws "
          f"{statistics.median(f['previews'] for f in later):.0f}, CPU partial draws "
          f"{statistics.median(f['preview_cpu'] for f in later):.2f} s, final page "
          f"{statistics.median(f['final_cpu'] for f in later):.2f} s", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", choices=["2", "4", "both"], default="both")
    parser.add_argument("--measures", type=int, default=3)
    parser.add_argument("--dump", help="a folder for the last Measure's final page")
    args = parser.parse_args()
    os.environ.setdefault("PINPOINT_DB_URL", f"sqlite:///{tempfile.mkdtemp()}/runs.sqlite")
    os.chdir(ROOT)
    if args.gpus != "both":
        run(int(args.gpus), args.measures, args.dump)
        return
    import subprocess

    for gpus in (2, 4):  # each node in a process of its own: its own worker and caches
        subprocess.run([sys.executable, __file__, "--gpus", str(gpus), "--measures", str(args.measures)]
                       + (["--dump", args.dump] if args.dump else []), check=True)


if __name__ == "__main__":
    main()
