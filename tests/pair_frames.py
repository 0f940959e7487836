"""Made-up peer-to-peer runs for the results tests: a node's matrix of copies between every ordered pair of its GPUs,
one row per (method, pair), with invented times shaped like an NVLink node (about 390 GB/s one way). Nothing here is
a measurement; the app never shows these. ``register`` registers a test-only experiment that declares the peer
key, as the peer experiment does: ``KEY_COLUMNS = ["variant", "gpu_index", "peer_index", "elements", "timer"]``."""

from __future__ import annotations

import types

import numpy as np

from gpu.core import schema
from gpu.experiments import registry

NAME = "peer_pairs"
KEY_COLUMNS = ["variant", "gpu_index", "peer_index", "elements", "timer"]
VARIANTS = ("copy_ce_read", "copy_sm")
ELEMENTS = 64 * 1024**2  # 256 MiB of float32
GBPS = 390.0
MODEL = "NVIDIA H100 80GB HBM3"


def register(monkeypatch):
    """The test-only peer experiment, registered for one test (Compare, check and the fleet read its key)."""
    module = types.ModuleType(NAME)
    module.NAME, module.KEY_COLUMNS = NAME, KEY_COLUMNS
    monkeypatch.setitem(registry.EXPERIMENTS, NAME, module)
    monkeypatch.setitem(registry.BY_NAME, NAME, types.SimpleNamespace(byte_labels=False, name=NAME))
    return module


def uuid(node: int, gpu: int) -> str:
    return f"GPU-{node:08x}-0000-4000-8000-{gpu:012x}"


def peer_run(run_id: str, gpus: int = 2, node: int = 0, slow: dict | None = None,
             timestamp: str = "2026-11-25T10:00:00+00:00", seed: int = 0, samples: int = 30):
    """A node's peer run: every ordered pair of ``gpus`` GPUs by each method. ``slow``: (source, destination) → the
    pair's speed as a share of the others' (0.5: it takes twice the time)."""
    rng = np.random.default_rng(seed)
    rows = []
    bytes_ = ELEMENTS * 4
    for variant in VARIANTS:
        for source in range(gpus):
            for destination in range(gpus):
                if source == destination:
                    continue
                speed = GBPS * (slow or {}).get((source, destination), 1.0)
                median = bytes_ / (speed * 1e9) * 1e3
                times = median * (1 + 0.002 * rng.standard_normal(samples))
                rows.append({"run_id": run_id, "experiment": NAME, "variant": variant, "direction": "peer",
                             "bytes": bytes_, "elements": ELEMENTS, "gpu_index": source, "gpu_uuid": uuid(node, source),
                             "peer_index": destination, "peer_uuid": uuid(node, destination), "link": "NVLink 4 ×18",
                             "median_ms": float(np.median(times)), "min_ms": float(times.min()),
                             "max_ms": float(times.max()), "cv": float(times.std() / times.mean()),
                             "samples": samples, "gbps": bytes_ / (float(np.median(times)) * 1e6),
                             "stop_reason": "converged", "timer": "cuda_event", "verified": True,
                             "throttled": False, "samples_ms": list(times)})
    provenance = {"device_name": MODEL, "driver_version": "570.86", "cuda_version": "12.8", "host": f"node-{node}",
                  "timestamp": timestamp, "profile": "precise", "git_commit": "abc1234", "backend": "live",
                  "pcie_gen": 5, "pcie_width": 16}
    return schema.make_frame(rows, provenance)
