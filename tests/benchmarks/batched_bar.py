"""Batched copies against bandwidthTest and nvbandwidth (prints, does not assert): PinPoint's pinned H2D and D2H
with the batched method (back-to-back copies, >= 1 ms a sample) and the single-copy method, at 1 MiB, 16 MiB,
256 MiB and 1 GiB, beside the third-party figures measured on the same H200 (cuda-samples 12.8 bandwidthTest,
nvbandwidth 0.8; GB/s = 10^9 B/s). Bar: batched within 3 % of bandwidthTest at 1 MiB and within 1 % at >= 16 MiB.

Run on the GPU machine: ``python3 tests/benchmarks/batched_bar.py [--profile precise/timeout_s=2] [--out F.parquet]``.
"""

import argparse
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
    from gpu.service.backends import start_live

    backend, reason = start_live()
    if backend is None:
        sys.exit(f"needs a GPU: {reason}")
    try:
        return backend.submit("transfers", {"sizes": sorted(THIRD_PARTY), "modes": ["pinned"],
                                            "methods": ["single", "batched"], "profile": profile}).outcome()
    finally:
        backend.client.close()


def main() -> None:
    from gpu.core.units import format_bytes

    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="precise/timeout_s=2")
    parser.add_argument("--out", help="also write the run here (.parquet), e.g. for replay")
    args = parser.parse_args()
    frame = measure(args.profile)
    print(f"device: {frame['device_name'].iloc[0]} · profile {args.profile}")
    gbps = frame.set_index(["bytes", "direction", "timer"])
    for size, (bandwidth_test, nvbandwidth) in THIRD_PARTY.items():
        for i, direction in enumerate(("h2d", "d2h")):
            batched = gbps.loc[(size, direction, "cuda_event_batched_held")]
            single = gbps.loc[(size, direction, "cuda_event")]["gbps"]
            off = batched["gbps"] / bandwidth_test[i] - 1
            tolerance = TOLERANCE.get(size, 0.01)
            print(f"BAR batched pinned {direction.upper()} {format_bytes(size):>8}: {batched['gbps']:6.2f} GB/s "
                  f"({int(batched['param_value'])} copies/sample, cv {batched['cv']:.2%}) vs bandwidthTest "
                  f"{bandwidth_test[i]:.2f} ({off:+.2%}, target within {tolerance:.0%}: "
                  f"{'met' if abs(off) <= tolerance else 'NOT met'}), nvbandwidth {nvbandwidth[i]:.2f} "
                  f"({batched['gbps'] / nvbandwidth[i] - 1:+.2%}); single copy {single:.2f} GB/s")
    if args.out:
        from gpu.core import schema

        schema.to_parquet(frame, args.out)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
