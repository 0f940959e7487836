"""A fleet through dask-jobqueue's SLURMCluster on a real one-node Slurm (slurmctld + slurmd + munged, started
here from Debian's packages like the PostgreSQL server of the store tests): one job for the node, one Dask worker
per (simulated) GPU, each taking the GPU at its place among the job's workers."""

from __future__ import annotations

import subprocess

import pytest

from gpu.results.persistence.store import RunStore
from tests.simulated_fleet import board_uuid
from tests.slurm_cluster import OneNodeSlurm, unavailable_reason
from tests.test_fleet import FLEET, environment

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    cluster = OneNodeSlurm(tmp_path_factory.mktemp("slurm")).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def installed():
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)


# These two start their own Slurm: they run before the module's one is started (pytest runs a file in order).

def test_stopping_the_one_node_slurm_ends_its_daemons_munged_included(tmp_path, installed):
    cluster = OneNodeSlurm(tmp_path).start()
    running = cluster.daemon_pids()
    assert len(running) >= 3, running  # munged, slurmctld, slurmd
    cluster.stop()
    assert cluster.daemon_pids() == []


def test_a_one_node_slurm_that_fails_to_start_leaves_no_daemon(tmp_path, monkeypatch, installed):
    def never_idle(self, timeout: float = 60):
        raise RuntimeError("the one-node Slurm did not come up")

    monkeypatch.setattr(OneNodeSlurm, "_wait_until_idle", never_idle)
    cluster = OneNodeSlurm(tmp_path)
    with pytest.raises(RuntimeError, match="did not come up"):
        cluster.start()
    assert cluster.daemon_pids() == []


def test_a_fleet_runs_through_slurm_one_job_per_node_one_worker_per_gpu(slurm, tmp_path):
    url = f"sqlite:///{tmp_path}/runs.sqlite"
    # Slurm with GPUs as a generic resource hands a job its node's GPUs in CUDA_VISIBLE_DEVICES; here the
    # submitting environment carries them to the job (sbatch --export=ALL), as this node has no GPU to give.
    env = environment(PINPOINT_DB_URL=url, CUDA_VISIBLE_DEVICES="0,1", SLURM_CONF=slurm.conf,
                      PINPOINT_SIM_SLOW="1:1.2")
    result = subprocess.run([*FLEET, "health", "--cluster", "slurm",
                             "--gpus-per-node", "2", "--no-gres", "--walltime", "00:10:00", "--fleet-id", "slurm-1"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)  # job logs land here
    assert result.returncode == 0, result.stderr
    # five runs on each GPU, then the node's peer matrix on both
    assert "worker SLURMCluster-" in result.stderr and "11 runs stored" in result.stdout
    runs = RunStore(url).runs(fleet_id="slurm-1")
    assert set().union(*runs["boards"]) == {board_uuid(0), board_uuid(1)} and len(runs) == 11
    assert (runs["source"] == "fleet").all() and (runs["suite"] == "health").all()

