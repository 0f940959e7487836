import numpy as np
import pytest

from gpu.core.errors import ValidationError, VerificationError
from gpu.core.limits import Limits
from gpu.core.units import GiB, KiB, MiB
from gpu.experiments import transfers
from gpu.sweeps import verify

H200 = Limits(free_device_bytes=139 * GiB, total_device_bytes=140 * GiB, pinned_budget_bytes=16 * GiB,
              host_available_bytes=120 * GiB, max_threads_per_block=1024, warp_size=32)


def reasons(limits=H200, **raw):
    return transfers.invalid_reasons(transfers.parse_params(raw), limits)


def test_defaults_are_valid_and_cover_4kib_to_1gib():
    params = transfers.parse_params({})
    assert params.sizes[0] == 4 * KiB and params.sizes[-1] == 1 * GiB and len(params.sizes) == 19
    assert transfers.invalid_reasons(params, H200) == []


def test_zero_negative_and_unaligned_sizes_are_explained():
    found = reasons(sizes=[0, -16, 1000, 4096])
    assert any("size 0 B must be at least 16 B" in r for r in found)
    assert any("size -16 B must be at least 16 B" in r for r in found)
    assert any("1000 B is not a multiple of 16 B" in r for r in found)
    assert len(found) == 3


def test_size_beyond_free_device_memory_names_the_limit():
    small = Limits(4 * GiB, 8 * GiB, 16 * GiB, 120 * GiB, 1024, 32)
    [reason] = reasons(small, sizes=[8 * GiB], modes=["pageable"])
    assert "does not fit in device memory" in reason and "4 GiB free" in reason and "3.75 GiB" in reason


def test_pinned_budget_applies_to_pinned_modes_only():
    budget = Limits(139 * GiB, 140 * GiB, 1 * GiB, 120 * GiB, 1024, 32)
    assert reasons(budget, sizes=[2 * GiB], modes=["pageable"]) == []
    [reason] = reasons(budget, sizes=[2 * GiB], modes=["pinned"])
    assert "pinned-memory budget of 1 GiB" in reason and "PINPOINT_PINNED_BUDGET_BYTES" in reason


def test_host_memory_for_pattern_buffer_and_readback():
    host = Limits(139 * GiB, 140 * GiB, 64 * GiB, 5 * GiB, 1024, 32)
    [reason] = reasons(host, sizes=[2 * GiB], modes=["pageable"])
    assert "needs 6 GiB of host memory" in reason


def test_unknown_modes_directions_profiles_and_empty_choices():
    found = reasons(modes=["turbo"], directions=["sideways"], profile="fast")
    assert any("unknown memory mode 'turbo'" in r for r in found)
    assert any("unknown direction 'sideways'" in r for r in found)
    assert any("unknown profile 'fast'" in r for r in found)
    found = reasons(modes=[], directions=[], sizes=[])
    expected = {"choose at least one size", "choose at least one memory mode", "choose at least one direction"}
    assert expected <= set(found)


def test_parse_params_rejects_non_numbers_and_unknown_keys():
    with pytest.raises(ValidationError, match="whole numbers"):
        transfers.parse_params({"sizes": ["big"]})
    with pytest.raises(ValidationError, match="unknown parameter"):
        transfers.parse_params({"size": [4096]})


def test_points_enumerate_every_combination():
    params = transfers.parse_params({"sizes": [4096, 8192], "include_alloc": [True, False]})
    points = list(params.points())
    assert len(points) == 2 * 4 * 2 * 2 and len(set(points)) == len(points)


def test_slider_maximum_is_the_largest_power_of_two_that_fits_everywhere():
    assert transfers.max_size(H200) == 16 * GiB
    assert transfers.max_size(Limits(2 * GiB, 4 * GiB, 16 * GiB, 120 * GiB, 1024, 32)) == 1 * GiB
    assert transfers.max_size(Limits(139 * GiB, 140 * GiB, 16 * GiB, 5 * GiB // 2, 1024, 32)) == 512 * MiB


def test_pattern_detects_dropped_swapped_and_repeated_chunks():
    pattern = verify.pattern_for(1024, seed=7)
    assert len(np.unique(pattern)) == 1024  # every word differs, so any misplacement shows
    swapped = pattern.copy()
    swapped[[10, 20]] = swapped[[20, 10]]
    with pytest.raises(VerificationError, match="2 of 1024 words wrong, first at word 10"):
        verify.verify_equal(pattern, swapped, "pinned H2D 4 KiB")
    with pytest.raises(VerificationError, match="got 512 elements"):
        verify.verify_equal(pattern, pattern[:512], "x")
    verify.verify_equal(pattern, pattern.copy(), "x")
    assert not np.array_equal(verify.pattern_for(1024, 7), verify.pattern_for(1024, 8))


@pytest.mark.parametrize("count,offset", [(3 << 20, 0), (3 << 20, 1), (3 << 20 | 1, 0)])
def test_verification_finds_one_wrong_word_deep_in_a_large_result(count, offset):
    """Sliced, 64-bit-wide comparison: a single wrong word in a later slice, at odd positions and odd sizes, and
    in arrays not 8-byte aligned, is still found and named."""
    backing = verify.pattern_for(count + offset, seed=3)
    expected = backing[offset:]
    actual = expected.copy()
    actual[count - 2] ^= np.uint32(1)
    with pytest.raises(VerificationError, match=f"1 of {count} words wrong, first at word {count - 2}"):
        verify.verify_equal(expected, actual, "x")
    verify.verify_equal(expected, expected.copy(), "x")


def test_patterns_of_two_seeds_differ_in_every_word():
    """What the GPU-side check relies on: a destination prefilled with another seed's pattern cannot pass for the
    expected one in any word a copy failed to write (the kernels compute the same words as pattern_for)."""
    n = 1 << 20
    assert np.all(verify.pattern_for(n, 0x12345678) != verify.pattern_for(n, 0x9E3779B9 + 0x12345678))


@pytest.mark.parametrize("count", [1, 5, (1 << 20) - 1, 1 << 20, 3 * (1 << 20) + 7])
@pytest.mark.parametrize("seed", [0, 0xDEADBEEF, 0x9E3779B9 * 5 & 0xFFFFFFFF])
def test_the_cpus_pattern_is_pattern_for_in_every_word_and_checks_whole(count, seed):
    """Pageable host memory gets its pattern from the CPU, in slices (write_pattern), and is checked there
    (check_pattern): the words are pattern_for's (the kernels' words) at every position, slice edges included."""
    host = np.ones(count, np.uint32)
    verify.write_pattern(host, seed)
    assert np.array_equal(host, verify.pattern_for(count, seed))
    verify.check_pattern(host, seed, "x")


def test_the_cpus_check_counts_every_wrong_word_and_names_the_first():
    count = 3 * (1 << 20) + 7
    host = verify.pattern_for(count, 11)
    host[(1 << 20) + 5] ^= np.uint32(1)
    host[count - 1] = 0
    expected = f"0x{int(verify.pattern_for(count, 11)[(1 << 20) + 5]):08x}"
    with pytest.raises(VerificationError, match=rf"pageable \(NumPy\) D2H 12 MiB: 2 of {count} words wrong, first "
                                                rf"at word {(1 << 20) + 5} \(expected {expected}, got 0x"):
        verify.check_pattern(host, 11, "pageable (NumPy) D2H 12 MiB")
    with pytest.raises(VerificationError, match=f"{count} of {count} words wrong, first at word 0"):
        verify.check_pattern(verify.pattern_for(count, 12), 11, "x")  # another seed's pattern: no word passes
