"""Peer runs of a made-up node, for the Peers page's tests only (never bundled, never shown by the app): every
variant of the peer experiment's rows (gpu/experiments/peers/__init__.py) for 2 or 8 GPUs, shaped like the two-H100 NV18
machine's figures in nvbandwidth (391 GB/s pulled, 396 pushed, 369 by an SM kernel, 200 GB/s at 1 MiB, 830 ns, host
links 55 GB/s alone). Options make one pair slow, one pair go through the host, and one GPU lose host bandwidth
when all copy."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpu.core import schema
from gpu.core.units import GiB, KiB, MiB

SIZES = [4 * KiB * 4**i for i in range(10)]  # 4 KiB … 1 GiB in ×4 steps
PEAKS = {"ce_read": 391.2, "ce_write": 396.0, "sm_read": 352.0, "sm_write": 369.0, "ce_bidir": 391.7}
HALF_BYTES = {"cuda_event_batched_held": 1 * MiB, "cuda_event": 4 * MiB}  # the size reaching half the peak
LATENCY_NS = 830.0
LOADS_PER_SAMPLE = 8192
HOST_ALONE = {"h2d": 54.9, "d2h": 55.1}
NVLINK = "NVLink 4 ×18"
THROUGH_HOST = "through host (no peer access)"


def uuid(index: int) -> str:
    return f"GPU-{index:08x}-0000-4000-8000-00000000{index:04x}"


def _row(variant: str, source: int, destination: int | None, size: int, gbps: float, timer: str,
         link: str | None, direction: str = "peer", moved: int | None = None, **extra) -> dict:
    """One point: ``size`` the copy (or working set), ``moved`` the bytes it moved (the size, unless named)."""
    moved = size if moved is None else moved
    median_ms = moved / (gbps * 1e6)
    samples = list(median_ms * np.array([0.99, 1.0, 1.0, 1.01]))
    return {"experiment": "peers", "variant": variant, "direction": direction, "bytes": moved, "elements": size,
            "gpu_index": source, "gpu_uuid": uuid(source),
            "peer_index": destination, "peer_uuid": None if destination is None else uuid(destination), "link": link,
            "median_ms": median_ms, "min_ms": min(samples), "max_ms": max(samples), "cv": 0.005,
            "samples": len(samples), "gbps": gbps, "stop_reason": "converged", "profile": "precise", "timer": timer,
            "verified": True, "throttled": False, "samples_ms": samples, **extra}


def peer_frame(gpus: int = 2, slow: tuple[int, int] | None = None, slowdown: float = 0.51,
               through_host: tuple[int, int] | None = None, host_loser: int | None = 0, host_loss: float = 0.18,
               host: str = "node-1", run_id: str = "peers-test") -> pd.DataFrame:
    """A peer run of ``gpus`` H100s joined by NV18: ``slow`` (an ordered pair) copies at ``slowdown`` of the others
    in every one-way variant, ``through_host`` (an ordered pair, both ways) has no peer access (PCIe rates) and
    ``host_loser`` loses ``host_loss`` of its bandwidth to the host when every GPU copies at once."""
    rows = []
    for source in range(gpus):
        for destination in range(gpus):
            if source == destination:
                continue
            pair = {source, destination}
            hosted = through_host is not None and pair == set(through_host)
            link = THROUGH_HOST if hosted else NVLINK
            scale = (0.12 if hosted else 1.0) * (slowdown if (source, destination) == slow else 1.0)
            for variant, peak in PEAKS.items():
                for timer, half in HALF_BYTES.items():
                    for size in SIZES:
                        rate = peak * scale * size / (size + half)
                        rows.append(_row(variant, source, destination, size, rate, timer, link))
            for working_set in (64 * MiB, 1 * GiB):
                ns = LATENCY_NS * (4 if hosted else 1) * (1 if working_set == GiB else 0.9)
                # median_ms per load (a sample's time ÷ its loads), bytes one 8-byte pointer
                rows.append(_row("latency", source, destination, working_set, 8 / ns, "cuda_event_held", link,
                                 moved=8, loads_per_sample=LOADS_PER_SAMPLE))
    for gpu in range(gpus):
        for direction, alone in HOST_ALONE.items():
            loses = host_loss if gpu == host_loser and direction == "d2h" else 0.02
            for size in (64 * MiB, 256 * MiB):
                rows.append(_row(f"{direction}_alone", gpu, None, size, alone, "cuda_event_batched_held", None,
                                 direction=direction))
                rows.append(_row(f"{direction}_all", gpu, None, size, alone * (1 - loses), "cuda_event_batched_held",
                                 None, direction=direction))
    provenance = {"run_id": run_id, "device_name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0",
                  "sm_count": 132, "memory_total_bytes": 80 * GiB, "driver_version": "580.95", "cuda_version": "13.0",
                  "pycuda_version": "2026.1", "pcie_gen": 5, "pcie_width": 16, "pcie_gbps_theoretical": 63.0,
                  "hbm_gbps_theoretical": 3352.0, "sm_clock_max_mhz": 1980, "mem_clock_max_mhz": 2619, "host": host,
                  "timestamp": "2026-11-25T18:00:00", "git_commit": "test", "backend": "live"}
    return schema.make_frame(rows, provenance)


def write_recording(folder, gpus: int = 2, **options) -> pd.DataFrame:
    """``peer_frame`` saved as a recording in ``folder`` (peers_*.parquet, as the app's replay reads them)."""
    frame = peer_frame(gpus, **options)
    schema.to_parquet(frame, folder / f"peers_test-{gpus}gpu_2026-11-25.parquet")
    return frame
