"""Every kernel compiles for Ampere (sm_80) and Hopper (sm_90) with nvcc, no GPU needed."""

import shutil
import subprocess
from pathlib import Path

import pytest

KERNELS = sorted((Path(__file__).resolve().parent.parent / "gpu" / "kernels").glob("*.cu"))


def test_there_are_kernels():
    assert {k.stem for k in KERNELS} >= {"transfers", "health"}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) is not on PATH")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda p: p.name)
def test_kernel_compiles_without_spills(kernel, arch, tmp_path):
    done = subprocess.run(["nvcc", "--cubin", f"-arch={arch}", "-O3", "-Xptxas", "-v", "-o",
                           str(tmp_path / "k.cubin"), str(kernel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Used" in done.stderr  # ptxas reported resources for the kernels
    assert "bytes spill stores" not in done.stderr or " 0 bytes spill stores" in done.stderr
