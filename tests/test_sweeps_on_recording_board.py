"""The memory experiments' sweeps on the recording board (tests/recording_board.py), through the harness, against
what the same cases did before their point grids were generated from their axes (recorded on main a3adf7a, before
the change, in ``recording_board_runs.json``): the same progress lines, the same driver calls point by point (buffers,
copies, launches, events, holds, frees, in order) and the same rows. A refactoring of how a sweep walks its points
or times them must leave all three as they were. The rows' digests are of the rows those sweeps made, each mapped by
axis name (``legacy.map_row``: ``param``/``param_value`` became ``stride``, ``copies_per_sample``…)
when the schema named its coordinates: the old sweeps' rows, so mapped, equal today's in every case.

To record again (only where a change of what is measured is meant): ``python -m tests.test_sweeps_on_recording_board``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpu.core.units import KiB, MiB
from gpu.experiments import device_copy, host_latency, managed, peers, pools, sweep_of
from tests.recording_board import differences, run_on_board, summary

STORED = Path(__file__).with_name("recording_board_runs.json")
EVERY_PEER_VARIANT = list(peers.VARIANTS)

# case: (declaration, raw parameters, GPUs on the board)
CASES = {
    "device_copy every copy and method": (device_copy, {"sizes": [2 * MiB, 4 * KiB, 1 * MiB, 64 * KiB]}, 1),
    "device_copy batched only, L2 and SM": (device_copy, {"sizes": [1 * MiB, 4 * KiB], "methods": ["batched"],
                                                          "variants": ["l2_copy", "sm_copy"]}, 1),
    "device_copy one size single": (device_copy, {"sizes": [1 * MiB], "methods": ["single"]}, 1),
    "peers defaults on 2 GPUs": (peers, {"sizes": [64 * KiB]}, 2),
    "peers every variant and method on 3 GPUs": (peers, {"sizes": [4 * KiB, 64 * KiB],
                                                         "variants": EVERY_PEER_VARIANT,
                                                         "methods": ["single", "batched"]}, 3),
    "peers sampled plan on 8 GPUs": (peers, {"sizes": [4 * KiB], "variants": EVERY_PEER_VARIANT}, 8),
    "peers whole matrix on 4 GPUs": (peers, {"sizes": [4 * KiB], "variants": ["sm_write", "latency", "ce_read"],
                                             "methods": ["single"]}, 4),
    "peers named pairs, latency and hosts": (peers, {"sizes": [4 * KiB, 8 * KiB], "pairs": ["1-0", "0-2"],
                                                     "variants": ["latency", "h2d_alone", "d2h_all"],
                                                     "methods": ["batched", "single"]}, 3),
    "host_latency both memories": (host_latency, {"sizes": [64 * KiB, 4 * KiB]}, 1),
    "host_latency device only": (host_latency, {"sizes": [512], "variants": ["device"]}, 1),
    "managed every case": (managed, {"sizes": [2 * MiB, 1 * MiB]}, 1),
    "managed resident after first touch": (managed, {"sizes": [1 * MiB], "variants": ["resident", "first_touch"]},
                                           1),
    "pools every way": (pools, {"sizes": [64 * KiB, 4 * KiB]}, 1),
    "pools pinned pooled alone": (pools, {"sizes": [4 * KiB], "variants": ["pinned_pooled"]}, 1),
}


def fresh(case: str) -> dict:
    declaration, raw, gpus = CASES[case]
    rows, log = run_on_board(sweep_of(declaration.NAME), declaration.parse_params(raw), gpus)
    return summary(rows, log)


@pytest.mark.parametrize("case", list(CASES))
def test_the_sweep_makes_the_same_calls_and_rows_as_before(case):
    stored = json.loads(STORED.read_text())[case]
    found = fresh(case)
    assert differences(stored, found) == [], case


if __name__ == "__main__":  # record the cases again
    STORED.write_text(json.dumps({case: fresh(case) for case in CASES}, indent=1) + "\n")
    print(f"recorded {len(CASES)} cases in {STORED}", file=sys.stderr)


@pytest.mark.parametrize("variants", [["resident"], ["device", "resident"]])
def test_managed_resident_alone_reads_the_data_the_host_wrote(variants):
    """Resident without a first touch or a prefetch before it: the host writes the buffer before it is migrated, so
    the kernel's checksum is the data's (a buffer never written summed to 0 and failed the job)."""
    rows, _ = run_on_board(sweep_of(managed.NAME), managed.parse_params({"sizes": [1 * MiB], "variants": variants}))
    assert [row["variant"] for row in rows] == variants and all(row["verified"] for row in rows)
