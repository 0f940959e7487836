"""A GPU board's identity, decided in one place: its NVML UUID (``GPU-…``), or, for a row that names none (runs
recorded before PinPoint read UUIDs, or where NVML could not), "no UUID" with the run that measured it: such a run
stands for a board of its own, since nothing matches it to another run's board.

Every reader of results (Compare, check, the report, the fleet, the store, the pages) names boards through
``Board``; none builds or parses a "run <id>" string. A run may span several boards (a peer matrix of a node):
``run_boards`` gives every board a run's rows name, as devices (``gpu_uuid``) and as peers (``peer_uuid``).
Pure Python and pandas.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from gpu.core.devices import board_tail


def _uuid(value) -> str | None:
    """A UUID cell as text, None when empty (None, NaN, pd.NA, "")."""
    if isinstance(value, str):
        return value or None
    if value is None or pd.isna(value):
        return None
    return str(value)


@dataclass(frozen=True)
class Board:
    """One GPU board: ``uuid`` when the run named it, else None and ``run_id``, the run that stands for it."""

    uuid: str | None
    run_id: str | None = None

    @classmethod
    def of(cls, uuid, run_id=None) -> Board:
        """The board a row names: by its UUID when it has one (the run is then no part of its identity), else
        "no UUID" of ``run_id``."""
        named = _uuid(uuid)
        return cls(named) if named is not None else cls(None, None if run_id is None else str(run_id))

    @property
    def named(self) -> bool:
        """Whether the board is known by its UUID (and so matches the same board in other runs)."""
        return self.uuid is not None

    @property
    def tail(self) -> str:
        """Enough to tell boards apart in a row label: '4b1d07e2', or 'run r7 (no UUID)'."""
        return board_tail(self.uuid) if self.uuid is not None else f"run {self.run_id} (no UUID)"

    def words(self, host=None) -> str:
        """The board in a sentence: 'GPU 4b1d07e2 on node-3', or 'the GPU of run r7 (no UUID) on node-3'."""
        where = f" on {host}" if host else ""
        return f"GPU {self.tail}{where}" if self.named else f"the GPU of run {self.run_id} (no UUID){where}"

    def sort_key(self) -> tuple:
        return (not self.named, self.uuid or "", self.run_id or "")

    def __lt__(self, other: Board) -> bool:  # boards sort (pandas groups and sorts them): named first, by UUID
        return self.sort_key() < other.sort_key()

    def __str__(self) -> str:
        return self.uuid if self.named else f"no UUID (run {self.run_id})"


def row_board(row, column: str = "gpu_uuid") -> Board:
    """The board of a row (a dict or a pandas row) as device (``gpu_uuid``) or as peer (``peer_uuid``)."""
    return Board.of(row.get(column), row.get("run_id"))


def named_uuids(values) -> list[str]:
    """The distinct UUIDs among ``values`` (empty cells left out), in first-seen order."""
    return list(dict.fromkeys(u for u in map(_uuid, values) if u is not None))


def run_boards(frame) -> list[str]:
    """Every board a run's rows name by UUID, as devices and as peers, in first-seen order (not its first row's)."""
    values = []
    for column in ("gpu_uuid", "peer_uuid"):
        if column in frame.columns:
            values += list(frame[column])
    return named_uuids(values)


def one_board(frame) -> str | None:
    """The UUID of the one board a run was measured on; None when its rows name none, or several (a peer run)."""
    boards = run_boards(frame)
    return boards[0] if len(boards) == 1 else None
