"""How long the fleet health suite takes on this machine's GPUs, and where its runs' time goes.
Prints, never asserts (targets: at most 20 s for each GPU's own runs, all GPUs at once; at most 30 s for a 4-GPU
node's links).

1. ``python -m gpu.bench fleet health --cluster local`` into a throwaway SQLite store, as a user runs it: the
   command's wall time, the fleet's own total, each GPU's runs (each run's time as the fleet reports it, from its
   submission to its frame back) and the node's links (the peers run).
2. The health suite's reduction and transfers runs again (``--parts``), in this process on GPU 0 (``--gpu``), their
   parts timed: the sweep's generator (the reduction's input vectors made on the GPU, their check and exact dot
   products, host buffers), each point's set-up (``measure``: the inputs written again, patterns, a batch's
   calibration), its samples, its verification, the whole job, and each point's time and stop reason; for the
   reduction also, inside those, its generator kernel, the host's formula check and the reference sums.
   ``--concurrent N`` first draws the inputs in N processes at once, as N GPUs' workers of one node do in a fleet
   (a checkout that makes them on the GPU has nothing to draw on the host).

3. ``--parts-concurrent``: the health fleet again (``health_parts.py``, its own process), every GPU at once as the
   fleet runs them, each run's time split into its parts in every process it crosses: the driver's submission, Dask's
   dispatch, the client's GPU locks, the GPU worker's job (provenance, limits, each point's generator, set-up, samples,
   verification, the witness's NVML readings before and after it, rows and frame), the answer's way back, the frame's
   fetch and store transaction, the wait for the next submission; and each worker's start (spawn, imports, CUDA
   context, kernels, warm-ups, and the warm-up threads still running beside the first runs). ``--settle-too`` runs it
   a second time with each GPU worker waiting for its warm-ups' threads before it says hello (nothing else changes),
   to see what those threads cost the runs beside them. ``--parts-no-node`` leaves the node's links out of both.

``--root DIR`` runs them from another checkout of PinPoint (e.g. main, for a before figure in the same call): the
fleet command with its code, and each run with its sweep.

Run on the GPU machine: ``python3 tests/benchmarks/health_time.py [--root /tmp/before] [--no-fleet]
[--no-parts] [--parts reduction,transfers] [--concurrent 4] [--parts-concurrent [--settle-too] [--parts-no-node]]``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sweep_parts  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
STORED = re.compile(r"^(?P<unit>.+): (?P<experiment>\w+) stored \((?P<points>[\d,]+) points? in (?P<s>[\d.]+) s")
FAILED = re.compile(r"^(?P<unit>.+): (?P<experiment>\w+) failed after (?P<s>[\d.]+) s")
TOTAL = re.compile(r"runs stored .* in (?P<s>[\d.]+) s")
GPU_TARGET_S, LINKS_TARGET_S = 20.0, 30.0


def fleet(root: Path) -> None:
    """Run the health fleet from ``root``'s checkout; print its total and each run's time."""
    with tempfile.TemporaryDirectory(prefix="pinpoint-health-time-") as folder:
        env = {**os.environ, "PINPOINT_DB_URL": f"sqlite:///{folder}/fleet.db",
               "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "gpu.bench", "fleet", "health", "--cluster", "local"], cwd=root,
                              env=env, capture_output=True, text=True, timeout=900)
        wall = time.perf_counter() - started
    lines = (done.stderr + done.stdout).splitlines()
    units: dict[str, dict[str, str]] = {}
    for line in lines:
        found = STORED.match(line) or FAILED.match(line)
        if found:
            failed = "" if "points" in found.groupdict() else " FAILED"
            points = f" ({found['points']} points)" if not failed else ""
            units.setdefault(found["unit"], {})[found["experiment"]] = f"{float(found['s']):.1f} s{points}{failed}"
    total = next((float(m["s"]) for m in map(TOTAL.search, lines) if m), float("nan"))
    print(f"FLEET health from {root}: exit {done.returncode}, command {wall:.1f} s, fleet {total:.1f} s", flush=True)
    for unit, runs in units.items():
        seconds = [float(v.split()[0]) for v in runs.values()]
        is_node = "peers" in runs
        target = LINKS_TARGET_S if is_node else GPU_TARGET_S
        print(f"  {'node' if is_node else 'GPU '} {unit}: {sum(seconds):.1f} s in all (target <= {target:.0f} s): "
              + ", ".join(f"{name} {value}" for name, value in runs.items()), flush=True)
    if done.returncode != 0:
        print("  last lines:\n    " + "\n    ".join(lines[-15:]), flush=True)


def run_parts(root: Path, gpu_index: int, experiment: str) -> None:
    """The suite's ``experiment`` run on one GPU in this process, its parts timed (``sweep_parts``): the sweep's points
    (inputs and host buffers made between points), each point's set-up (``measure``: uploads, patterns, a batch's
    calibration), its samples, its verification, and the rest; then each point's own time and stop reason."""
    sys.path.insert(0, str(root))
    from gpu.device.context import GpuRuntime
    from gpu.experiments import suites

    params = suites.load("health").run_for(experiment).checked().params
    timer = sweep_parts.SweepParts(experiment)
    gpu = GpuRuntime(gpu_index)
    try:
        rows, whole = timer.run(params, gpu)
    finally:
        gpu.close()
    print(f"{experiment.upper()} run of the health suite from {root} on GPU {gpu_index} "
          f"({gpu.facts['device_name']}, {os.cpu_count()} host cores): whole job {whole:.2f} s, {len(rows)} row(s), "
          f"profile {params.profile}", flush=True)
    for name, seconds in timer.parts.items():
        print(f"  {name}: {seconds:.2f} s", flush=True)
    print(f"  the rest (allocation, set-up, rows, freeing): {whole - sum(timer.parts.values()):.2f} s", flush=True)
    for name, seconds in timer.details.items():
        print(f"  of which, inside the parts above: {name}: {seconds:.3f} s", flush=True)
    for point in timer.points:
        row = point.row
        if row is not None:
            print(f"    {point.label}: {point.seconds:.2f} s, {row['samples']} samples, {row['stop_reason']}, "
                  f"{row['gbps']:.2f} GB/s", flush=True)


