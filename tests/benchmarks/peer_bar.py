"""The peers experiment against nvbandwidth on a machine with two or more GPUs, in one process: nvbandwidth's
peer-to-peer, latency and host-to-all tests at 256 MiB, then PinPoint's peers sweep at 256 MiB on the same GPUs,
and a table of each figure with its difference and the accuracy target (copy engine ±3 %, both directions ±3 %,
latency ±1 %, every GPU to and from the host at once ±3 %; a GPU's host link alone is shown beside, without a
target).

Latency is shown three ways: nvbandwidth's ``device_to_device_latency_sm`` (measured before and again after PinPoint's
sweeps: their mean is the reference, their gap the machine's drift), PinPoint's chase as it walks now (from every SM
in turn, the mean over whole rotations) and as it walked before (one block on one SM, 8192 loads a launch, the median
of its samples), with the spread of the SMs' launches (fastest and slowest SM) beside it.

Run on the GPU machine, from the project's root: ``python3 tests/benchmarks/peer_bar.py`` (nvbandwidth on PATH:
``source .gpu/activate.sh``). nvbandwidth prints matrices with the source GPU as the row and the destination as the
column and counts bytes once, as PinPoint's peers rows do (``gpu_index`` → ``peer_index``).
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gpu.core.units import MiB  # noqa: E402

SIZE_MIB = 256
PROFILE = "precise/timeout_s=3"
TESTS = {
    "read": "device_to_device_memcpy_read_ce",
    "write": "device_to_device_memcpy_write_ce",
    "bidir": "device_to_device_bidirectional_memcpy_read_ce",
    "latency": "device_to_device_latency_sm",
    "write_sm": "device_to_device_memcpy_write_sm",
    "h2d_all": "host_to_all_memcpy_ce",
    "d2h_all": "all_to_host_memcpy_ce",
    "h2d": "host_to_device_memcpy_ce",
    "d2h": "device_to_host_memcpy_ce",
}
TARGETS = {"read": 0.03, "write": 0.03, "bidir": 0.03, "latency": 0.01, "h2d_all": 0.03, "d2h_all": 0.03}
BEFORE_STEPS = 8192  # the chase's loads a launch before it walked from every SM
NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def parse_matrices(text: str) -> list[tuple[str, list[list[float | None]]]]:
    """(title, rows) of every matrix nvbandwidth printed: a title line ending in "(GB/s)" or "(ns)", a header of
    column indices, then one line per row ("0  N/A  391.20"); N/A is None."""
    found, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.endswith(("(GB/s)", "(ns)")) and i + 1 < len(lines):
            rows = []
            j = i + 2  # past the header of column indices
            while j < len(lines) and lines[j].strip():
                cells = lines[j].split()
                if not cells or not cells[0].isdigit():
                    break
                rows.append([float(c) if NUMBER.match(c) else None for c in cells[1:]])
                j += 1
            found.append((line, rows))
            i = j
        else:
            i += 1
    return found


def nvbandwidth(test: str) -> tuple[list[tuple[str, list]], str]:
    done = subprocess.run(["nvbandwidth", "-t", test, "-b", str(SIZE_MIB)], capture_output=True, text=True,
                          timeout=300)
    return parse_matrices(done.stdout), done.stdout + done.stderr


def measure_pinpoint(pairs_gpus: list[int]):
    """PinPoint's peers sweep at 256 MiB, batched, on a device set of ``pairs_gpus``, in this process."""
    import pandas as pd

    from gpu.device.device_set import DeviceSet
    from gpu.experiments import peers, sweep_of

    harness, OneSmChase = one_sm_sweep()
    gpus = DeviceSet(pairs_gpus)
    try:
        print(f"PinPoint device set: {gpus.describe()}; links: "
              + "; ".join(f"{a}→{b} {gpus.link(a, b) or '?'}" for a, b in gpus.pairs()), flush=True)
        params = peers.parse_params({"sizes": [SIZE_MIB * MiB], "methods": ["batched"], "profile": PROFILE,
                                     "variants": ["ce_read", "ce_write", "ce_bidir", "latency", "sm_write",
                                                  "h2d_all", "d2h_all", "h2d_alone", "d2h_alone"]})
        started = time.perf_counter()
        rows = sweep_of(peers.NAME)(params, gpus, lambda *a: None, lambda: False)
        print(f"PinPoint sweep: {len(rows)} rows in {time.perf_counter() - started:.1f} s", flush=True)
        started = time.perf_counter()
        before = harness.run(OneSmChase, peers.parse_params({"sizes": [SIZE_MIB * MiB], "variants": ["latency"],
                                                            "profile": PROFILE}),
                             gpus, lambda *a: None, lambda: False)
        print(f"PinPoint chase from one SM (before): {len(before)} rows in {time.perf_counter() - started:.1f} s",
              flush=True)
    finally:
        gpus.close()
    return pd.DataFrame(rows), pd.DataFrame(before)


