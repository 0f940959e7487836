"""A stand-in declaration of the peer-to-peer experiment, for tests only, used where ``gpu/experiments/peers.py`` is
not present: the name, command, key columns and parameters that the fleet, the health suite and the link matrix read
(every ordered pair of a node's GPUs, and the node's host links), and nothing that measures.

``declared()`` registers it for one test (and removes it after); ``register()`` registers it for good, in the
processes a fleet test starts (the fleet command, the simulated GPU worker). Where the real declaration is
registered, both leave it as it is.
"""

from __future__ import annotations

import contextlib

from gpu.core.units import GiB, KiB, MiB
from gpu.experiments import axes, registry

NAME = "peers"
COMMAND, ORDER, PAGE = "peers", 99, "pages/transfers.py"
HELP = "every ordered pair of a node's GPUs: copy engine, SM copy, both ways, latency; and its host links"
TITLE = "Peer-to-peer copies between the GPUs of a node"
VARIANTS = ("ce_read", "ce_write", "sm_read", "sm_write", "ce_bidir", "latency", "h2d_all", "d2h_all", "h2d_alone",
            "d2h_alone")
HOST_VARIANTS = ("h2d_all", "d2h_all", "h2d_alone", "d2h_alone")  # one row per GPU, no peer
KEY_COLUMNS = ["variant", "gpu_index", "peer_index", "elements", "timer"]
AXES = (
    axes.Axis("sizes", "sizes", [256 * MiB], kind="sizes", low=4 * KiB, high=1 * GiB, unit="bytes"),
    axes.Axis("variants", "variants", ["ce_write", "ce_read"], values=VARIANTS, one="variant"),
    axes.Axis("methods", "methods", ["batched"], values=("single", "batched"), one="method"),
)
TIMERS = {"single": "cuda_event", "batched": "cuda_event_batched"}


class Params(axes.parameters(AXES)):
    def points(self):
        """Keys without the GPU indices (a node's pairs are known only on the node)."""
        for variant in self.variants:
            for size in self.sizes:
                for method in self.methods:
                    yield variant, None, None, size, TIMERS[method]


parse_params = axes.parser(Params)


def invalid_reasons(params: Params, limits) -> list[str]:
    return axes.reasons(params, limits)


def _module():
    import sys

    return sys.modules[__name__]


def _add() -> tuple | None:
    if NAME in registry.EXPERIMENTS:
        return None
    before = registry.REGISTRY
    entry = registry.Entry.of(_module())
    registry.REGISTRY = (*before, entry)
    registry.EXPERIMENTS[NAME] = _module()
    registry.BY_NAME[NAME] = entry
    registry.BY_COMMAND[COMMAND] = entry
    registry.PAGE_OF[NAME] = PAGE
    return before


def register() -> None:
    """For the rest of this process (a process that a fleet test starts)."""
    _add()


@contextlib.contextmanager
def declared():
    """For the duration of the block: registered, then removed as if it had never been."""
    before = _add()
    try:
        yield
    finally:
        if before is not None:
            registry.REGISTRY = before
            for table, key in ((registry.EXPERIMENTS, NAME), (registry.BY_NAME, NAME), (registry.BY_COMMAND, COMMAND),
                               (registry.PAGE_OF, NAME)):
                table.pop(key, None)
