"""A row's ``link`` text read (``gpu.core.schema``: the path between two GPUs in words, as a peer run records it:
"NVLink 4 ×18", "PCIe via host bridge", "through host (no peer access)"): its kind and NVLink count, and the words a
page shows for it. The Peers page's matrices and the is-this-normal NVLink limit both read a link here. No pandas."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gpu.core import text

NVLINK = re.compile(r"NVLink\s*(?P<generation>\d+)?\s*[×x]\s*(?P<count>\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Link:
    """A pair's path, as the run's ``link`` text names it."""

    text: str
    kind: str  # "NVLink 4", "PCIe via host bridge": what pairs are compared within
    count: int | None = None  # NVLinks between the two GPUs

    @property
    def short(self) -> str:
        """For a matrix cell: "NV18" (as nvidia-smi topo -m writes it), "PCIe", "host", else the first word."""
        if self.count:
            return f"NV{self.count}"
        lowered = self.text.lower()
        if "no peer" in lowered or lowered.startswith("through host"):
            return "host"
        if "pcie" in lowered:
            return "PCIe"
        return self.text.split(" ")[0][:8] if self.text else "?"

    @property
    def words(self) -> str:
        """"18 NVLinks (NVLink 4)", "18 NVLinks (NVLink 4) via NVSwitch", or the link's own text."""
        if self.count:
            generation = f" ({self.kind})" if self.kind != "NVLink" else ""
            switch = " via NVSwitch" if "nvswitch" in self.text.lower() else ""
            return text.count(self.count, "NVLink") + generation + switch
        return self.text or "link not named"


def link_of(value) -> Link:
    """The ``link`` text of a row, read: NVLink generation and count where it names them."""
    raw = "" if value is None or (isinstance(value, float) and math.isnan(value)) else " ".join(str(value).split())
    found = NVLINK.search(raw)
    if found:
        generation = found.group("generation")
        return Link(raw, f"NVLink {generation}" if generation else "NVLink", int(found.group("count")))
    return Link(raw, raw or "link not named")
