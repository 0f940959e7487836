"""A stand-in for pynvml: the NVML calls the telemetry and witness make, answering from plain attributes, so the
CPU tests can throttle a GPU, downtrain its PCIe link, raise error counters, add a foreign process, fail mid-run or
report garbage — without touching a GPU's settings."""

from __future__ import annotations

from types import SimpleNamespace


class NVMLError(Exception):
    def __init__(self, value: int, text: str = ""):
        super().__init__(text or f"NVML error {value}")
        self.value = value


class FakeNVML:
    """One GPU as NVML shows it; change the attributes between (or during) points. ``reasons`` may be a list: one
    value per reading of the clock-event reasons, the last repeated. ``fail_after``: that many NVML calls answer,
    then every call raises (NVML failing mid-run). ``nvlink_links``: links up (none: "Not Supported", one GPU)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    NVML_ERROR_NOT_SUPPORTED = 3

    def __init__(self, **changes):
        self.sm_mhz, self.mem_mhz = 1980, 2619
        self.power_mw, self.limit_mw, self.temp_c = 382_000, 700_000, 40
        self.reasons: int | list = 0
        self.pids: list[int] = []
        self.util = (0, 0)
        self.pcie, self.pcie_max = (5, 16), (5, 16)
        self.replay, self.ecc = 1, [0, 0]
        self.nvlink_links: list[int] = []
        self.nvlink = {}  # (link, counter) → value
        self.fail_after: int | None = None
        self.calls = 0
        self._reason_reads = 0
        for name, value in changes.items():
            setattr(self, name, value)

    def _call(self):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise NVMLError(999, "GPU is lost")

    def nvmlInit(self):
        self._call()

    def nvmlDeviceGetHandleByPciBusId(self, bus_id):
        self._call()
        return "handle"

    def nvmlSystemGetDriverVersion(self):
        return "580.00"

    def nvmlDeviceGetClockInfo(self, handle, clock):
        self._call()
        return self.sm_mhz if clock == self.NVML_CLOCK_SM else self.mem_mhz

    def nvmlDeviceGetPowerUsage(self, handle):
        self._call()
        return self.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        self._call()
        return self.limit_mw

    def nvmlDeviceGetTemperature(self, handle, sensor):
        self._call()
        return self.temp_c

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        self._call()
        if isinstance(self.reasons, list):
            value = self.reasons[min(self._reason_reads, len(self.reasons) - 1)]
            self._reason_reads += 1
            return value
        return self.reasons

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        self._call()
        return [SimpleNamespace(pid=pid, usedGpuMemory=1 << 30) for pid in self.pids]

    def nvmlDeviceGetUtilizationRates(self, handle):
        self._call()
        return SimpleNamespace(gpu=self.util[0], memory=self.util[1])

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        self._call()
        return self.pcie[0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        self._call()
        return self.pcie[1]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        self._call()
        return self.pcie_max[0]

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        self._call()
        return self.pcie_max[1]

    def nvmlDeviceGetPcieReplayCounter(self, handle):
        self._call()
        return self.replay

    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter_type):
        self._call()
        return self.ecc[error_type]

    def nvmlDeviceGetNvLinkState(self, handle, link):
        self._call()
        if not self.nvlink_links:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED, "Not Supported")
        if link >= 18:
            raise NVMLError(2, "Invalid Argument")
        return int(link in self.nvlink_links)

    def nvmlDeviceGetNvLinkErrorCounter(self, handle, link, counter):
        self._call()
        return self.nvlink.get((link, counter), 0)

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        return 1980 if clock == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetUUID(self, handle):
        return "GPU-fake"
