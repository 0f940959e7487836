"""The witness: what NVML shows about a GPU while PinPoint measures one point on it, read beside the workload.

NVML is read once before each point (utilisation, counters), on a background thread during it (at most every
``INTERVAL_S``: clocks, power, temperature, clock-event reasons, other compute processes, the PCIe link) and once
after it (counters again). Only NVML is read: the workload is never touched, and NVML calls release the GIL.

Each point gets ``conditions`` (words, through ``gpu.core.conditions``: ``clean`` or its causes) and ``witness``
(compact JSON of the raw readings). NVML is optional and untrusted: without it the point is ``not observed``; a call
that fails (other than "Not Supported", which a board may answer for NVLink or ECC) or a value no GPU reports
(negative clocks, unknown reason bits, absurd power) is a refused reading, named among the causes, so a point is
never called clean on readings that were not taken. No CUDA here. It holds one concern, over 400 lines: NVML's view of
one GPU around a point, from each reading to the point's words.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections import Counter

from gpu.core import conditions, gpu_workers
from gpu.core.errors import PinPointError

INTERVAL_S = 0.05  # the fastest the thread reads NVML during a point
IDLE_STOP_S = 2.0  # the thread stops this long after the last point ended (a job is over) …
POINT_STOP_S = 120.0  # … or this long into a point that never ended and never sampled (its job failed)
UTIL_WINDOW_S = 1.0  # NVML's utilisation covers up to its last second: PinPoint's own work must be older
BUSY_PERCENT = 50  # utilisation between points that names a busy GPU
MAX_NAMED_PROCESSES = 3  # foreign processes named one by one; more are counted
NVLINK_MAX_LINKS = 18
NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED: the board has no such counter (NVLink on one GPU, ECC off)
# A point's closing counters open the next point when it begins within this long: a count between the two readings
# falls in the next point's window, so nothing is lost, and a peer point skips its opening 72 NVLink calls (~40 ms on
# an H200, 2.6 s of a 4-GPU node's 64-point matrix). A longer gap (a job's end, an idle worker) reads them anew.
COUNTERS_REUSE_S = 1.0

# nvmlClocksEventReason* bits: the ones that slow a GPU down, by name; idle, application-clock and display-clock
# settings are no slowdown (the idle bit is set whenever nothing runs).
REASONS = {0x4: "SW power cap", 0x8: "HW slowdown", 0x10: "sync boost", 0x20: "SW thermal", 0x40: "HW thermal",
           0x80: "power brake"}
IGNORED_REASONS = 0x1 | 0x2 | 0x100
SLOWDOWN_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80  # the ``throttled`` column (sync boost is not a slowdown)
NVLINK_COUNTERS = {"crc": (2, 3), "replay": (0,), "recovery": (1,)}  # nvmlNvLinkErrorCounter_t: CRC flit + data
NVLINK_WORDS = {"crc": "CRC errors", "replay": "replays", "recovery": "recoveries"}
# What a GPU can report; a reading outside is garbage, refused.
BOUNDS = {"sm_mhz": (1, 10_000), "mem_mhz": (1, 20_000), "power_w": (0, 5_000), "limit_w": (1, 5_000),
          "temp_c": (-40, 150), "util": (0, 100), "pcie_gen": (1, 8), "pcie_width": (1, 32),
          "counter": (0, 2**62)}


def enabled() -> bool:
    """``PINPOINT_WITNESS=0`` turns the witness off (its cost measured against it is off): points are then not
    observed."""
    return os.environ.get("PINPOINT_WITNESS", "1").strip().lower() not in ("0", "off", "false", "no")


class Refused(PinPointError):
    """A reading NVML failed to give, or gave as a value no GPU reports."""


def process_name(pid: int) -> str:
    """A process's short name from /proc (its comm), made one plain line; '?' where it cannot be read."""
    try:
        with open(f"/proc/{int(pid)}/comm", encoding="utf-8", errors="replace") as f:
            name = f.read(64).strip()
    except OSError:
        return "?"
    name = "".join(c if c.isprintable() else "?" for c in name).replace(";", ",")
    return name[:32] or "?"


FIELD_WORDS = {"sm_mhz": "SM clock", "mem_mhz": "memory clock", "power_w": "power", "limit_w": "power limit",
               "temp_c": "temperature", "reasons": "clock-event reasons", "pids": "processes", "pcie": "PCIe link",
               "pcie_replay": "PCIe replays", "ecc": "ECC errors", "nvlink": "NVLink errors", "util": "utilisation"}


