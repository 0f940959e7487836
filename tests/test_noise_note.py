"""The line under a live result that names the points above their profile's noise target."""

import pandas as pd

from gpu.present.noise import noisy_points


def streams_row(variant, direction, cv, host="pinned", profile="interactive", chunks=16):
    return {"experiment": "streams", "variant": variant, "direction": direction, "cv": cv, "profile": profile,
            "host_memory": host, "elements": 1 << 26, "chunks": chunks, "streams": 4, "issue_order": "staged",
            "intensity": 0, "median_ms": 5.3, "bytes": 1 << 29, "timer": "cuda_event_held"}


def transfers_row(variant, nbytes, cv, profile="interactive"):
    return {"experiment": "transfers", "variant": variant, "direction": "h2d", "bytes": nbytes, "cv": cv,
            "profile": profile, "include_alloc": False, "median_ms": 1.0, "timer": "cuda_event_held"}


def test_points_within_their_target_say_nothing():
    frame = pd.DataFrame([transfers_row("pinned", 1 << 26, 0.019), transfers_row("pinned", 1 << 26, 0.004,
                                                                                  profile="precise")])
    assert noisy_points(frame) is None
    assert noisy_points(pd.DataFrame()) is None


def test_the_target_is_each_points_own_profile():
    quick = transfers_row("pinned", 1 << 26, 0.01)  # within the quick profile's 2 %
    careful = transfers_row("mapped", 1 << 26, 0.01, profile="precise/timeout_s=1")  # above precise's 0.5 %
    line = noisy_points(pd.DataFrame([quick, careful]))
    assert line.startswith("1 point stopped above the 0.5 % noise target: 64 MiB mapped H2D (cv 1.0 %).")
    assert "pinned" not in line and line.endswith("Measure again, or read the spread.")  # already precise
    assert noisy_points(pd.DataFrame([{**careful, "profile": "interactive", "cv": 0.03}])).endswith(
        "Measure again, or choose the precise profile.")


def test_the_noisiest_device_side_points_are_named_and_both_directions_explained():
    frame = pd.DataFrame([streams_row("bidir_both", "both", 0.026), streams_row("pipeline", "round_trip", 0.031),
                          streams_row("bidir_h2d", "h2d", 0.021), streams_row("kernel_alone", "none", 0.024),
                          streams_row("serial", "round_trip", 0.010)])
    line = noisy_points(frame)
    assert line.startswith("4 points stopped above the 2 % noise target: pipeline 16 chunks, one stream per stage "
                           "(pinned, 256 MiB) (cv 3.1 %), H2D + D2H at once (pinned, 256 MiB) (cv 2.6 %), "
                           "all kernels alone, 16 chunks (pinned, 256 MiB) (cv 2.4 %)")
    assert line.index("cv 3.1 %") < line.index("cv 2.6 %") < line.index("cv 2.4 %")  # noisiest first
    assert "and 1 more." in line and "cv 2.1 %" not in line  # three named, the rest counted
    assert "both directions at once share the PCIe link" in line
    round_robin = {**streams_row("pipeline", "round_trip", 0.05), "issue_order": "depth_first", "intensity": 2048}
    assert noisy_points(pd.DataFrame([round_robin])).startswith(
        "1 point stopped above the 2 % noise target: pipeline 16 chunks × 4 streams depth-first (pinned, 256 MiB, "
        "intensity 2048) (cv 5.0 %).")


def test_host_side_points_are_counted_not_listed():
    frame = pd.DataFrame([transfers_row("pageable", 1 << 26, 0.15), transfers_row("pageable", 1 << 24, 0.09)])
    assert noisy_points(frame) == ("2 pageable, small or host-timed points are above the 2 % noise target: issue "
                                   "costs, the driver's staging and the host set their spread.")
    medium = pd.DataFrame([transfers_row("pinned", 1 << 20, 0.2)])  # a 1 MiB single copy: its issue cost spreads it
    assert noisy_points(medium).startswith("1 pageable, small or host-timed point is above the 2 % noise target")
    frame = pd.concat([frame, pd.DataFrame([transfers_row("pinned_wc", 1 << 25, 0.03)])])
    line = noisy_points(frame)
    assert line.startswith("1 point stopped above the 2 % noise target: 32 MiB pinned_wc H2D (cv 3.0 %).")
    assert line.endswith("2 pageable, small or host-timed points are above 2 % too: issue costs, the driver's "
                         "staging and the host set their spread.")


def test_a_profile_this_version_cannot_read_is_left_out_not_raised():
    frame = pd.DataFrame([transfers_row("pinned", 1 << 26, 0.5, profile="turbo"),
                          transfers_row("pinned", 1 << 26, 0.5, profile=None)])
    assert noisy_points(frame) is None
