"""Batched copies against bandwidthTest and nvbandwidth (prints, does not assert): PinPoint's pinned H2D and D2H
with the batched method (back-to-back copies, >= 1 ms a sample) and the single-copy method, at 1 MiB, 16 MiB,
256 MiB and 1 GiB, beside the third-party figures measured on the same H200 (cuda-samples 12.8 bandwidthTest,
nvbandwidth 0.8; GB/s = 10^9 B/s). Bar: batched within 3 % of bandwidthTest at 1 MiB and within 1 % at >= 16 MiB.

With ``--here`` the third-party figures are measured in the same call instead, on the same GPU: bandwidthTest
(``--bandwidthtest``, default .gpurun/bandwidthTest, built by build_bandwidthtest.sh; the median of ``--repeats``
runs in range mode) and nvbandwidth (on PATH: ``host_to_device_memcpy_ce`` / ``device_to_host_memcpy_ce`` at each
size, GPU 0's column), each before and after PinPoint's job, so a drift of the host link shows as a spread.

Run on the GPU machine: ``python3 tests/benchmarks/batched_bar.py [--profile precise/timeout_s=2] [--here]
[--out F.parquet]``.
"""

import argparse
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

MiB = 1 << 20
# (bandwidthTest H2D, D2H), (nvbandwidth H2D, D2H): the H200 figures of the project's field notes, 2026-11-23.
THIRD_PARTY = {1 * MiB: ((48.04, 50.45), (49.06, 50.38)), 16 * MiB: ((54.90, 55.09), (55.02, 55.26)),
               256 * MiB: ((55.3, 55.4), (53.0, 55.4)), 1024 * MiB: ((55.05, 55.34), (55.46, 55.38))}
TOLERANCE = {1 * MiB: 0.03}  # else 1 %


def measure(profile: str):
    """Single and batched pinned copies at the table's sizes, both directions, in one job."""
    from gpu.service.backends import start_live, submit_values

    backend, reason = start_live()
    if backend is None:
        sys.exit(f"needs a GPU: {reason}")
    try:
        return submit_values(backend, "transfers", {"sizes": sorted(THIRD_PARTY), "modes": ["pinned"],
                                                    "methods": ["single", "batched"], "profile": profile}).outcome()
    finally:
        backend.client.close()


RANGE_LINE = re.compile(r"^\s*(\d+)\s+([0-9.]+)\s*$")


def bandwidth_test(binary: str, size: int, direction: str, repeats: int) -> list[float]:
    """bandwidthTest's pinned GB/s (10^9 B/s) at ``size``, ``--htod`` or ``--dtoh``, once per repeat."""
    figures = []
    for _ in range(repeats):
        done = subprocess.run([binary, "--device=0", "--memory=pinned", "--mode=range", f"--start={size}",
                               f"--end={size}", f"--increment={size}", f"--{direction[0]}to{direction[2]}"],
                              capture_output=True, text=True, timeout=120)
        found = [float(m.group(2)) for line in done.stdout.splitlines() if (m := RANGE_LINE.match(line))
                 and int(m.group(1)) == size]
        if not found:
            sys.exit(f"bandwidthTest printed no figure for {size} B {direction}:\n{done.stdout}{done.stderr}")
        figures.append(found[0])
    return figures


def nvbandwidth(size: int, direction: str) -> float:
    """nvbandwidth's copy-engine GB/s between the host and GPU 0 at ``size`` (its -b takes MiB)."""
    from peer_bar import parse_matrices  # noqa: PLC0415 (the benchmark beside this one)

    test = {"h2d": "host_to_device_memcpy_ce", "d2h": "device_to_host_memcpy_ce"}[direction]
    done = subprocess.run(["nvbandwidth", "-t", test, "-b", str(size // MiB)], capture_output=True, text=True,
                          timeout=300)
    matrices = parse_matrices(done.stdout)
    if not matrices or not matrices[0][1] or matrices[0][1][0][0] is None:
        sys.exit(f"nvbandwidth printed no figure for {test}:\n{done.stdout}{done.stderr}")
    return matrices[0][1][0][0]


def third_party_here(binary: str, repeats: int) -> dict:
    """{size: ((bandwidthTest H2D, D2H), (nvbandwidth H2D, D2H))}, each a list of runs on this machine now."""
    return {size: tuple(tuple(tool(size, d) for d in ("h2d", "d2h")) for tool in (
        lambda size, d: bandwidth_test(binary, size, d, repeats), lambda size, d: [nvbandwidth(size, d)]))
        for size in THIRD_PARTY}


def main() -> None:
    from gpu.core.units import format_bytes

    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="precise/timeout_s=2")
    parser.add_argument("--out", help="also write the run here (.parquet), e.g. for replay")
    parser.add_argument("--here", action="store_true",
                        help="measure bandwidthTest and nvbandwidth now, on this GPU, before and after PinPoint")
    local = Path(__file__).resolve().parents[2] / ".gpurun" / "bandwidthTest"
    parser.add_argument("--bandwidthtest", default=str(local) if local.is_file() else shutil.which("bandwidthTest"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    third_party = THIRD_PARTY
    if args.here:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        if not args.bandwidthtest or not shutil.which("nvbandwidth"):
            sys.exit("--here needs bandwidthTest (--bandwidthtest) and nvbandwidth on PATH")
        before = third_party_here(args.bandwidthtest, args.repeats)
    frame = measure(args.profile)
    if args.here:
        after = third_party_here(args.bandwidthtest, args.repeats)
        third_party = {}
        for size in THIRD_PARTY:
            runs = [[b + a for b, a in zip(before[size][t], after[size][t], strict=True)] for t in (0, 1)]
            third_party[size] = tuple(tuple(statistics.median(r) for r in tool) for tool in runs)
            print(f"here {format_bytes(size):>8}: bandwidthTest H2D {runs[0][0]} D2H {runs[0][1]}; "
                  f"nvbandwidth H2D {runs[1][0]} D2H {runs[1][1]} (before PinPoint, then after)")
    print(f"device: {frame['device_name'].iloc[0]} · profile {args.profile} · third-party figures "
          + ("measured here, medians of before and after" if args.here else "from the field notes (H200)"))
    gbps = frame.set_index(["bytes", "direction", "timer"])
    for size, (bandwidth_test, nvbandwidth) in third_party.items():
        for i, direction in enumerate(("h2d", "d2h")):
            batched = gbps.loc[(size, direction, "cuda_event_batched_held")]
            single = gbps.loc[(size, direction, "cuda_event")]["gbps"]
            off = batched["gbps"] / bandwidth_test[i] - 1
            tolerance = TOLERANCE.get(size, 0.01)
            print(f"BAR batched pinned {direction.upper()} {format_bytes(size):>8}: {batched['gbps']:6.2f} GB/s "
                  f"({int(batched['copies_per_sample'])} copies/sample, cv {batched['cv']:.2%}) vs bandwidthTest "
                  f"{bandwidth_test[i]:.2f} ({off:+.2%}, target within {tolerance:.0%}: "
                  f"{'met' if abs(off) <= tolerance else 'NOT met'}), nvbandwidth {nvbandwidth[i]:.2f} "
                  f"({batched['gbps'] / nvbandwidth[i] - 1:+.2%}); single copy {single:.2f} GB/s")
    if args.out:
        from gpu.core import schema

        schema.to_parquet(frame, args.out)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
