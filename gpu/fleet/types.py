"""What a fleet is made of, and how its runs went: a GPU of the fleet (``FleetGpu``), a node (``FleetNode``), the
queue of suite runs both hold (``RunQueue``) and the fleet's result (``FleetResult``). The run (``gpu.fleet.run``), the
node runs (``gpu.fleet.nodes``) and the terminal view (``gpu.fleet.progress``) all read them, so they sit here, below
all three: none of those modules imports another for its types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpu.core import text
from gpu.core.devices import uuid_tail

if TYPE_CHECKING:
    from distributed import Future

    from gpu.experiments.suites import SuiteRun


class RunQueue:
    """What a GPU of the fleet and a node share: a queue of suite runs (``todo``, ``current``), those that failed and
    why the whole of it stopped (``lost``); its state in a word for the terminal view."""

    @property
    def state(self) -> str:
        if self.lost:
            return "failed"
        if self.current is not None:
            return f"measuring {self.current.experiment}"
        if self.todo:
            return "waiting"
        return "failed" if self.failed else "done"


@dataclass
class FleetNode(RunQueue):
    """One node of the fleet (the GPUs whose workers report one host, in the fleet's order) and how its node runs
    went."""

    host: str
    gpus: list[FleetGpu]
    todo: list[SuiteRun] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # stored by an earlier attempt of this fleet id
    no_peer: list[str] = field(default_factory=list)  # runs that need more GPUs than the node has
    failed: dict[str, str] = field(default_factory=dict)
    current: SuiteRun | None = None
    future: Future | None = None
    started: float = 0.0
    lost: str = ""
    worker: str = ""  # the Dask worker that runs its node runs

    def label(self) -> str:
        return f"{self.host} ({text.count(len(self.gpus), 'GPU')})"

    @property
    def uuids(self) -> list[str]:
        return [g.gpu_uuid for g in self.gpus]

    @property
    def gpus_finished(self) -> bool:
        """Every GPU of the node is through its one-GPU runs: its node runs may start."""
        return all(g.current is None and not g.todo for g in self.gpus)


@dataclass
class FleetGpu(RunQueue):
    """One GPU of the fleet, as its worker reported it, and how its runs went."""

    worker: str  # the Dask worker's address
    name: str = ""
    host: str = ""
    device_name: str = ""
    gpu_uuid: str | None = None
    todo: list[SuiteRun] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # stored by an earlier attempt of this fleet id
    failed: dict[str, str] = field(default_factory=dict)
    current: SuiteRun | None = None
    future: Future | None = None
    started: float = 0.0
    lost: str = ""  # why the whole GPU stopped (worker gone, hung), if it did

    def label(self) -> str:
        return f"{self.device_name or 'GPU'} {uuid_tail(self.gpu_uuid)} on {self.host or self.worker}"


@dataclass
class FleetResult:
    fleet_id: str
    suite: str
    gpus: list[FleetGpu]
    runs_stored: int = 0
    rows_sent: int = 0
    rows_stored: int = 0
    wall_s: float = 0.0
    problems: list[str] = field(default_factory=list)  # workers that never reported a GPU
    nodes: list[FleetNode] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        lines = list(self.problems)
        for unit in [*self.gpus, *self.nodes]:
            lines += [f"{unit.label()}: {reason}" for reason in unit.failed.values()]
            if unit.lost and not unit.failed:
                lines.append(f"{unit.label()}: {unit.lost}")
        return lines

    @property
    def exit_code(self) -> int:
        return 1 if self.failures else 0
