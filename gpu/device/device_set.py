"""Several GPUs held by one worker: a ``GpuRuntime`` per device, peer access between them, and each pair's link.

The worker's one thread owns every context. The first device's primary context stays current (so everything written
for one GPU runs unchanged on the first device of a set); ``activate(ordinal)`` pushes another device's context for
the body of a ``with`` and pops it after. Every PyCUDA object (buffer, stream, event) is made and freed with its own
device's context current: ``job_scope`` opens each device's allocation scope under that device's context and closes
them in reverse, each under its own.

Peer access is enabled once per ordered pair where ``Device.can_access_peer`` allows it; a pair it refuses is recorded
with the driver's words, and copies between such GPUs go through the host, labelled so (``link_text``).

A pair's link comes from NVML: the NVLinks between the two boards (their count and version, from
``nvmlDeviceGetNvLinkState``, ``…RemotePciInfo`` and ``…Version`` on each of the source's links), else the PCIe path
through their common ancestor (``nvmlDeviceGetTopologyCommonAncestor``); empty without NVML. The functions that turn
NVML's answers into words take the NVML module as an argument, so tests give them a stand-in.
"""

from __future__ import annotations

import itertools
from contextlib import ExitStack, contextmanager, nullcontext

from gpu.core.devices import uuid_tail
from gpu.device.context import GpuRuntime

NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS
# nvmlGpuTopologyLevel_t: the closest point two GPUs' PCIe paths share.
PCIE_PATHS = {0: "PCIe on one board", 10: "PCIe via one switch", 20: "PCIe via several switches",
              30: "PCIe via host bridge", 40: "PCIe via host bridges of one NUMA node",
              50: "PCIe across CPU sockets"}
THROUGH_HOST = "through host (no peer access)"
# nvmlDeviceGetNvLinkVersion answers an nvmlNvlinkVersion_t: 6 is NVLink 4.0 (an H100 answers 6), 7 NVLink 5.0.
NVLINK_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5}
NVLINK_TO_SWITCH = 2  # nvmlDeviceGetNvLinkRemoteDeviceType: NVML_NVLINK_DEVICE_TYPE_SWITCH


def gpu_name(ordinal: int, name: str | None, uuid: str | None) -> str:
    """A GPU in running text: "GPU 1 (NVIDIA H100 80GB HBM3, …4b1d07e2)"."""
    return f"GPU {ordinal} ({name or 'unknown model'}, {uuid_tail(uuid)})"


def ordered_pairs(ordinals) -> list[tuple[int, int]]:
    """Every ordered pair of two different GPUs (source, destination), sources in the given order."""
    return [(a, b) for a, b in itertools.permutations(list(dict.fromkeys(ordinals)), 2)]


# --- links from NVML -------------------------------------------------------------------------------------------------
def _pci_key(bus_id) -> tuple | None:
    """A PCI bus id in one form ("00000000:1B:00.0" and "0000:1b:00.0" are the same device)."""
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode(errors="replace")
    if not isinstance(bus_id, str) or bus_id.count(":") != 2:
        return None
    domain, bus, rest = bus_id.strip().lower().split(":")
    try:
        device, function = rest.split(".")
        return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
    except ValueError:
        return None


def nvml_link(nvml, handle, peer_handle, peer_bus_id: str) -> dict:
    """What joins two GPUs, read from NVML (``nvml`` the pynvml module or a stand-in): ``{"nvlinks": n, "version": v}``
    when the source has active NVLinks to the peer, else ``{"pcie_level": level}`` (an nvmlGpuTopologyLevel_t), else
    ``{}`` when NVML cannot tell.

    A link leads to the peer when its far end's PCI address is the peer's. In a virtual machine the far ends carry the
    host's addresses, not the guest's (or none: FFFFFFFF:FF:FF.0): there, when NVML reports NVLink peer-to-peer between
    the two GPUs and all of the source's active links lead to one far end, those links are the peer's; several far
    ends give every active link counted. ``"switched"``: the links end at an NVSwitch (an HGX board), which every pair
    of its GPUs shares. ``version`` is the NVLink generation (NVML answers an nvmlNvlinkVersion_t)."""
    if nvml is None or handle is None or peer_handle is None:
        return {}
    wanted = _pci_key(peer_bus_id)
    to_peer, far_ends, switched = [], {}, False
    for link in range(NVLINK_MAX_LINKS):
        try:
            if not nvml.nvmlDeviceGetNvLinkState(handle, link):
                continue
            remote = _remote_pci(nvml, handle, link)
        except Exception:  # a link index past the board's last link, or NVLink not supported at all
            continue
        try:
            version = NVLINK_GENERATION.get(int(nvml.nvmlDeviceGetNvLinkVersion(handle, link)))
        except Exception:
            version = None
        try:
            switched |= int(nvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link)) == NVLINK_TO_SWITCH
        except Exception:
            pass
        key = _pci_key(getattr(remote, "busId", None) or getattr(remote, "busIdLegacy", None))
        if wanted is not None and key == wanted:
            to_peer.append(version)
        else:
            far_ends.setdefault(key, []).append(version)
    if not to_peer and far_ends and _nvlink_peer(nvml, handle, peer_handle):
        if len(far_ends) == 1:
            to_peer = next(iter(far_ends.values()))
        else:
            versions = [v for vs in far_ends.values() for v in vs if v]
            return {"nvlinks": sum(map(len, far_ends.values())), "version": max(versions, default=None),
                    "switched": True}
    if to_peer:
        versions = [v for v in to_peer if v]
        return {"nvlinks": len(to_peer), "version": max(versions, default=None), "switched": switched}
    try:
        return {"pcie_level": int(nvml.nvmlDeviceGetTopologyCommonAncestor(handle, peer_handle))}
    except Exception:
        return {}


