"""Choosing the GPU and a fleet on the real GPUs of this machine (pytest -m gpu on the GPU machine)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu.experiments import suites
from gpu.fleet import run as fleet_run
from gpu.fleet.cluster import open_cluster, visible_gpus
from gpu.results.exchange.catalog import Catalog
from gpu.results.persistence.store import RunStore
from gpu.service.client import DEFAULT_SERVICE

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def nvidia_smi_uuids() -> list[str]:
    out = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True, text=True,
                         timeout=60)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def test_the_gpus_are_listed_with_the_uuids_nvidia_smi_gives():
    gpus = visible_gpus(DEFAULT_SERVICE)
    print("\n" + "\n".join(f"{g['index']} {g['name']} {g['uuid']} {g['pci_bus_id']}" for g in gpus))
    assert [g["uuid"] for g in gpus] == nvidia_smi_uuids()


def runner(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpu.bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_the_runner_measures_on_the_gpu_named_by_index_or_uuid_and_lists_them_for_a_missing_one(tmp_path):
    uuid = nvidia_smi_uuids()[0]
    for device in ("0", uuid[:12]):
        out = tmp_path / f"run_{device}.parquet"
        result = runner("reduction", "--sizes", "2^20", "--variants", "warp_shuffle", "--profile", "interactive",
                        "--device", device, "--no-store", "--out", str(out))
        assert result.returncode == 0, result.stderr
        from gpu.core import schema

        assert schema.read_results(out)["gpu_uuid"].iloc[0] == uuid  # kept once per run, put back on every row
    result = runner("reduction", "--device", "99", "--no-store")
    assert result.returncode == 2 and "no GPU '99' here; the GPUs are: 0 · " in result.stderr, result.stderr
    assert uuid[-8:] in result.stderr


def test_a_local_fleet_measures_every_gpu_here_and_stores_each_run_with_its_board(tmp_path):
    suite = suites.parse('profile = "interactive"\ntimeout_s = 120\n'
                         '[[run]]\nexperiment = "reduction"\n[run.params]\nsizes = [1048576]\n'
                         'variants = ["warp_shuffle"]\n[[run]]\nexperiment = "host_latency"\n[run.params]\n'
                         'sizes = [1048576]\nvariants = ["mapped"]\n', "quick.toml", "quick")
    catalog = Catalog(RunStore(f"sqlite:///{tmp_path}/runs.sqlite"))
    with open_cluster("local", DEFAULT_SERVICE) as client:
        result = fleet_run.run_fleet(client, suite, catalog, "gpu-test", DEFAULT_SERVICE,
                                     progress=fleet_run.Progress(io.StringIO()))
    print("\n" + fleet_run.summary(result))
    assert result.exit_code == 0 and result.runs_stored == 2 * len(nvidia_smi_uuids())
    runs = catalog.store.runs(fleet_id="gpu-test")
    assert sorted(set(runs["gpu_uuid"])) == sorted(nvidia_smi_uuids())
    for run_id in runs["run_id"]:
        assert catalog.load(run_id)["verified"].all()
