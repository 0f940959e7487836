"""Every kernel compiles for Ampere (sm_80) and Hopper (sm_90) with nvcc, no GPU needed: the shared ones of
gpu/kernels/ and each experiment package's own (gpu/experiments/<name>/*.cu), as the worker finds them."""

import shutil
import subprocess

import pytest

from gpu.core import paths

KERNELS = sorted(paths.kernel_sources().values())


def test_there_are_kernels_shared_and_in_the_experiment_packages():
    assert {k.stem for k in KERNELS} >= {"transfers", "health", "coalescing"}
    assert {k.parent for k in KERNELS if k.stem == "coalescing"} == {paths.EXPERIMENTS / "coalescing"}
    assert all(k.parent == paths.KERNELS or k.parent.parent == paths.EXPERIMENTS for k in KERNELS)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) is not on PATH")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda p: p.name)
@pytest.mark.slow
def test_kernel_compiles_without_spills(kernel, arch, tmp_path):
    done = subprocess.run(["nvcc", "--cubin", f"-arch={arch}", "-O3", f"-I{paths.KERNELS}", "-Xptxas", "-v", "-o",
                           str(tmp_path / "k.cubin"), str(kernel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Used" in done.stderr  # ptxas reported resources for the kernels
    assert "bytes spill stores" not in done.stderr or " 0 bytes spill stores" in done.stderr


def ptx_entry(ptx: str, name: str) -> str:
    start = ptx.index(f".entry {name}(")
    return ptx[start:ptx.index("\n}", start)]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) is not on PATH")
def test_the_coalescing_reads_do_no_arithmetic_that_the_contiguous_reference_lacks(tmp_path):
    """The strided and misaligned reads are judged against copy_f32: their index arithmetic must stay a few integer
    operations (a runtime 64-bit division made stride 1 read 12 % slower than copy_f32 on an H200), with one global
    load and one store per thread, like the reference's."""
    source = next(k for k in KERNELS if k.stem == "coalescing")
    done = subprocess.run(["nvcc", "--ptx", "-arch=sm_90", "-O3", "-o", str(tmp_path / "k.ptx"), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    for name in ("copy_f32", "strided_read", "offset_read"):
        body = ptx_entry(ptx, name)
        assert not [op for op in ("div.", "rem.", "call") if op in body], (name, body)
        assert body.count("ld.global") == 1 and body.count("st.global") == 1, (name, body)