INPUTS_ONLY = """
import sys, time
sys.path.insert(0, sys.argv[1])
from gpu.experiments import registry, suites
module = registry.entry_of("reduction").sweep_module()
n = max(suites.load("health").run_for("reduction").checked().params.sizes)
started = time.perf_counter()
if hasattr(module, "TERNARY_PAIR"):  # the inputs are made on the GPU: no host work to contend for the cores
    print("0.00 (made on the GPU)")
    sys.exit(0)
if hasattr(module, "dot_inputs"):
    module.dot_inputs(n)
else:  # a checkout before dot_inputs: the sweep's generator draws the inputs at its first point
    import numpy as np
    rng = np.random.default_rng()
    ternary = [rng.integers(-1, 2, size=n, dtype=np.int8).astype(np.float32) for _ in range(2)]
    float(np.dot(ternary[0].astype(np.float64), ternary[1].astype(np.float64)))
    uniform = [rng.random(n, dtype=np.float32) * np.float32(2) - np.float32(1) for _ in range(2)]
    float(np.dot(uniform[0].astype(np.float64), uniform[1].astype(np.float64)))
print(f"{time.perf_counter() - started:.2f}")
"""


def concurrent_inputs(root: Path, count: int) -> None:
    """The reduction's inputs drawn in ``count`` processes at once (no GPU), as a node's GPU workers do."""
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", INPUTS_ONLY, str(root)], stdout=subprocess.PIPE, text=True)
             for _ in range(count)]
    each = [p.communicate(timeout=600)[0].strip() for p in procs]
    print(f"INPUTS from {root}: {count} processes at once: {time.perf_counter() - started:.2f} s in all, each "
          f"{', '.join(each)} s", flush=True)


def parts_concurrent(root: Path, settle: bool, no_node: bool) -> None:
    """The fleet with every process timed (``health_parts.py``, in a process of its own: it starts the cluster)."""
    command = [sys.executable, str(Path(__file__).with_name("health_parts.py")), "--root", str(root)]
    command += ["--settle"] if settle else []
    command += ["--no-node"] if no_node else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    print(done.stdout, end="", flush=True)
    if done.returncode != 0:
        print(f"  health_parts.py exited {done.returncode}; last lines:\n    "
              + "\n    ".join((done.stderr or "").splitlines()[-20:]), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, default=ROOT, help="the PinPoint checkout to time (default: this one)")
    parser.add_argument("--gpu", type=int, default=0, help="the GPU the runs' parts are timed on")
    parser.add_argument("--parts", default="reduction,transfers",
                        help="comma-separated experiments of the suite whose parts are timed")
    parser.add_argument("--concurrent", type=int, default=0, help="also draw the inputs in N processes at once")
    parser.add_argument("--parts-concurrent", action="store_true",
                        help="the fleet again, every run's parts timed in every process, all GPUs at once")
    parser.add_argument("--settle-too", action="store_true",
                        help="with --parts-concurrent: a second fleet whose workers wait for their warm-up threads")
    parser.add_argument("--parts-no-node", action="store_true", help="with --parts-concurrent: no node runs")
    parser.add_argument("--no-fleet", action="store_true")
    parser.add_argument("--no-parts", action="store_true")
    args = parser.parse_args()
    root = args.root.resolve()
    if not args.no_fleet:
        fleet(root)
    if args.parts_concurrent:
        parts_concurrent(root, False, args.parts_no_node)
        if args.settle_too:
            parts_concurrent(root, True, args.parts_no_node)
    if args.concurrent:
        concurrent_inputs(root, args.concurrent)
    if not args.no_parts:
        for experiment in filter(None, (e.strip() for e in args.parts.split(","))):
            run_parts(root, args.gpu, experiment)


if __name__ == "__main__":
    main()