def one_sm_sweep():
    """The peers sweep with the chase as it walked before: one block of a one-block grid (one SM), 8192 loads a
    launch, the median of the profile's samples."""
    from gpu.experiments.peers.sweep import PeersSweep
    from gpu.sweeps import harness

    class OneSmChase(PeersSweep):
        CHASE_FROM_EVERY_SM = False
        CHASE_STEPS = BEFORE_STEPS

    return harness, OneSmChase


def pinpoint_value(frame, variant: str, source: int, destination: int | None) -> float | None:
    rows = frame[(frame["variant"] == variant) & (frame["gpu_index"] == source)]
    if destination is not None:
        rows = rows[rows["peer_index"] == destination]
    if rows.empty:
        return None
    row = rows.iloc[0]
    return float(row["median_ms"]) * 1e6 if variant == "latency" else float(row["gbps"])


def main() -> int:
    listing = subprocess.run(["nvbandwidth", "-l"], capture_output=True, text=True, timeout=60).stdout
    names = set(re.findall(r"^\d+, (\S+):", listing, flags=re.M))
    if TESTS["bidir"] not in names and "device_to_device_bidirectional_memcpy_write_ce" in names:
        TESTS["bidir"] = "device_to_device_bidirectional_memcpy_write_ce"
    reference = {}
    for key, test in TESTS.items():
        matrices, raw = nvbandwidth(test)
        reference[key] = matrices
        print(f"--- nvbandwidth {test} -b {SIZE_MIB}\n" + "\n".join(
            line for line in raw.splitlines() if line.strip() and not line.startswith(("NOTE", "Performance"))),
            flush=True)
    count = int(subprocess.run([sys.executable, "-c", "import pycuda.driver as d; d.init(); print(d.Device.count())"],
                               capture_output=True, text=True).stdout.strip() or 0)
    if count < 2:
        print(f"peer bar needs two GPUs; this machine has {count}")
        return 2
    ordinals = list(range(count))
    frame, before = measure_pinpoint(ordinals)
    latency_after, raw = nvbandwidth(TESTS["latency"])  # again: the machine's drift across PinPoint's sweeps
    print(f"--- nvbandwidth {TESTS['latency']} -b {SIZE_MIB}, after PinPoint\n" + "\n".join(
        line for line in raw.splitlines() if line.strip() and not line.startswith(("NOTE", "Performance"))),
        flush=True)
    table, notes = [], []

    def add(figure: str, theirs, ours, target_key: str | None):
        if theirs is None or ours is None:
            table.append((figure, theirs, ours, None, TARGETS.get(target_key), None))
            return
        difference = ours / theirs - 1
        target = TARGETS.get(target_key)
        table.append((figure, theirs, ours, difference, target, None if target is None else abs(difference) <= target))

    def matrix(key: str, index: int = 0):
        found = reference.get(key) or []
        return found[index][1] if len(found) > index else []

    for a in ordinals:
        for b in ordinals:
            if a == b:
                continue
            read, write, latency, write_sm = matrix("read"), matrix("write"), matrix("latency"), matrix("write_sm")
            latency_again = latency_after[0][1] if latency_after else []

            def cell(m, a=a, b=b):
                return m[a][b] if len(m) > a and len(m[a]) > b else None
            runs = [v for v in (cell(latency), cell(latency_again)) if v]
            reference_ns = statistics.mean(runs) if runs else None
            add(f"CE read GPU {a}→{b} (GB/s)", cell(read), pinpoint_value(frame, "ce_read", a, b), "read")
            add(f"CE write GPU {a}→{b} (GB/s)", cell(write), pinpoint_value(frame, "ce_write", a, b), "write")
            add(f"SM write GPU {a}→{b} (GB/s)", cell(write_sm), pinpoint_value(frame, "sm_write", a, b), None)
            add(f"latency GPU {a}→{b} memory (ns), every SM (now)", reference_ns,
                pinpoint_value(frame, "latency", a, b), "latency")
            add(f"latency GPU {a}→{b} memory (ns), one SM (before)", reference_ns,
                pinpoint_value(before, "latency", a, b), "latency")
            spread = frame[(frame["variant"] == "latency") & (frame["gpu_index"] == a) & (frame["peer_index"] == b)]
            if not spread.empty:
                row = spread.iloc[0]
                notes.append(f"latency GPU {a}→{b}: nvbandwidth {', '.join(f'{v:,.1f}' for v in runs)} ns (before, "
                             f"after PinPoint); every SM's launch {row['min_ms'] * 1e6:,.1f}–{row['max_ms'] * 1e6:,.1f}"
                             f" ns over {int(row['samples'])} launches")
    # Both directions at once: nvbandwidth prints each direction (two matrices) and their total; PinPoint a row each.
    bidir = reference.get("bidir") or []
    for a, b in [(a, b) for a in ordinals for b in ordinals if a < b]:
        directions = [m[1][a][b] for m in bidir[:2] if len(m[1]) > a and len(m[1][a]) > b and m[1][a][b]]
        theirs = statistics.mean(directions) if directions else None
        ours_each = [pinpoint_value(frame, "ce_bidir", a, b), pinpoint_value(frame, "ce_bidir", b, a)]
        ours = statistics.mean(ours_each) if None not in ours_each else None
        add(f"both ways GPU {a}↔{b}, per direction (GB/s)", theirs, ours, "bidir")
        if len(bidir) > 2 and len(bidir[2][1]) > a and ours is not None:
            add(f"both ways GPU {a}↔{b}, total (GB/s)", bidir[2][1][a][b], sum(ours_each), "bidir")
    for key, alone_key, variant, alone in (("h2d_all", "h2d", "h2d_all", "h2d_alone"),
                                           ("d2h_all", "d2h", "d2h_all", "d2h_alone")):
        together, single = matrix(key), matrix(alone_key)
        for g in ordinals:
            add(f"{variant} GPU {g} (GB/s)", together[0][g] if together and len(together[0]) > g else None,
                pinpoint_value(frame, variant, g, None), key)
            add(f"{alone} GPU {g} (GB/s)", single[0][g] if single and len(single[0]) > g else None,
                pinpoint_value(frame, alone, g, None), None)

    print(f"\nPeer accuracy bar at {SIZE_MIB} MiB (PinPoint batched, profile {PROFILE}; GB/s = 10^9 B/s, bytes "
          "counted once)")
    print("| figure | nvbandwidth 0.8 | PinPoint | difference | target | met |\n|---|---|---|---|---|---|")
    met_all = True
    for figure, theirs, ours, difference, target, met in table:
        shown = [f"{v:,.1f}" if v is not None else "—" for v in (theirs, ours)]
        diff = f"{difference:+.1%}" if difference is not None else "—"
        goal = f"±{target:.0%}" if target is not None else "—"
        verdict = "—" if target is None else ("met" if met else "not met")
        met_all &= met is not False
        print(f"| {figure} | {shown[0]} | {shown[1]} | {diff} | {goal} | {verdict} |")
    print("\n" + "\n".join(notes))
    print("\nevery target met" if met_all else "\nsome targets not met")
    return 0 if met_all else 1


if __name__ == "__main__":
    sys.exit(main())