def _remote_pci(nvml, handle, link):
    reader = getattr(nvml, "nvmlDeviceGetNvLinkRemotePciInfo_v2", None) or nvml.nvmlDeviceGetNvLinkRemotePciInfo
    return reader(handle, link)


def _nvlink_peer(nvml, handle, peer_handle) -> bool:
    """NVML's word that the two GPUs do peer-to-peer over NVLink (nvmlDeviceGetP2PStatus, NVLink capability)."""
    try:
        index = getattr(nvml, "NVML_P2P_CAPS_INDEX_NVLINK", 2)
        return nvml.nvmlDeviceGetP2PStatus(handle, peer_handle, index) == getattr(nvml, "NVML_P2P_STATUS_OK", 0)
    except Exception:
        return False


def link_text(link: dict, peer_access: bool) -> str:
    """A pair's link in words: "NVLink 4 ×18", "NVLink 4 ×18 via NVSwitch", "PCIe via host bridge", "through host
    (no peer access)"; empty when NVML could not tell and peer access works."""
    if not peer_access:
        return THROUGH_HOST
    if link.get("nvlinks"):
        version = f" {link['version']}" if link.get("version") else ""
        return f"NVLink{version} ×{link['nvlinks']}" + (" via NVSwitch" if link.get("switched") else "")
    if "pcie_level" in link:
        return PCIE_PATHS.get(link["pcie_level"], f"PCIe (topology level {link['pcie_level']})")
    return ""