def _short(value: float):
    """A reading as the witness's JSON keeps it: whole numbers as integers, others to one decimal."""
    value = round(float(value), 1)
    return int(value) if value.is_integer() else value


def _spread(values: list[float]) -> list | None:
    if not values:
        return None
    return [_short(min(values)), _short(statistics.median(values)), _short(max(values))]


def _percent(count: int, total: int) -> int:
    return round(100 * count / total) if total else 0


class Witness:
    """NVML's view of one GPU around each point: ``begin()`` before it, ``end()`` after it (giving the point's
    ``conditions`` and ``witness`` columns), ``now()`` the latest reading for a live strip. ``nvml``: the pynvml
    module or a stand-in (None: nothing can be observed); ``handle``: the device's NVML handle."""

    def __init__(self, nvml, handle, own_pid: int | None = None, interval_s: float = INTERVAL_S,
                 unavailable: str = ""):
        self.nvml, self.handle = (nvml, handle) if handle is not None else (None, None)
        self.unavailable = unavailable or ("" if self.nvml else "NVML not available")
        self.own_pid = os.getpid() if own_pid is None else own_pid
        self.interval_s = interval_s
        # NVLink error counters name a cause only for a measurement whose data crosses NVLink (the harness sets this
        # from the experiment's USES_NVLINK): a node's links count corrected CRC errors all the time, which says
        # nothing about a copy inside one GPU; for such a measurement they are not read at all (``_counters``).
        self.judge_nvlink = True
        self._lock = threading.Lock()
        self._state = threading.Lock()
        self._samples: list[dict] = []
        self._refused: Counter = Counter()
        self._before: dict = {}
        self._reusable: tuple | None = None  # (counters, when read, judge_nvlink then) from the last point's end
        self._latest: dict = {}
        self._last_point_end: float | None = None
        self._last_activity = 0.0
        self._in_point = False
        self._thread: threading.Thread | None = None
        self._closed = False
        self._max_link = self._nvlinks = None
        self._limit_w = None
        self._names: dict[int, str] = {}
        self._waiting: set[int] = set()  # PinPoint workers NVML listed during the point: waiting their turn, no cause

    # --- reading NVML -------------------------------------------------------------------------------------------
    def _read(self, name: str, *args):
        """One NVML call on the device: its value, None for "Not Supported", Refused for any other failure."""
        try:
            return getattr(self.nvml, name)(self.handle, *args)
        except Exception as exc:
            if getattr(exc, "value", None) == getattr(self.nvml, "NVML_ERROR_NOT_SUPPORTED", NOT_SUPPORTED) \
                    or "NotSupported" in type(exc).__name__:
                return None
            raise Refused(f"{type(exc).__name__}: {exc}"[:80]) from None

    def _number(self, kind: str, value, scale: float = 1.0):
        if value is None:
            return None
        try:
            number = float(value) / scale
        except (TypeError, ValueError):
            raise Refused(f"{value!r:.40}") from None
        low, high = BOUNDS[kind]
        if not low <= number <= high:
            raise Refused(f"{number:g}")
        return number

    def _take(self, reading: dict, field: str, read, refused: Counter | None = None) -> None:
        """``reading[field]`` = ``read()``; a refusal is counted for the point under the field's name (in ``refused``
        when given, else the point's own count)."""
        refused = self._refused if refused is None else refused
        try:
            value = read()
        except Refused:
            refused[field] += 1
            return
        except Exception:  # a stand-in or binding that misbehaves in its own way: refused, never a traceback
            refused[field] += 1
            return
        if value is not None:
            reading[field] = value

    def _reasons(self):
        try:
            bits = self._read("nvmlDeviceGetCurrentClocksEventReasons")
        except Refused:
            bits = None
            if not hasattr(self.nvml, "nvmlDeviceGetCurrentClocksThrottleReasons"):
                raise
        if bits is None and hasattr(self.nvml, "nvmlDeviceGetCurrentClocksThrottleReasons"):
            bits = self._read("nvmlDeviceGetCurrentClocksThrottleReasons")
        if bits is None:
            return None
        bits = int(bits)
        if bits < 0:
            raise Refused(str(bits))
        return bits

    def _processes(self):
        listed = self._read("nvmlDeviceGetComputeRunningProcesses")
        if listed is None:
            return None
        pids = []
        for process in listed:
            pid = int(getattr(process, "pid", -1))
            if pid <= 0:
                raise Refused(f"pid {pid}")
            if pid != self.own_pid:
                pids.append(pid)
        if pids:  # PinPoint's other workers hold a context but measure only with the GPU's lock: idle, waiting
            waiting = gpu_workers.marked() & set(pids)
            if waiting:
                self._waiting.update(waiting)
                pids = [pid for pid in pids if pid not in waiting]
        return sorted(set(pids))

    def _pcie(self):
        gen = self._number("pcie_gen", self._read("nvmlDeviceGetCurrPcieLinkGeneration"))
        width = self._number("pcie_width", self._read("nvmlDeviceGetCurrPcieLinkWidth"))
        return None if gen is None or width is None else [int(gen), int(width)]

    def sample(self) -> dict:
        """One reading during a point (the thread's): clocks, power, temperature, reasons, processes, PCIe link."""
        nv, reading = self.nvml, {"t": time.monotonic()}
        self._take(reading, "sm_mhz", lambda: self._number("sm_mhz", self._read("nvmlDeviceGetClockInfo",
                                                                                  nv.NVML_CLOCK_SM)))
        self._take(reading, "mem_mhz", lambda: self._number("mem_mhz", self._read("nvmlDeviceGetClockInfo",
                                                                                    nv.NVML_CLOCK_MEM)))
        self._take(reading, "power_w", lambda: self._number("power_w", self._read("nvmlDeviceGetPowerUsage"), 1000))
        self._take(reading, "temp_c", lambda: self._number("temp_c", self._read("nvmlDeviceGetTemperature",
                                                                                  getattr(nv, "NVML_TEMPERATURE_GPU",
                                                                                          0))))
        self._take(reading, "reasons", self._reasons)
        self._take(reading, "pids", self._processes)
        self._take(reading, "pcie", self._pcie)
        return reading

    def _counters(self, refused: Counter | None = None) -> dict:
        """The counters whose change over a point is read: PCIe replays, volatile ECC errors, NVLink errors."""
        found: dict = {}
        self._take(found, "pcie_replay", lambda: self._number("counter", self._read("nvmlDeviceGetPcieReplayCounter")),
                   refused)

        def ecc():
            total = 0
            for error_type in (0, 1):  # corrected, uncorrected; volatile (since the driver loaded)
                value = self._number("counter", self._read("nvmlDeviceGetTotalEccErrors", error_type, 0))
                if value is None:
                    return None
                total += int(value)
            return total

        self._take(found, "ecc", ecc, refused)
        # NVLink's error counters are read only for a measurement whose data crosses NVLink (``judge_nvlink``): an
        # H200's 18 links cost 72 calls, ~50 ms a reading, twice a point (1.5 s of a health suite's transfers run),
        # for counts that name no cause of a copy inside one GPU. (NVML's field call would not help: an H200
        # refuses every NVLink error field.)
        if self.judge_nvlink:
            self._take(found, "nvlink", self._nvlink_counters, refused)
        return found

    def _active_links(self) -> list[int]:
        if self._nvlinks is None:
            links = []
            for link in range(NVLINK_MAX_LINKS):
                try:
                    if self._read("nvmlDeviceGetNvLinkState", link):
                        links.append(link)
                except Refused:
                    break  # past the board's last link
            self._nvlinks = links
        return self._nvlinks

    def _nvlink_counters(self):
        links = self._active_links()
        if not links:
            return None
        found = {}
        for link in links:
            counts = {}
            for name, counters in NVLINK_COUNTERS.items():
                values = [self._read("nvmlDeviceGetNvLinkErrorCounter", link, c) for c in counters]
                if any(v is None for v in values):
                    continue
                counts[name] = int(sum(self._number("counter", v) for v in values))
            if counts:
                found[str(link)] = counts
        return found or None

    def _before_point(self) -> dict:
        before = self._opening_counters()
        now = time.monotonic()

        def utilisation():
            rates = self._read("nvmlDeviceGetUtilizationRates")
            if rates is None:
                return None
            return [int(self._number("util", rates.gpu)), int(self._number("util", rates.memory))]

        self._take(before, "util", utilisation)
        # PinPoint's own last point must be out of NVML's utilisation window for the reading to be someone else's.
        before["util_counts"] = self._last_point_end is not None and now - self._last_point_end >= UTIL_WINDOW_S
        self._take(before, "limit_w", lambda: self._number("limit_w", self._read("nvmlDeviceGetEnforcedPowerLimit"),
                                                           1000))
        if self._max_link is None:
            self._max_pcie_link()
        return before

    def _opening_counters(self) -> dict:
        """The counters a point starts from: the last point's closing reading when it was whole (nothing refused),
        taken under the same ``judge_nvlink`` and at most ``COUNTERS_REUSE_S`` ago; else read now."""
        reusable, self._reusable = self._reusable, None
        if reusable is not None:
            counters, read_at, judged = reusable
            if judged == self.judge_nvlink and time.monotonic() - read_at <= COUNTERS_REUSE_S:
                return dict(counters)
        return self._counters()

    def _max_pcie_link(self) -> None:
        """The most the device and its slot allow (generation, width), read once."""
        link: dict = {}
        self._take(link, "max", lambda: [int(self._number("pcie_gen", self._read(
            "nvmlDeviceGetMaxPcieLinkGeneration"))), int(self._number("pcie_width", self._read(
                "nvmlDeviceGetMaxPcieLinkWidth")))])
        self._max_link = link.get("max") or []

    # --- a point --------------------------------------------------------------------------------------------------
    def begin(self) -> None:
        """A point starts: counters and utilisation read now, the thread samples until ``end``."""
        if self.nvml is None:
            return
        with self._lock:
            self._samples, self._refused = [], Counter()
        self._names.clear()  # a pid may be another process's by now
        self._waiting = set()
        before = self._before_point()
        first = self.sample()
        with self._lock:
            self._before, self._limit_w = before, before.get("limit_w")
            self._samples.append(first)
            self._latest = first
        self._in_point = True
        self._wake()

    def touch(self) -> None:
        """The measuring loop is still at work (it calls this between samples): keep reading."""
        if self.nvml is not None:
            self._wake()

    def _wake(self) -> None:
        with self._state:  # the thread decides to stop under the same lock: never just after this wake
            self._last_activity = time.monotonic()
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="pinpoint-witness", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        """Read every ``interval_s`` while points are measured; end once idle (the next point starts a new one)."""
        while True:
            with self._state:
                idle = time.monotonic() - self._last_activity
                if self._closed or idle > (POINT_STOP_S if self._in_point else IDLE_STOP_S):
                    self._thread = None
                    return
            try:
                reading = self.sample()
            except Exception:  # never let the thread die on a reading: the point says what was refused
                reading = None
            if reading is not None:
                with self._lock:
                    self._samples.append(reading)
                    self._latest = reading
            time.sleep(self.interval_s)

    def end(self) -> dict:
        """A point ends: its ``conditions`` and ``witness`` columns, from the readings since ``begin`` (or since the
        last ``end``, for sweeps that do not restart per point). The next point's window opens at once."""
        if self.nvml is None:
            return {"conditions": conditions.NOT_OBSERVED,
                    "witness": json.dumps({"observed": False, "why": self.unavailable or "witness off"},
                                          separators=(",", ":"))}
        if self._max_link is None:  # a sweep that does not restart per point: its first point began nowhere
            self._max_pcie_link()
        last = self.sample()
        missed: Counter = Counter()
        after = self._counters(missed)
        with self._lock:
            self._refused.update(missed)
            samples, refused, before = self._samples + [last], self._refused, self._before
            self._samples, self._refused, self._before = [], Counter(), after
            self._latest = last
        self._last_point_end = time.monotonic()
        self._reusable = None if missed else (after, self._last_point_end, self.judge_nvlink)
        self._in_point = False
        self._wake()
        return self.summarize(samples, refused, before, after)

    def close(self) -> None:
        with self._state:
            self._closed = True

    def now(self) -> dict:
        """The latest reading, small and plain (a live conditions strip): clocks, power against its limit,
        temperature, other processes with names, slowdown reasons by name."""
        with self._lock:
            reading, limit = dict(self._latest), self._limit_w
        if not reading:
            return {}
        return {"sm_mhz": reading.get("sm_mhz"), "mem_mhz": reading.get("mem_mhz"), "power_w": reading.get("power_w"),
                "limit_w": limit, "temp_c": reading.get("temp_c"),
                "others": [[pid, self._name(pid)] for pid in reading.get("pids", [])][:MAX_NAMED_PROCESSES + 1],
                "reasons": [word for bit, word in REASONS.items() if reading.get("reasons", 0) & bit]}

    def _name(self, pid: int) -> str:
        if pid not in self._names:
            if len(self._names) > 256:
                self._names.clear()
            self._names[pid] = process_name(pid)
        return self._names[pid]

    # --- words and raw readings -----------------------------------------------------------------------------------
    def summarize(self, samples: list[dict], refused: Counter, before: dict, after: dict) -> dict:
        """The point's ``conditions`` (causes in words, or clean, or not observed) and ``witness`` (JSON)."""
        answered = [s for s in samples if len(s) > 1]
        raw: dict = {"n": len(samples), "interval_ms": round(self.interval_s * 1000)}
        if samples:
            raw["span_ms"] = round(1000 * (samples[-1]["t"] - samples[0]["t"]))
        if not answered and not any(k in before for k in ("util", "pcie_replay", "ecc", "nvlink")):
            raw["refused"] = sorted(refused)
            return {"conditions": conditions.NOT_OBSERVED, "witness": json.dumps(raw, separators=(",", ":"))}
        causes: list[str] = []
        if self._waiting:  # kept for a reviewer: PinPoint workers beside this one, idle until they hold the GPU
            raw["pinpoint_waiting"] = sorted(self._waiting)[:8]
        # Other compute processes: each named with the share of readings that listed it.
        with_pids = [s for s in samples if "pids" in s]
        counted = Counter(pid for s in with_pids for pid in s["pids"])
        if counted:
            raw["pids"] = {str(pid): [self._name(pid), n] for pid, n in counted.most_common()[:8]}
            for pid, n in counted.most_common()[:MAX_NAMED_PROCESSES]:
                causes.append(f"shared with pid {pid} ({self._name(pid)}) for {_percent(n, len(with_pids))} % of "
                              "samples")
            if len(counted) > MAX_NAMED_PROCESSES:
                causes.append(f"shared with {len(counted) - MAX_NAMED_PROCESSES} more processes")
        # Clock-event reasons by name, unknown bits refused.
        with_reasons = [s["reasons"] for s in samples if "reasons" in s]
        seen = Counter()
        unknown = 0
        for bits in with_reasons:
            for bit, word in REASONS.items():
                if bits & bit:
                    seen[word] += 1
            unknown |= bits & ~(IGNORED_REASONS | sum(REASONS))
        if seen:
            raw["reasons"] = dict(seen)
        for word, n in seen.items():
            causes.append(f"{word} in {_percent(n, len(with_reasons))} % of samples")
        if unknown:
            raw["unknown_reason_bits"] = hex(unknown)
            causes.append(f"clock-event reasons refused (unknown bits {hex(unknown)})")
        # The PCIe link: the best seen during the point against the most the device and system allow.
        links = [tuple(s["pcie"]) for s in samples if "pcie" in s]
        if links:
            best = max(links)
            raw["pcie"] = [*best, *self._max_link] if self._max_link else list(best)
            if self._max_link and (best[0] < self._max_link[0] or best[1] < self._max_link[1]):
                causes.append(f"PCIe Gen{best[0]} ×{best[1]} of Gen{self._max_link[0]} ×{self._max_link[1]}")
        # Someone else busy while PinPoint was between points.
        if "util" in before:
            raw["util_before"] = before["util"]
            if before.get("util_counts") and max(before["util"]) >= BUSY_PERCENT:
                causes.append(f"GPU busy {before['util'][0]} % (memory {before['util'][1]} %) between points")
        for field in ("sm_mhz", "mem_mhz", "power_w"):
            spread = _spread([s[field] for s in samples if field in s])
            if spread:
                raw[field] = spread
        temps = [s["temp_c"] for s in samples if "temp_c" in s]
        if temps:
            raw["temp_c"] = [_short(min(temps)), _short(max(temps))]
        if "limit_w" in before:
            raw["limit_w"] = _short(before["limit_w"])
        causes += self._counter_causes(raw, before, after, self.judge_nvlink)
        if refused:
            raw["refused"] = dict(refused)
            causes.append("NVML readings refused: " + ", ".join(FIELD_WORDS.get(f, f) for f in sorted(refused)))
        return {"conditions": conditions.join(causes), "witness": json.dumps(raw, separators=(",", ":"))}

    @staticmethod
    def _counter_causes(raw: dict, before: dict, after: dict, judge_nvlink: bool = True) -> list[str]:
        causes = []
        if "pcie_replay" in before and "pcie_replay" in after:
            delta = int(after["pcie_replay"] - before["pcie_replay"])
            raw["pcie_replay"] = delta
            if delta:
                causes.append(f"PCIe replays {delta:+d}")
        if "ecc" in before and "ecc" in after:
            delta = int(after["ecc"] - before["ecc"])
            raw["ecc"] = delta
            if delta:
                causes.append(f"ECC volatile errors {delta:+d}")
        if "nvlink" in before and "nvlink" in after:
            deltas = {}
            for link, counts in after["nvlink"].items():
                for name, value in counts.items():
                    delta = value - before["nvlink"].get(link, {}).get(name, value)
                    if delta:
                        deltas.setdefault(link, {})[name] = delta
                        if judge_nvlink:
                            causes.append(f"NVLink {link} {NVLINK_WORDS[name]} {delta:+d}")
            raw["nvlink"] = deltas
        return causes
