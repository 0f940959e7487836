"""What one measurement per GPU across processes costs a job (prints, does not assert): taking and giving back the lock
files of 1 and 8 GPUs uncontended (``HostClaim.acquire`` + ``release``: open, flock, write the record, close), and
reading every GPU's holder as the queue panel does (``host_locks.holders``), in a throwaway lock folder.

Run anywhere (CPU only): ``python3 tests/benchmarks/gpu_lock_cost.py [--rounds 2000]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpu.service import host_locks  # noqa: E402


def timed(action, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    os.environ[host_locks.LOCK_DIR_ENV] = tempfile.mkdtemp(prefix="pinpoint-lock-cost-")
    print(f"{'':<44} {'median µs':>10} {'p99 µs':>8}")
    for gpus in (1, 8):
        claim = host_locks.HostClaim(tuple(f"GPU-{i:04d}" for i in range(gpus)), tuple(range(gpus)), "benchmark")

        def take_and_give_back(claim=claim) -> None:
            claim.acquire()
            claim.release()

        samples = sorted(timed(take_and_give_back, args.rounds))
        print(f"{f'acquire + release, {gpus} GPU' + ('s' if gpus > 1 else ''):<44} "
              f"{statistics.median(samples):10.1f} {samples[int(len(samples) * 0.99)]:8.1f}")
    holding = host_locks.HostClaim(tuple(f"GPU-{i:04d}" for i in range(8)), tuple(range(8)), "benchmark")
    holding.acquire()
    samples = sorted(timed(host_locks.holders, args.rounds))
    holding.release()
    print(f"{'holders(), 8 GPUs held (the queue panel)':<44} {statistics.median(samples):10.1f} "
          f"{samples[int(len(samples) * 0.99)]:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
