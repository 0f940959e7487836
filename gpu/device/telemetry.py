"""NVML telemetry for one device: SM clock and slowdown reasons, sampled while PinPoint measures.

NVML (pynvml) is optional: without it the telemetry columns stay empty rather than failing a measurement.
"""

from __future__ import annotations

import math
import statistics
import time

try:
    import pynvml  # optional (requirements-gpu.txt); importing it touches no device
except ImportError:
    pynvml = None

# Clock-event reasons that mean the GPU slowed itself down (NVML nvmlClocksEventReason*):
# SW power cap, HW slowdown, SW thermal, HW thermal, HW power brake. Idle and app-clock settings are not.
_SLOWDOWN_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


class Telemetry:
    """NVML readings for one device: SM clock and slowdown reasons, sampled during measurements."""

    def __init__(self, pci_bus_id: str):
        self.nvml = None
        self.handle = None
        self.readings: list[tuple[float, int]] = []
        self._last = 0.0
        try:
            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
            self.nvml = pynvml
        except Exception:  # no pynvml, no NVML: telemetry columns stay empty rather than failing a measurement
            self.nvml = None

    def _call(self, name, *args, default=None):
        if self.nvml is None:
            return default
        try:
            return getattr(self.nvml, name)(self.handle, *args)
        except Exception:
            return default

    def static_facts(self) -> dict:
        nv = self.nvml
        facts = {"driver_version": None, "pcie_gen": None, "pcie_width": None, "sm_clock_max_mhz": None,
                 "mem_clock_max_mhz": None, "gpu_uuid": None}
        if nv is None:
            return facts
        try:
            version = nv.nvmlSystemGetDriverVersion()
            facts["driver_version"] = version.decode() if isinstance(version, bytes) else version
        except Exception:
            pass
        uuid = self._call("nvmlDeviceGetUUID")  # tells two boards of one model apart (older pynvml: bytes)
        facts["gpu_uuid"] = uuid.decode() if isinstance(uuid, bytes) else uuid
        facts["pcie_gen"] = self._call("nvmlDeviceGetMaxPcieLinkGeneration")
        facts["pcie_width"] = self._call("nvmlDeviceGetMaxPcieLinkWidth")
        facts["pcie_gen_current"] = self._call("nvmlDeviceGetCurrPcieLinkGeneration")
        facts["pcie_width_current"] = self._call("nvmlDeviceGetCurrPcieLinkWidth")
        facts["sm_clock_max_mhz"] = self._call("nvmlDeviceGetMaxClockInfo", nv.NVML_CLOCK_SM)
        facts["mem_clock_max_mhz"] = self._call("nvmlDeviceGetMaxClockInfo", nv.NVML_CLOCK_MEM)
        return facts

    def start_point(self) -> None:
        self.readings = []
        self._last = 0.0
        self.sample(force=True)

    def sample(self, force: bool = False) -> None:
        """Read the clock at most every 50 ms, so sampling never becomes the workload."""
        if self.nvml is None:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.05:
            return
        self._last = now
        clock = self._call("nvmlDeviceGetClockInfo", self.nvml.NVML_CLOCK_SM, default=0)
        reasons = self._call("nvmlDeviceGetCurrentClocksEventReasons", default=None)
        if reasons is None:
            reasons = self._call("nvmlDeviceGetCurrentClocksThrottleReasons", default=0)
        self.readings.append((float(clock), int(reasons)))

    def point_summary(self) -> dict:
        self.sample(force=True)
        if not self.readings:
            return {"sm_clock_mhz": math.nan, "throttled": None}
        return {
            "sm_clock_mhz": statistics.median(c for c, _ in self.readings),
            "throttled": any(r & _SLOWDOWN_MASK for _, r in self.readings),
        }
