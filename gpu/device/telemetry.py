"""NVML telemetry for one device: SM clock and slowdown reasons, sampled while PinPoint measures, and the witness
(``gpu.device.witness``) that gives each point its ``conditions`` and ``witness`` columns.

NVML (pynvml) is optional: without it the telemetry columns stay empty and points are ``not observed`` rather than
failing a measurement.
"""

from __future__ import annotations

import math
import statistics
import time

from gpu.device import witness

try:
    import pynvml  # optional (requirements-gpu.txt); importing it touches no device
except ImportError:
    pynvml = None

_SLOWDOWN_MASK = witness.SLOWDOWN_MASK


class Telemetry:
    """NVML readings for one device: SM clock and slowdown reasons, sampled during measurements."""

    def __init__(self, pci_bus_id: str, nvml=None):
        """``nvml``: the pynvml module (the default) or a stand-in with its functions."""
        self.nvml = None
        self.handle = None
        self.readings: list[tuple[float, int]] = []
        self._last = 0.0
        module = nvml if nvml is not None else pynvml
        why = ""
        try:
            module.nvmlInit()
            self.handle = module.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
            self.nvml = module
        except Exception as exc:  # no pynvml, no NVML: telemetry columns stay empty rather than failing a measurement
            self.nvml = None
            why = "pynvml not installed" if module is None else f"NVML did not start ({type(exc).__name__})"
        if not witness.enabled():
            self.witness = witness.Witness(None, None, unavailable="witness off (PINPOINT_WITNESS=0)")
        else:
            self.witness = witness.Witness(self.nvml, self.handle, unavailable=why)

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
        self.witness.begin()

    def now(self) -> dict:
        """The witness's latest reading (a live conditions strip); {} when nothing was read."""
        return self.witness.now()

    def sample(self, force: bool = False) -> None:
        """Read the clock at most every 50 ms, so sampling never becomes the workload."""
        if self.nvml is None:
            return
        now = time.perf_counter()
        if not force and now - self._last < 0.05:
            return
        self.witness.touch()
        self._last = now
        clock = self._call("nvmlDeviceGetClockInfo", self.nvml.NVML_CLOCK_SM, default=0)
        reasons = self._call("nvmlDeviceGetCurrentClocksEventReasons", default=None)
        if reasons is None:
            reasons = self._call("nvmlDeviceGetCurrentClocksThrottleReasons", default=0)
        try:
            self.readings.append((float(clock), int(reasons)))
        except (TypeError, ValueError):  # a reading that is no number is no reading
            pass

    def point_summary(self) -> dict:
        """The point's telemetry columns: median SM clock, throttled, and the witness's conditions and readings."""
        self.sample(force=True)
        seen = self.witness.end()
        clocks = [c for c, _ in self.readings if c > 0]
        if not self.readings:
            return {"sm_clock_mhz": math.nan, "throttled": None, **seen}
        return {
            "sm_clock_mhz": statistics.median(clocks) if clocks else math.nan,
            "throttled": any(r > 0 and r & _SLOWDOWN_MASK for _, r in self.readings),
            **seen,
        }
