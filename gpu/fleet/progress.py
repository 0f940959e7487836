"""What a fleet shows on the terminal: a line per event and a bar of runs done while it runs, a table at the end."""

from __future__ import annotations

import sys

from gpu.core import text
from gpu.core.devices import uuid_tail
from gpu.fleet.types import FleetGpu, FleetNode, FleetResult


class Progress:
    """The terminal view: a line per event (a GPU found, a run stored, a failure) and a bar of runs done with the
    state of each GPU (counted by state beyond ``PER_GPU_UP_TO`` GPUs). On a terminal the bar redraws in place;
    elsewhere (CI logs) it is printed when it changes."""

    PER_GPU_UP_TO = 8

    def __init__(self, stream=sys.stderr, width: int = 30):
        self.stream, self.width = stream, width
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self._last = ""

    def event(self, line: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text.printable(line) + "\n")
        self.stream.flush()
        self._last = "" if self.tty else self._last

    def bar(self, gpus: list[FleetGpu], total: int, nodes: list[FleetNode] = ()) -> None:
        finished = sum(len(g.done) + len(g.failed) + len(g.skipped) for g in gpus) + \
            sum(len(n.done) + len(n.failed) + len(n.skipped) + len(n.no_peer) for n in nodes)
        filled = int(self.width * finished / total) if total else self.width
        if len(gpus) <= self.PER_GPU_UP_TO:
            states = " · ".join(f"GPU {i} {g.state}" for i, g in enumerate(gpus))
        else:
            counts: dict[str, int] = {}
            for gpu in gpus:
                key = "measuring" if gpu.state.startswith("measuring") else gpu.state
                counts[key] = counts.get(key, 0) + 1
            states = " · ".join(f"{count} {state}" for state, count in sorted(counts.items()))
        states += "".join(f" · {n.host} {n.state}" for n in nodes if n.current is not None)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {finished}/{total} runs · {states}"
        if line == self._last:
            return
        self._last = line
        self.stream.write(("\r\x1b[2K" + line) if self.tty else line + "\n")
        self.stream.flush()


def summary(result: FleetResult) -> str:
    """The table printed at the end: one line per GPU, then the failures."""
    lines = [f"fleet {result.fleet_id} · suite {result.suite} · {text.count(len(result.gpus), 'GPU')} · "
             f"{result.runs_stored} runs stored ({result.rows_stored} of {result.rows_sent} points sent) in "
             f"{result.wall_s:.1f} s"]
    for index, gpu in enumerate(result.gpus):
        lines.append(f"  GPU {index}  {gpu.host:<16} {gpu.device_name:<24} {uuid_tail(gpu.gpu_uuid):<10} {gpu.state:<8}"
                     f" {len(gpu.done)} measured, {len(gpu.skipped)} already stored, {len(gpu.failed)} failed")
    for node in result.nodes:
        if node.done or node.skipped or node.failed or node.no_peer:
            no_peer = f", no peer for {', '.join(node.no_peer)}" if node.no_peer else ""
            lines.append(f"  node  {node.host:<16} {text.count(len(node.gpus), 'GPU'):<24} {'':<10} {node.state:<8}"
                         f" {len(node.done)} measured, {len(node.skipped)} already stored, {len(node.failed)} failed"
                         f"{no_peer}")
    for line in result.failures:
        lines.append(f"  failed: {line}")
    if result.failures:
        lines.append(f"  measure what is missing with: --fleet-id {result.fleet_id}")
    return "\n".join(text.printable(line) for line in lines)
