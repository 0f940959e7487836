"""Benchmark (prints, does not assert): what the witness costs and whether it sees a foreign process.

On the GPU machine, in one call:
1. pinned 1 GiB H2D and 1 GiB HBM device copies through the runner's worker with the witness on and off
   (``PINPOINT_WITNESS=0``), alternated on, off, on, off: the ratio of medians (target: within 1 %);
2. the witness's own cost per point in this process (``begin`` + ``end`` on the caller's thread) and per reading
   (the thread's), with the real NVML;
3. a foreign CuPy copy loop (``tests/gpu/foreign_copy_loop.py``) on the GPU during a transfers run and a
   device-copy run: points marked with its pid; then the same runs alone: points marked (target 0);
4. which NVML fields answered on this machine, and which did not (with NVML's words).

``python3 tests/benchmarks/witness_bar.py [--device 0] [--profile precise] [--parts fields,foreign,cost]``; the
tables and every run's conditions also go to ``$OUT/witness_bar_<parts>.txt`` and ``.json`` when ``OUT`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpu.core import conditions  # noqa: E402

GiB, MiB = 1 << 30, 1 << 20
LOOP = Path(__file__).resolve().parents[1] / "gpu" / "foreign_copy_loop.py"
LINES: list[str] = []
FOUND: dict = {}


def say(line: str = "") -> None:
    print(line, flush=True)
    LINES.append(line)


def run(experiment: str, params: dict, witness_on: bool = True):
    """One job in a fresh worker (the witness switch is read as its GPU runtime starts): the result frame."""
    from gpu.service.backends import start_live, submit_values

    os.environ["PINPOINT_WITNESS"] = "1" if witness_on else "0"
    backend, reason = start_live()
    if backend is None:
        sys.exit(f"needs a GPU: {reason}")
    try:
        return submit_values(backend, experiment, params).outcome()
    finally:
        backend.client.close()
        os.environ.pop("PINPOINT_WITNESS", None)


def cost(profile: str) -> None:
    h2d = {"sizes": [GiB], "modes": ["pinned"], "directions": ["h2d"], "profile": profile}
    copy = {"sizes": [GiB], "variants": ["copy_engine"], "methods": ["batched"], "profile": profile}
    figures: dict = {(name, on): [] for name in ("h2d", "copy") for on in (True, False)}
    for on in (True, False, True, False):
        figures[("h2d", on)].append(float(run("transfers", h2d, on)["gbps"].iloc[0]))
        figures[("copy", on)].append(float(run("device_copy", copy, on)["gbps"].iloc[0]))
    say("## The witness's cost on the figures (medians of two runs each, alternated on/off)")
    say("| figure | witness on GB/s | witness off GB/s | on / off | within 1 % |")
    say("|---|---|---|---|---|")
    for name, label in (("h2d", "pinned H2D 1 GiB"), ("copy", "HBM device copy 1 GiB")):
        on, off = statistics.median(figures[(name, True)]), statistics.median(figures[(name, False)])
        say(f"| {label} | {on:,.2f} ({', '.join(f'{v:,.2f}' for v in figures[(name, True)])}) | {off:,.2f} "
            f"({', '.join(f'{v:,.2f}' for v in figures[(name, False)])}) | {on / off:.4f} | "
            f"{'yes' if abs(on / off - 1) <= 0.01 else 'NO'} |")
    FOUND["cost"] = {f"{k[0]}_{'on' if k[1] else 'off'}": v for k, v in figures.items()}


def per_point(device: int) -> None:
    import pynvml

    from gpu.device.witness import Witness

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(device)
    witness = Witness(pynvml, handle)
    caller, readings = [], []
    for _ in range(20):
        started = time.perf_counter()
        witness.begin()
        caller.append(time.perf_counter() - started)
        time.sleep(0.2)
        started = time.perf_counter()
        seen = witness.end()
        caller[-1] += time.perf_counter() - started
    for _ in range(50):
        started = time.perf_counter()
        witness.sample()
        readings.append(time.perf_counter() - started)
    witness.close()
    say()
    say("## The witness's own cost (this process, real NVML)")
    say(f"- per point on the measuring thread (begin + end): median {statistics.median(caller) * 1e3:.2f} ms, "
        f"max {max(caller) * 1e3:.2f} ms")
    say(f"- per reading on the witness thread (every 50 ms at most): median {statistics.median(readings) * 1e3:.2f} "
        f"ms, max {max(readings) * 1e3:.2f} ms")
    say(f"- one point's witness: {len(seen['witness'])} characters of JSON, conditions {seen['conditions']!r}")
    say(f"- a point's readings: {seen['witness']}")
    FOUND["per_point_ms"] = statistics.median(caller) * 1e3
    FOUND["per_reading_ms"] = statistics.median(readings) * 1e3


def fields(device: int) -> None:
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(device)
    calls = {
        "compute processes": lambda: len(pynvml.nvmlDeviceGetComputeRunningProcesses(handle)),
        "utilisation (GPU, memory)": lambda: (lambda u: (u.gpu, u.memory))(
            pynvml.nvmlDeviceGetUtilizationRates(handle)),
        "SM clock": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "memory clock": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        "power": lambda: pynvml.nvmlDeviceGetPowerUsage(handle),
        "enforced power limit": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle),
        "temperature": lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
        "clock-event reasons": lambda: hex(pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)),
        "PCIe current gen/width": lambda: (pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle),
                                           pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle)),
        "PCIe max gen/width": lambda: (pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle),
                                       pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle)),
        "PCIe replay counter": lambda: pynvml.nvmlDeviceGetPcieReplayCounter(handle),
        "ECC volatile (corrected, uncorrected)": lambda: tuple(pynvml.nvmlDeviceGetTotalEccErrors(handle, t, 0)
                                                               for t in (0, 1)),
        "NVLink 0 state": lambda: pynvml.nvmlDeviceGetNvLinkState(handle, 0),
        "NVLink 0 CRC flit errors": lambda: pynvml.nvmlDeviceGetNvLinkErrorCounter(handle, 0, 2),
    }
    say()
    say("## NVML fields on this machine")
    say("| field | answer |")
    say("|---|---|")
    FOUND["fields"] = {}
    for name, call in calls.items():
        try:
            answer = f"answered: {call()}"
        except Exception as exc:
            answer = f"did not answer: {type(exc).__name__}: {exc}"
        say(f"| {name} | {answer} |")
        FOUND["fields"][name] = answer


def foreign(device: int, profile: str) -> None:
    """Points that a foreign CuPy loop overlapped are marked with its pid; alone, none is."""
    transfers = {"sizes": [16 * MiB, 256 * MiB, GiB], "modes": ["pinned", "pageable"], "directions": ["h2d", "d2h"],
                 "profile": profile}
    copies = {"sizes": [256 * MiB, GiB], "variants": ["copy_engine", "sm_copy"], "methods": ["batched"],
              "profile": profile}
    say()
    say("## A foreign CuPy copy loop on the GPU, then the same runs alone")
    say("| run | foreign pid | points | marked with the foreign pid | not clean | conditions seen |")
    say("|---|---|---|---|---|---|")
    FOUND["foreign"] = {}
    for name, experiment, params in (("transfers", "transfers", transfers), ("device copy", "device_copy", copies)):
        for alone in (False, True):
            loop = None
            if not alone:
                loop = subprocess.Popen([sys.executable, str(LOOP), "--device", str(device)], stdout=subprocess.PIPE,
                                        text=True)
                ready = loop.stdout.readline()
                if not ready.startswith("ready"):
                    say(f"| {name} | the CuPy loop did not start: {ready!r} | | | | |")
                    loop.kill()
                    continue
            try:
                frame = run(experiment, params)
            finally:
                if loop is not None:
                    loop.kill()
                    loop.wait()
            pid = loop.pid if loop else None
            marked = sum(any(f"pid {pid} " in c for c in conditions.causes(v)) for v in frame["conditions"]) \
                if pid else 0
            unclean = int((~frame["conditions"].map(conditions.is_clean)).sum())
            label = f"{name} {'alone' if alone else 'beside the loop'}"
            say(f"| {label} | {pid or '-'} | {len(frame)} | {marked} | {unclean} | "
                f"{conditions.summary(frame['conditions'])} |")
            FOUND["foreign"][label] = {"pid": pid, "points": len(frame), "marked": marked, "not_clean": unclean,
                                       "conditions": frame["conditions"].tolist(),
                                       "gbps": frame["gbps"].round(2).tolist()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--profile", default="precise", help="the on/off runs' profile")
    parser.add_argument("--foreign-profile", default="precise/timeout_s=2", help="the foreign-loop runs' profile")
    parser.add_argument("--parts", default="fields,foreign,cost",
                        help="which parts, comma-separated: fields (NVML fields and the witness's own cost), foreign "
                             "(the CuPy loop), cost (figures with the witness on and off)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    os.environ.setdefault("PINPOINT_DEVICE", str(args.device))
    if "fields" in parts:
        fields(args.device)
        per_point(args.device)
    if "foreign" in parts:
        started = time.monotonic()
        foreign(args.device, args.foreign_profile)
        say(f"(foreign-loop runs took {time.monotonic() - started:.0f} s)")
    if "cost" in parts:
        started = time.monotonic()
        cost(args.profile)
        say(f"(on/off runs took {time.monotonic() - started:.0f} s)")
    out = os.environ.get("OUT")
    if out:
        tag = "_".join(sorted(parts))
        Path(out, f"witness_bar_{tag}.txt").write_text("\n".join(LINES) + "\n")
        Path(out, f"witness_bar_{tag}.json").write_text(json.dumps(FOUND, indent=1, default=str))


if __name__ == "__main__":
    main()
