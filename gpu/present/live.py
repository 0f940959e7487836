"""The live conditions strip under a Measure's progress: what the GPU is doing now, as the worker's witness last read
it (``JobHandle.conditions_now``), in one plain-text line. No Streamlit, no CUDA.

Fields (each optional; a value that is missing, not a number or negative is left out, never guessed):
``sm_clock_mhz``, ``mem_clock_mhz``, ``power_w``, ``power_limit_w``, ``temperature_c``, ``other_processes``
([[pid, name], …]) and ``reasons`` (clock-event reasons by name)."""

from __future__ import annotations

import math

MAX_PROCESSES = 3  # named on the strip; the rest counted


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _process(entry) -> str | None:
    try:
        pid, name = entry
    except (TypeError, ValueError):
        return None
    number = _number(pid)
    if number is None:
        return None
    return f"pid {int(number)}" + (f" ({str(name).strip()[:40]})" if name and str(name).strip() else "")


def conditions_strip(now) -> str | None:
    """'GPU now: SM 1,980 MHz · memory 2,619 MHz · 382 W of 700 W · 43 °C · other processes: pid 1039 (python3) ·
    SW power cap'; 'no other process' where the witness saw none; None when there is nothing (no witness)."""
    if not isinstance(now, dict) or not now:
        return None
    parts = []
    for key, name in (("sm_clock_mhz", "SM"), ("mem_clock_mhz", "memory")):
        value = _number(now.get(key))
        if value is not None:
            parts.append(f"{name} {value:,.0f} MHz")
    power, limit = _number(now.get("power_w")), _number(now.get("power_limit_w"))
    if power is not None:
        parts.append(f"{power:,.0f} W" + (f" of {limit:,.0f} W" if limit else ""))
    temperature = _number(now.get("temperature_c"))
    if temperature is not None:
        parts.append(f"{temperature:.0f} °C")
    if "other_processes" in now:
        found = [p for p in (_process(e) for e in (now.get("other_processes") or [])) if p]
        more = len(found) - MAX_PROCESSES
        parts.append("other processes: " + ", ".join(found[:MAX_PROCESSES]) + (f" and {more} more" if more > 0 else "")
                     if found else "no other process")
    reasons = [str(r).strip() for r in (now.get("reasons") or []) if str(r).strip()]
    if reasons:
        parts.append(", ".join(reasons))
    return "GPU now: " + " · ".join(parts) if parts else None