class DeviceSet:
    """One ``GpuRuntime`` per GPU of the set, in the order given; the first is the set's primary device, whose context
    stays current. Build it, use it and close it on one thread."""

    def __init__(self, ordinals, runtime_class=None):
        ordinals = list(dict.fromkeys(int(o) for o in ordinals))
        if not ordinals:
            raise ValueError("a device set needs at least one GPU")
        make = runtime_class or GpuRuntime
        self.runtimes = {}
        for position, ordinal in enumerate(ordinals):
            # Each runtime pushes its context while it compiles; all but the first are popped again, so the first
            # device's context is the one current between activations.
            self.runtimes[ordinal] = make(ordinal, stay_current=position == 0)
        self.peer_access: dict[tuple[int, int], bool] = {}
        self.peer_refusals: dict[tuple[int, int], str] = {}
        self.links: dict[tuple[int, int], dict] = {}
        if len(ordinals) > 1:
            self._enable_peer_access()
            self._read_links()

    @classmethod
    def of(cls, runtime) -> DeviceSet:
        """A set of one runtime that already exists (its context current): what every one-GPU caller passes."""
        found = cls.__new__(cls)
        found.runtimes = {int(getattr(runtime, "device_ordinal", 0)): runtime}
        found.peer_access, found.peer_refusals, found.links = {}, {}, {}
        return found

    # --- what the set is ----------------------------------------------------------------------------------------
    @property
    def ordinals(self) -> list[int]:
        return list(self.runtimes)

    @property
    def first(self):
        """The primary device's runtime: what a one-GPU sweep measures on."""
        return next(iter(self.runtimes.values()))

    def __len__(self) -> int:
        return len(self.runtimes)

    def __contains__(self, ordinal) -> bool:
        return ordinal in self.runtimes

    def __getitem__(self, ordinal: int):
        return self.runtimes[ordinal]

    def name(self, ordinal: int) -> str:
        """"GPU 1 (NVIDIA H100 80GB HBM3, …4b1d07e2)"."""
        facts = getattr(self.runtimes[ordinal], "facts", {}) or {}
        return gpu_name(ordinal, facts.get("device_name"), facts.get("gpu_uuid"))

    def names(self) -> dict[int, str]:
        return {ordinal: self.name(ordinal) for ordinal in self.runtimes}

    def describe(self) -> str:
        """The set in a line: "2 GPUs: GPU 0 (…), GPU 1 (…)"."""
        return f"{len(self)} GPU{'s' if len(self) != 1 else ''}: " + ", ".join(self.names().values())

    def pairs(self) -> list[tuple[int, int]]:
        return ordered_pairs(self.ordinals)

    def can_peer(self, source: int, destination: int) -> bool:
        return bool(self.peer_access.get((source, destination)))

    def link(self, source: int, destination: int) -> str:
        """The pair's link in words (see ``link_text``)."""
        return link_text(self.links.get((source, destination), {}), self.can_peer(source, destination))

    def devices(self) -> list[dict]:
        """Every GPU of the set as the worker's hello reports it: index, UUID, name and its limits now."""
        found = []
        for ordinal, runtime in self.runtimes.items():
            with self.activate(ordinal):
                limits = runtime.limits().as_dict()
            found.append({"index": ordinal, "uuid": runtime.facts.get("gpu_uuid"),
                          "name": runtime.facts.get("device_name"), "limits": limits})
        return found

    # --- contexts -----------------------------------------------------------------------------------------------
    def activate(self, ordinal: int):
        """``with devices.activate(i):`` makes GPU i's context current for the body (nothing to do in a set of one,
        whose context is always current)."""
        if ordinal not in self.runtimes:
            raise KeyError(f"GPU {ordinal} is not in this set ({', '.join(map(str, self.ordinals))})")
        if len(self.runtimes) == 1:
            return nullcontext()
        return self.runtimes[ordinal].activate()

    def limits(self) -> dict:
        """Every device's ``Limits``, each read under its own context."""
        found = {}
        for ordinal, runtime in self.runtimes.items():
            with self.activate(ordinal):
                found[ordinal] = runtime.limits()
        return found

    @contextmanager
    def job_scope(self):
        """Every device's allocation scope for one job, as {ordinal: ledger}. Opened last-to-first, each under its
        own context, so the primary's context is current in the body and each scope closes (synchronize, free)
        under its own context."""
        if len(self.runtimes) == 1:
            ordinal, runtime = next(iter(self.runtimes.items()))
            with runtime.job_scope() as ledger:
                yield {ordinal: ledger}
            return
        ledgers = {}
        with ExitStack() as stack:
            for ordinal, runtime in reversed(list(self.runtimes.items())):
                stack.enter_context(runtime.activate())
                ledgers[ordinal] = stack.enter_context(runtime.job_scope())
            yield {ordinal: ledgers[ordinal] for ordinal in self.runtimes}

    def release_after_reply(self) -> None:
        for ordinal, runtime in self.runtimes.items():
            with self.activate(ordinal):
                runtime.release_after_reply()

    def close(self) -> None:
        """Close the secondary devices (each under its own context), then the primary, whose context is popped."""
        for runtime in reversed(list(self.runtimes.values())[1:]):
            with runtime.activate():
                runtime.close(pop=False)
        self.first.close()

    # --- peer access and links ------------------------------------------------------------------------------------
    def _enable_peer_access(self) -> None:
        for source, destination in self.pairs():
            a, b = self.runtimes[source], self.runtimes[destination]
            if not a.device.can_access_peer(b.device):
                self.peer_access[(source, destination)] = False
                self.peer_refusals[(source, destination)] = (
                    f"the driver reports that {self.name(source)} cannot access {self.name(destination)}'s memory")
                continue
            with a.activate():
                try:
                    a.context.enable_peer_access(b.context)
                    self.peer_access[(source, destination)] = True
                except Exception as exc:  # already enabled (another set in this process) counts as enabled
                    enabled = "ALREADY_ENABLED" in str(exc).upper().replace(" ", "_")
                    self.peer_access[(source, destination)] = enabled
                    if not enabled:
                        self.peer_refusals[(source, destination)] = (
                            f"enabling peer access from {self.name(source)} to {self.name(destination)} failed: "
                            f"{exc}")

    def _read_links(self) -> None:
        for source, destination in self.pairs():
            a, b = self.runtimes[source].telemetry, self.runtimes[destination].telemetry
            self.links[(source, destination)] = nvml_link(a.nvml, a.handle, b.handle,
                                                          self.runtimes[destination].device.pci_bus_id())
