"""Benchmark (not a test): the kernel quality bars, measured through PinPoint's worker on the GPU machine.

    python tests/benchmarks/kernel_bars.py

1. our best copy kernel (copy_f4) >= 90 % of memcpy_dtod bandwidth (2^28 floats, 1 GiB per buffer);
2. the padded tiled transpose >= 80 % of our copy kernel (16384 x 16384 floats);
3. our best dot product >= 1.15x gpuarray.dot bandwidth at 2^28 floats.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpu.service.backends import LiveBackend, submit_values  # noqa: E402
from gpu.service.client import WorkerClient  # noqa: E402

PROFILE = "precise/timeout_s=5"


def verdict(ratio: float, target: float) -> str:
    return "met" if ratio >= target else "NOT met"


def main() -> None:
    client = WorkerClient()
    backend = LiveBackend(client)
    try:
        copy = submit_values(backend, "coalescing", {"elements": 1 << 28, "block_sizes": [256, 1024],
                                                     "groups": ["copy", "transpose"], "profile": PROFILE}).outcome()
        dot = submit_values(backend, "reduction", {"sizes": [1 << 28], "block_sizes": [256, 512, 1024],
                                                   "variants": ["grid_stride", "warp_shuffle", "gpuarray_dot"],
                                                   "profile": PROFILE}).outcome()
    finally:
        client.close()
    best = copy.groupby("variant")["gbps"].max()
    device = copy["device_name"].iloc[0]
    print(f"device: {device}; HBM theoretical {copy['hbm_gbps_theoretical'].iloc[0]:.0f} GB/s")
    print(f"memcpy_dtod {best['memcpy_dtod']:.0f} GB/s · copy_f4 {best['copy_f4']:.0f} GB/s · "
          f"copy_f32 {best['copy_f32']:.0f} GB/s")
    ratio = best["copy_f4"] / best["memcpy_dtod"]
    print(f"bar 1: copy_f4 / memcpy_dtod = {ratio:.3f} (target >= 0.90: {verdict(ratio, 0.90)})")
    ratio = best["transpose_padded"] / best["copy_f4"]
    print(f"transpose naive {best['transpose_naive']:.0f} · tiled {best['transpose_tiled']:.0f} · "
          f"padded {best['transpose_padded']:.0f} GB/s")
    print(f"bar 2: transpose_padded / copy_f4 = {ratio:.3f} (target >= 0.80: {verdict(ratio, 0.80)})")
    kernels = dot.groupby("variant")["gbps"].max()
    ours = kernels.drop("gpuarray_dot").max()
    which = kernels.drop("gpuarray_dot").idxmax()
    ratio = ours / kernels["gpuarray_dot"]
    print(f"dot 2^28: {which} {ours:.0f} GB/s · gpuarray.dot {kernels['gpuarray_dot']:.0f} GB/s · "
          f"rel errors {dot.groupby('variant')['rel_error'].max().to_dict()}")
    print(f"bar 3: best dot / gpuarray.dot = {ratio:.3f} (target >= 1.15: {verdict(ratio, 1.15)})")


if __name__ == "__main__":
    main()
