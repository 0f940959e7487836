"""How long the ``pinpoint`` command takes to answer (prints, does not assert; targets: ``pinpoint --help`` well
under 1 s, ``pinpoint runs`` under 2 s).

Each command runs in a fresh Python, as the installed command starts (``python -m gpu.cli …`` of a checkout, with no
runs store: HOME and XDG_DATA_HOME point at an empty temporary folder), several times; it prints the median and the
fastest wall time and CPU time (user + system of the child) of each. ``--root OTHER_CHECKOUT`` times another checkout
the same way, in turns with this one, so both see the same load: the 2-core machines are shared and noisy.

Run: ``python3 tests/benchmarks/cli_start.py [--repeat 5] [--root /path/to/main]``
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = (["--help"], ["measure", "--help"], ["runs"])
TARGETS_S = {"--help": 1.0, "measure --help": 1.0, "runs": 2.0}


def timed(root: Path, argv: list[str], env: dict) -> tuple[float, float]:
    """(wall s, CPU s) of one ``python -m gpu.cli ARGV`` in ``root``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gpu.cli", *argv], cwd=root, env={**env, "PYTHONPATH": str(root)},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=120)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--root", type=Path, action="append", default=[],
                        help="another checkout to time beside this one (in turns)")
    args = parser.parse_args()
    roots = [ROOT, *args.root]
    with tempfile.TemporaryDirectory() as home:
        env = {key: value for key, value in os.environ.items() if not key.startswith("PINPOINT_")}
        env.update(HOME=home, XDG_DATA_HOME=str(Path(home) / "data"), PINPOINT_BACKEND="replay")
        for root in roots:  # a first run each, not counted: Python writes the checkout's bytecode caches
            for argv in COMMANDS:
                timed(root, argv, env)
        times = {(root, " ".join(argv)): [] for root in roots for argv in COMMANDS}
        for _ in range(args.repeat):
            for argv in COMMANDS:
                for root in roots:
                    times[root, " ".join(argv)].append(timed(root, argv, env))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.repeat} runs each")
    for (root, command), runs in times.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        # On a loaded machine the wall time is mostly waiting for a core; on a quiet one it is about the CPU time.
        within = "/".join("within" if statistics.median(times) < TARGETS_S[command] else "OVER"
                          for times in (walls, cpus))
        print(f"{root}: pinpoint {command:<15} wall median {statistics.median(walls):.2f} s "
              f"(fastest {min(walls):.2f}), "
              f"CPU median {statistics.median(cpus):.2f} s — wall/CPU {within} the {TARGETS_S[command]:g} s target")


if __name__ == "__main__":
    main()
