"""Compute-ceiling bar (prints, does not assert): the best FP32 and FP64 FMA rates of a run of the ``fma`` experiment,
each against the theoretical rate at the SM clock its point recorded (SMs × FMA lanes per SM × 2 × clock;
``gpu.core.compute``). Target: FP32 ≥ 90 % of theoretical on the H200.

Run on the GPU machine: ``python3 tests/benchmarks/fma_peak.py [--profile precise] [--out fma.parquet]``.
It runs the experiment through the worker the app and the runner use, with every chain count and two block sizes.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    from gpu.core import compute
    from gpu.experiments import fma
    from gpu.service.backends import start_live, submit_values

    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="precise")
    parser.add_argument("--block-sizes", default="256,1024")
    parser.add_argument("--out", help="also write the run here (.parquet)")
    args = parser.parse_args()
    backend, reason = start_live()
    if backend is None:
        sys.exit(f"needs a GPU: {reason}")
    try:
        frame = submit_values(backend, "fma", {"block_sizes": [int(b) for b in args.block_sizes.split(",")],
                                               "profile": args.profile}).outcome()
    finally:
        backend.client.close()
    first = frame.iloc[0]
    print(f"device: {first['device_name']} {first['gpu_uuid']} · compute capability {first['compute_capability']} · "
          f"{first['sm_count']} SMs · max SM clock {first['sm_clock_max_mhz']} MHz · profile {args.profile}")
    for row in frame.to_dict("records"):
        rate = fma.flops_per_second(row)
        theoretical = compute.row_theoretical_flops(row)
        share = f"{rate / theoretical:6.1%}" if theoretical else "   n/a"
        print(f"{row['variant']} chains {int(row['chains']):>2} block {int(row['block_size']):>4}: "
              f"{rate / 1e12:7.2f} TFLOP/s {share} at {row['sm_clock_mhz']:.0f} MHz · median {row['median_ms']:.3f} ms "
              f"cv {row['cv']:.2%} · {row['samples']} samples · throttled {row['throttled']}")
    rates = [fma.flops_per_second(row) for row in frame.to_dict("records")]
    for roof in fma.roofs(frame):
        best = frame.iloc[max((i for i, r in enumerate(frame["variant"]) if r == roof.precision),
                              key=rates.__getitem__)].to_dict()
        theoretical = compute.row_theoretical_flops(best)
        if theoretical is None:
            print(f"BAR {roof.name}: {roof.per_second / 1e12:.2f} TFLOP/s; no theoretical figure for compute "
                  f"capability {best['compute_capability']}")
            continue
        target = " (target >= 90 %)" if roof.precision == compute.FP32 else " (no target)"
        print(f"BAR {roof.name}: {roof.per_second / 1e12:.2f} TFLOP/s = {roof.per_second / theoretical:.1%} of "
              f"theoretical {theoretical / 1e12:.2f} TFLOP/s at {best['sm_clock_mhz']:.0f} MHz{target} · "
              f"{int(best['chains'])} chains, block {int(best['block_size'])}")
    if args.out:
        from gpu.core import schema

        schema.to_parquet(frame, args.out)


if __name__ == "__main__":
    main()
