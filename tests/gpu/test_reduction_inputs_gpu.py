"""The reduction's inputs made on the GPU (pytest -m gpu on the GPU machine): the generator kernel's vectors equal the
host formula (gpu/experiments/reduction/inputs.py) everywhere, whole vectors at 2^20 and 2^24; the reference kernels'
integer dot equals NumPy's int64 dot exactly and their float64 dot is within 1e-12 relative of the exact products'
``math.fsum``; every variant passes in the same run; a wrong generator or a wrong reference fails the job naming the
seed. The sweep runs through the harness on GPU 0, in a process of its own per test (as every GPU path runs in a
worker): a CUDA context left in the test process stays listed by NVML as a compute process, and the witness's GPU
tests that follow would rightly name it as a foreign process."""

from __future__ import annotations

import math
import multiprocessing

import numpy as np
import pytest

from gpu.core.errors import VerificationError
from gpu.experiments import reduction
from gpu.experiments.reduction import inputs
from gpu.experiments.reduction import sweep as reduction_sweep
from gpu.service.client import main_module_hidden
from gpu.sweeps import harness

pytestmark = pytest.mark.gpu

SIZES = [1 << 20, 1 << 24]
CHECK_TIMEOUT_S = 120  # each check takes about 1 s alone
STACKS_AFTER_S = 90  # a check still running then writes every thread's stack, which a time-out failure shows


def in_own_process(check, tmp_path) -> None:
    """``check(gpu)`` in a spawned process that owns GPU 0's context and exits with it; its failure is raised here.

    The check's outcome comes back as text: a failed ``pytest.raises`` is a BaseException, which would kill a pool's
    worker and leave ``apply`` waiting for ever, and the time limit makes any other hang a failure too, one that shows
    where the check's process stood."""
    stacks = tmp_path / "stacks.txt"
    # A page test's AppTest leaves app.py installed as this process's __main__, which a spawned child runs first: it
    # started a worker while bootstrapping and died, for ever (the whole suite's hang). Hidden as the app's are.
    with main_module_hidden(), multiprocessing.get_context("spawn").Pool(1) as pool:
        try:
            failure = pool.apply_async(_run_check, (check.__name__, str(stacks))).get(timeout=CHECK_TIMEOUT_S)
        except multiprocessing.TimeoutError:
            where = stacks.read_text() if stacks.exists() else "(no stacks written)"
            pytest.fail(f"{check.__name__} did not finish in {CHECK_TIMEOUT_S} s; its process stood here after "
                        f"{STACKS_AFTER_S} s:\n{where}", pytrace=False)
    if failure:
        pytest.fail(f"{check.__name__} failed in its own process:\n{failure}", pytrace=False)


def _run_check(name: str, stacks: str) -> str:
    """Run the check; '' when it passed, else its traceback (whatever it raised, BaseException included)."""
    import faulthandler
    import traceback

    from gpu.device.context import GpuRuntime

    dump = open(stacks, "w")  # noqa: SIM115 - open until the check ends, for faulthandler's timer
    faulthandler.dump_traceback_later(STACKS_AFTER_S, file=dump)
    try:
        runtime = GpuRuntime(0)
        try:
            globals()[name](runtime)
        finally:
            runtime.close()
    except BaseException:  # noqa: B036 - pytest's Failed is a BaseException: reported, never lost with the worker
        return traceback.format_exc()
    finally:
        faulthandler.cancel_dump_traceback_later()
        dump.close()
    return ""


def run(declaration, gpu, raw):
    params = reduction.parse_params({"block_sizes": [256], "profile": "interactive", **raw})
    return harness.run(declaration, params, gpu, lambda *a: None, lambda: False)


class Recording(reduction_sweep.ReductionSweep):
    """The sweep, keeping each pair as the device holds it once made, with the seed and the reference's answer."""

    made: list = []

    def reference_sum(self, n, seed, pair):
        value = super().reference_sum(n, seed, pair)
        vectors = [np.empty(n, np.float32) for _ in range(2)]
        for host, device in zip(vectors, (self.a, self.b), strict=True):
            self.cuda.memcpy_dtoh(host, device)
        Recording.made.append((n, seed, pair, value, vectors))
        return value


def test_the_device_vectors_are_the_formula_and_the_references_exact(tmp_path):
    in_own_process(vectors_are_the_formula_and_references_exact, tmp_path)


def vectors_are_the_formula_and_references_exact(gpu):
    Recording.made = []
    rows = run(Recording, gpu, {"sizes": SIZES})
    assert len(rows) == len(SIZES) * 7 and all(row["verified"] for row in rows)
    doubles = [row for row in rows if row["variant"] in ("shared_tree", "warp_shuffle", "grid_stride")]
    assert all(row["rel_error"] < 1e-5 for row in doubles)
    assert [(n, pair) for n, _, pair, _, _ in Recording.made] == [(n, p) for n in SIZES for p in (0, 1)]
    for n, seed, pair, value, (a, b) in Recording.made:
        for vector, got in zip((2 * pair, 2 * pair + 1), (a, b), strict=True):
            expected = inputs.values(seed, vector, np.arange(n))
            assert np.array_equal(got.view(np.uint32), expected.view(np.uint32)), (n, seed, vector)
        if pair == 0:
            exact = int(np.dot(a.astype(np.int64), b.astype(np.int64)))
            assert isinstance(value, int) and value == exact, (n, seed)
        else:
            exact = math.fsum((a.astype(np.float64) * b.astype(np.float64)).tolist())  # each product exact
            print(f"\n2^{n.bit_length() - 1}: float64 reference {value!r}, fsum {exact!r}, "
                  f"relative difference {abs(value - exact) / abs(exact):.1e}")
            assert abs(value - exact) <= 1e-12 * abs(exact), (n, seed, value, exact)
    assert len({seed for _, seed, _, _, _ in Recording.made}) == len(SIZES)  # each size its own seed


class WrongReference(reduction_sweep.ReductionSweep):
    def reference_sum(self, n, seed, pair):
        value = super().reference_sum(n, seed, pair)
        return value + 1 if pair == reduction_sweep.TERNARY_PAIR else value


class WrongGenerator(reduction_sweep.ReductionSweep):
    """A generator that writes another seed's vectors than the one it was given."""

    def fill(self, n, seed, pair):
        super().fill(n, seed ^ 1, pair)


def test_a_wrong_reference_fails_the_job_naming_the_seed(tmp_path):
    in_own_process(a_wrong_reference_fails, tmp_path)


def a_wrong_reference_fails(gpu):
    with pytest.raises(VerificationError, match=r"on -1/0/1 data .* \(inputs' seed 0x[0-9a-f]+\)"):
        run(WrongReference, gpu, {"sizes": [1 << 20], "variants": ["warp_shuffle"]})


def test_a_wrong_generator_fails_the_formula_check_naming_the_seed(tmp_path):
    in_own_process(a_wrong_generator_fails, tmp_path)


def a_wrong_generator_fails(gpu):
    wrong = r"seed 0x[0-9a-f]+\) are not what their formula gives: element [0-9,]+ of vector 0 "
    with pytest.raises(VerificationError, match=wrong):
        run(WrongGenerator, gpu, {"sizes": [1 << 20], "variants": ["warp_shuffle"]})
