"""A board's identity (gpu.core.boards): its UUID, or "no UUID" with the run that stands for it; a run's boards are
every board its rows name, as devices and as peers."""

import math

import pandas as pd

from gpu.core.boards import Board, one_board, row_board, run_boards

UUID = "GPU-0818954e-aaaa-bbbb-cccc-00004b1d07e2"


def test_a_board_is_its_uuid_whatever_run_measured_it():
    assert Board.of(UUID, "r1") == Board.of(UUID, "r2") == Board(UUID)
    assert Board.of(UUID).named and Board.of(UUID).tail == "4b1d07e2" and str(Board.of(UUID)) == UUID
    assert Board.of(UUID).words("node-3") == "GPU 4b1d07e2 on node-3"


def test_a_missing_uuid_is_no_uuid_of_its_run_never_a_string_to_parse():
    for empty in (None, "", math.nan, pd.NA):
        board = Board.of(empty, "r7")
        assert not board.named and board.uuid is None and board.run_id == "r7"
    assert Board.of(None, "r7") != Board.of(None, "r8")  # two runs without a UUID are two boards
    assert Board.of(None, "r7").tail == "run r7 (no UUID)" and str(Board.of(None, "r7")) == "no UUID (run r7)"
    # a run id that looks like the old "run <id>" text is just a run id
    assert Board.of(None, "run 5") != Board.of("run 5") and Board.of("run 5").named


def test_boards_sort_named_first_and_serve_as_keys():
    boards = [Board.of(None, "b"), Board.of("GPU-2"), Board.of(None, "a"), Board.of("GPU-1")]
    assert sorted(boards) == [Board("GPU-1"), Board("GPU-2"), Board(None, "a"), Board(None, "b")]
    assert len({Board.of("GPU-1", "x"), Board.of("GPU-1", "y")}) == 1


def test_a_runs_boards_are_every_row_device_and_peer_not_its_first_rows():
    frame = pd.DataFrame({"run_id": ["r"] * 3, "gpu_uuid": ["GPU-0", "GPU-1", "GPU-1"],
                          "peer_uuid": ["GPU-1", "GPU-2", None]})
    assert run_boards(frame) == ["GPU-0", "GPU-1", "GPU-2"] and one_board(frame) is None
    assert one_board(frame.assign(gpu_uuid="GPU-0", peer_uuid=None)) == "GPU-0"
    assert one_board(frame.assign(gpu_uuid=None, peer_uuid=None)) is None
    assert row_board(frame.iloc[1], "peer_uuid") == Board("GPU-2")
