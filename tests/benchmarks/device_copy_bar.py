"""Device-to-device copies against bandwidthTest --dtod on the same machine (prints, does not assert).

PinPoint's device_copy experiment, batched (back-to-back copies, the stream held, >= 1 ms a sample), at 256 MiB,
1 GiB and 4 GiB, through the runner's worker; then NVIDIA's bandwidthTest (cuda-samples v12.8, built by
``tests/benchmarks/build_bandwidthtest.sh``) in range mode at each size, ``--repeats`` times (its figure is one
timing of 100 back-to-back ``cudaMemcpy`` calls; the median is compared). Bar: the copy engine within 3 % of
bandwidthTest at >= 256 MiB. Conventions: both PinPoint and bandwidthTest count a device copy's bytes twice
(read + write); nvbandwidth's ``device_local_copy`` counts them once, so its figure is half (printed beside).
bandwidthTest takes sizes as 32-bit ints: 4 GiB is measured by PinPoint only.

Run on the GPU machine: ``python3 tests/benchmarks/device_copy_bar.py [--bandwidthtest .gpurun/bandwidthTest]
[--profile precise/timeout_s=3] [--out F.parquet]``.
"""

import argparse
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

MiB, GiB = 1 << 20, 1 << 30
SIZES = [256 * MiB, 1 * GiB, 4 * GiB]
TOLERANCE = 0.03
BANDWIDTH_TEST_MAX = 2**31 - 1  # its --start/--end are parsed as int
CSV_LINE = re.compile(r"bandwidthTest-D2D, Bandwidth = ([0-9.]+) GB/s")


def measure(profile: str):
    """Both copies, batched, at every size, in one job of the worker the runner uses."""
    from gpu.service.backends import start_live, submit_values

    backend, reason = start_live()
    if backend is None:
        sys.exit(f"needs a GPU: {reason}")
    try:
        return submit_values(backend, "device_copy",
                             {"sizes": SIZES, "methods": ["batched"], "profile": profile}).outcome()
    finally:
        backend.client.close()


def bandwidth_test(binary: str, size: int, repeats: int) -> list[float]:
    """bandwidthTest's device-to-device GB/s at ``size`` (read + write counted), once per repeat."""
    figures = []
    for _ in range(repeats):
        done = subprocess.run([binary, "--memory=pinned", "--mode=range", f"--start={size}", f"--end={size}",
                               f"--increment={size}", "--dtod", "--csv"], capture_output=True, text=True, timeout=300)
        found = CSV_LINE.search(done.stdout)
        if done.returncode != 0 or not found:
            sys.exit(f"{binary} failed (exit {done.returncode}): {(done.stdout + done.stderr).strip()[-400:]}")
        figures.append(float(found.group(1)))
    return figures


def default_binary() -> str | None:
    local = Path(__file__).resolve().parents[2] / ".gpurun" / "bandwidthTest"
    return str(local) if local.is_file() else shutil.which("bandwidthTest")


def main() -> None:
    from gpu.core.units import format_bytes

    parser = argparse.ArgumentParser()
    parser.add_argument("--bandwidthtest", default=default_binary(),
                        help="the bandwidthTest binary (default: .gpurun/bandwidthTest, else PATH)")
    parser.add_argument("--profile", default="precise/timeout_s=3")
    parser.add_argument("--repeats", type=int, default=5, help="bandwidthTest runs per size (median compared)")
    parser.add_argument("--out", help="also write the run here (.parquet)")
    args = parser.parse_args()
    if not args.bandwidthtest:
        sys.exit("no bandwidthTest binary: build one with tests/benchmarks/build_bandwidthtest.sh OUT, pass "
                 "--bandwidthtest OUT")
    frame = measure(args.profile)
    print(f"device: {frame['device_name'].iloc[0]} · profile {args.profile} · bandwidthTest {args.bandwidthtest}")
    gbps = frame.set_index(["variant", "elements"])
    for size in SIZES:
        engine, sm = gbps.loc[("copy_engine", size)], gbps.loc[("sm_copy", size)]["gbps"]
        ours = f"copy engine batched {format_bytes(size):>7}: {engine['gbps']:,.0f} GB/s (read + write counted; " \
               f"{int(engine['copies_per_sample'])} copies/sample, cv {engine['cv']:.2%}); SM copy {sm:,.0f} GB/s"
        if size > BANDWIDTH_TEST_MAX:
            print(f"BAR {ours}; bandwidthTest: cannot (its sizes are 32-bit ints, at most 2 GiB - 1 B)")
            continue
        figures = bandwidth_test(args.bandwidthtest, size, args.repeats)
        theirs = statistics.median(figures)
        off = engine["gbps"] / theirs - 1
        print(f"BAR {ours} vs bandwidthTest --dtod {theirs:,.1f} GB/s (read + write counted; median of "
              f"{', '.join(f'{f:,.1f}' for f in figures)}): {off:+.2%}, target within {TOLERANCE:.0%}: "
              f"{'met' if abs(off) <= TOLERANCE else 'NOT met'}; counted once as nvbandwidth does: ours "
              f"{engine['gbps'] / 2:,.0f}, bandwidthTest {theirs / 2:,.0f} GB/s")
    if args.out:
        from gpu.core import schema

        schema.to_parquet(frame, args.out)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
