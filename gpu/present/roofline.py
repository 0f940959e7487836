"""The roofline of one GPU from its runs: the measured ceilings, every kernel placed under them, one sentence each.

Nothing here names an experiment; each declares what the roofline needs (``gpu.core.roofline``):

* **roofs** – an experiment that measures a ceiling declares ``roofs(frame) -> list[Roof]``; its runs give the
  roofs (per name, the highest rate measured; the L2 and HBM memory roofs in bytes/s, the FP32 and FP64 FMA compute
  roofs in FLOP/s).
* **kernels** – an experiment whose ``device`` rows are kernels declares ``flops(row) -> float``, the FLOPs of one
  execution of the point, counted as ``bytes`` is. Its device rows are the kernels placed: 0 FLOPs is a
  memory-only kernel (a copy, a strided read, a transpose), placed by bytes/s against the memory roofs; more is a
  kernel on the classic roofline (FLOP/s against FLOP/byte, log-log); NaN is a row that is not one kernel's
  execution (a time that includes host copies) and is not placed. Experiments that declare no ``flops`` (host
  latency, managed migrations: their device rows measure the link or the driver, not a kernel under the GPU's
  roofs) are not placed.

A kernel measured at several configurations (block sizes, chunk counts, host memories) is placed once per kernel
and problem (variant, swept parameter, size, intensity), at its fastest configuration, which its sentence names.
Points of one kernel that differ only in ``intensity`` (the Streams FMA chain) form a path in intensity order.

Which roof binds a point: the memory roof is the DRAM one (HBM: every kernel here reads data that starts in
DRAM, most with L2 flushed first), unless the point runs more than ``CACHE_MARGIN`` above it, when it is the first
cache roof it stays under (its data came from a cache). A cache roof (``Roof.cache``) measured at or below the DRAM
roof bounds nothing (its measurement did not reach the cache's rate): it is named (``unused_roofs``), not used. The
compute roof is the one of the point's precision: an experiment may declare ``precision(row)``, else
``KERNEL_PRECISION`` (PinPoint's kernels compute in FP32). A point below the ridge is memory-bound, above it
compute-bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType

import pandas as pd

from gpu.core import schema, text
from gpu.core.roofline import COMPUTE, MEMORY, Roof, attainable, ridge_intensity
from gpu.core.schema import key_value
from gpu.experiments.registry import EXPERIMENTS
from gpu.results.analysis import causes

KERNEL_PRECISION = "fp32"
CACHE_MARGIN = 1.10  # above the DRAM roof by more than this: judged against the next memory roof
# What makes one kernel and problem; the configurations that differ only in other columns are alternatives of it.
AXES = schema.COORDINATE_COLUMNS + schema.DETAIL_COLUMNS  # a point's coordinates and how its samples were made
KERNEL_KEY = ["run_id", "experiment", "variant", "group", *AXES, "elements", "intensity"]
POINT_COLUMNS = ["kernel", "experiment", "variant", "run_id", "device_name", "block_size", "elements",
                 *AXES, "intensity", "configurations", "bytes", "flops", "median_ms",
                 "bytes_per_s", "flops_per_s", "flop_per_byte", "memory_only", "roof", "bound", "fraction",
                 "sentence", "path", "precision", "conditions"]


def _experiments(experiments: dict[str, ModuleType] | None) -> dict[str, ModuleType]:
    """``experiments`` (tests give their own modules), else every registered one."""
    return EXPERIMENTS if experiments is None else experiments


def ceiling_experiments(experiments: dict[str, ModuleType] | None = None) -> list[str]:
    """The registered experiments that measure a ceiling (declare ``roofs``)."""
    return [name for name, module in _experiments(experiments).items() if callable(getattr(module, "roofs", None))]


def kernel_experiments(experiments: dict[str, ModuleType] | None = None) -> list[str]:
    """The registered experiments whose device rows are kernels (declare ``flops``)."""
    return [name for name, module in _experiments(experiments).items() if callable(getattr(module, "flops", None))]


def _runs(data: pd.DataFrame, names: list[str]):
    """(experiment, run frame) for each run of ``names`` in ``data`` (none in a frame without rows)."""
    if data.empty:
        return
    for (experiment, _), frame in data[data["experiment"].isin(names)].groupby(["experiment", "run_id"], sort=False):
        yield experiment, frame


def measured_roofs(data: pd.DataFrame, experiments: dict[str, ModuleType] | None = None) -> list[Roof]:
    """The roofs the runs in ``data`` measured: each run of a ceiling experiment asked for its roofs; per roof name,
    the highest rate. Memory roofs first, each kind from the lowest rate up."""
    modules = _experiments(experiments)
    best: dict[str, Roof] = {}
    for experiment, frame in _runs(data, ceiling_experiments(modules)):
        for roof in modules[experiment].roofs(frame.reset_index(drop=True)):
            if roof.name not in best or roof.per_second > best[roof.name].per_second:
                best[roof.name] = roof
    return sorted(best.values(), key=lambda r: (r.kind != MEMORY, r.per_second))


def device_models(data: pd.DataFrame, experiments: dict[str, ModuleType] | None = None) -> list[str]:
    """The GPU models ``data`` holds kernels or ceilings of, in name order: a model recorded only by other
    experiments (such as a peer matrix) has nothing to place on a roofline, so it is not offered."""
    wanted = kernel_experiments(experiments) + ceiling_experiments(experiments)
    return sorted(set(data.loc[data["experiment"].isin(wanted), "device_name"].dropna().astype(str)))


def newest_runs(data: pd.DataFrame, device_name: str,
                experiments: dict[str, ModuleType] | None = None) -> pd.DataFrame:
    """The newest run of each experiment that the roofline reads (kernels and ceilings) recorded on
    ``device_name`` (a device model)."""
    wanted = kernel_experiments(experiments) + ceiling_experiments(experiments)
    rows = data[(data["device_name"] == device_name) & data["experiment"].isin(wanted)]
    if rows.empty:
        return rows
    newest = (rows.groupby(["experiment", "run_id"], sort=False)["timestamp"].max().reset_index()
              .sort_values("timestamp").groupby("experiment").tail(1)["run_id"])
    return rows[rows["run_id"].isin(set(newest))].reset_index(drop=True)


def memory_roofs(roofs: list[Roof]) -> list[Roof]:
    """The memory roofs in the order a kernel is judged against them: the DRAM roofs from the lowest up, then the
    cache roofs measured above them (the others bound nothing: ``unused_roofs``)."""
    dram = sorted((r for r in roofs if r.kind == MEMORY and not r.cache), key=lambda r: r.per_second)
    top = dram[-1].per_second if dram else 0.0
    return dram + sorted((r for r in roofs if r.kind == MEMORY and r.cache and r.per_second > top),
                         key=lambda r: r.per_second)


def unused_roofs(roofs: list[Roof]) -> list[tuple[Roof, Roof]]:
    """(cache roof, DRAM roof) for each cache roof measured at or below the highest DRAM roof: a cache serves
    faster than DRAM, so such a figure did not reach the cache's rate and bounds no kernel."""
    dram = [r for r in roofs if r.kind == MEMORY and not r.cache]
    if not dram:
        return []
    top = max(dram, key=lambda r: r.per_second)
    return [(r, top) for r in roofs if r.kind == MEMORY and r.cache and r.per_second <= top.per_second]


def unused_roof_sentence(cache: Roof, dram: Roof) -> str:
    """"The L2 figure (SM copy kernel, 8 MiB batched, median 3,812 GB/s) is below the HBM roof (4,299 GB/s): …"."""
    return (f"The {cache.name} figure ({cache.source.split(';')[0]}) is below the {dram.name} roof "
            f"({roof_rate(dram)}): a cache serves faster than DRAM, so this measurement did not reach the "
            f"{cache.name}'s rate. It is not drawn, and no kernel is judged against it.")


def compute_roof(roofs: list[Roof], precision: str = KERNEL_PRECISION) -> Roof | None:
    """The highest compute roof of ``precision``, or None when none was measured."""
    found = [r for r in roofs if r.kind == COMPUTE and r.precision == precision]
    return max(found, key=lambda r: r.per_second) if found else None


def binding_memory_roof(bytes_per_s: float, roofs: list[Roof]) -> Roof | None:
    """The memory roof a point at ``bytes_per_s`` is judged against (see the module docstring), or None."""
    memory = memory_roofs(roofs)
    for roof in memory:
        if bytes_per_s <= roof.per_second * CACHE_MARGIN:
            return roof
    return memory[-1] if memory else None


@dataclass(frozen=True)
class Ridge:
    """Where ``memory`` meets ``compute``: kernels below ``intensity`` FLOP/byte are bound by memory."""

    memory: Roof
    compute: Roof
    intensity: float


def ridges(roofs: list[Roof]) -> list[Ridge]:
    """One ridge per compute roof, against the first memory roof (DRAM: HBM), FP32 first."""
    memory = memory_roofs(roofs)
    if not memory:
        return []
    compute = sorted((r for r in roofs if r.kind == COMPUTE), key=lambda r: (r.precision != KERNEL_PRECISION,
                                                                              r.precision, -r.per_second))
    seen, found = set(), []
    for roof in compute:
        if roof.precision in seen:
            continue
        seen.add(roof.precision)
        found.append(Ridge(memory[0], roof, ridge_intensity(memory[0], roof)))
    return found


def short_device(device_name: str) -> str:
    """"NVIDIA H200" → "H200": the model as people say it."""
    name = str(device_name).strip()
    return name[len("NVIDIA "):] if name.upper().startswith("NVIDIA ") else name


def ridge_sentence(device_name: str, found: list[Ridge]) -> str | None:
    """"H200: the ridge is at 16 FLOP/B (FP32), 8.1 FLOP/B (FP64)", or None without both kinds of roof."""
    if not found:
        return None
    parts = [f"{number(r.intensity)} FLOP/B ({r.compute.precision.upper() or r.compute.name})" for r in found]
    memory = found[0].memory.name
    return f"{short_device(device_name)}: the ridge is at {', '.join(parts)} over the {memory} roof"


# --- numbers in the one style ----------------------------------------------------------------------------------
def number(value: float) -> str:
    """Three significant digits, no exponent, no trailing zeros: 0.25, 16, 8.13, 1,024."""
    if value != value or math.isinf(value):
        return "—"
    shown = text.significant(value, 3)
    return shown.rstrip("0").rstrip(".") if "." in shown else shown


def bytes_rate(per_second: float) -> str:
    """bytes/s as GB/s (10^9 B/s), the unit of every PinPoint page: "3,480 GB/s", "0.30 GB/s"."""
    gbps = per_second / 1e9
    return f"{gbps:,.0f} GB/s" if gbps >= 100 else f"{text.significant(gbps, 3)} GB/s"


def flop_rate(per_second: float) -> str:
    """FLOP/s in the unit that reads best: "32.1 TFLOP/s", "262 GFLOP/s"."""
    value, unit = (per_second / 1e12, "TFLOP/s") if per_second >= 1e12 else (per_second / 1e9, "GFLOP/s")
    return f"{text.significant(value, 3)} {unit}"


def share(fraction: float) -> str:
    """A fraction of a roof: "84 %", and two significant digits below 10 % ("0.11 %": never "0 %")."""
    if fraction != fraction or fraction >= 0.095:
        return text.percent(fraction)
    return f"{text.significant(fraction * 100, 2)} %"


def roof_rate(roof: Roof) -> str:
    return bytes_rate(roof.per_second) if roof.kind == MEMORY else flop_rate(roof.per_second)


# --- kernels ------------------------------------------------------------------------------------------------------
def _present(value) -> bool:
    return value is not None and value is not pd.NA and not (isinstance(value, float) and math.isnan(value))


def _size(elements) -> str:
    n = int(elements)
    return f"2^{n.bit_length() - 1} elements" if n > 0 and n & (n - 1) == 0 else text.count(n, "element")


def variant_words(variant, labels) -> str:
    """The experiment's words for ``variant`` (its ``LABELS``), else the variant as recorded."""
    return str(labels.get(variant, variant) if isinstance(labels, dict) else variant)


def kernel_label(row, labels: dict, configuration: str = "") -> str:
    """"grid-stride + shuffle (2^20 elements)", "strided read (stride 8, 2^26 elements)", "all kernels alone
    (64 FMA/element, 2^26 elements)": the experiment's words for the variant and what tells the point apart, then
    ``configuration`` after a semicolon."""
    base = variant_words(row["variant"], labels)
    parts = []
    parts += [f"{schema.AXIS_WORDS[c]} {number(float(row[c]))}" for c in AXES if _present(row.get(c))]
    if _present(row["intensity"]):
        parts.append(f"{int(row['intensity']):,} FMA/element")
    if _present(row["elements"]):
        parts.append(_size(row["elements"]))
    inside = "; ".join(p for p in (", ".join(parts), configuration) if p)
    return f"{base} ({inside})" if inside else base


def _configuration(row, configurations: int) -> str:
    """"block 256, the fastest of 4 configurations": which of the alternatives measured is placed."""
    block = f"block {int(row['block_size'])}" if _present(row["block_size"]) else ""
    if configurations <= 1:
        return block
    return f"{block + ', ' if block else ''}the fastest of {configurations} configurations"


def sentence(point: dict, memory: Roof | None, compute: Roof | None) -> tuple[str, str, str, float]:
    """(sentence, roof name, bound, fraction of that roof) for one placed kernel."""
    head = f"{point['experiment']} · {point['kernel']}"
    rate = bytes_rate(point["bytes_per_s"])
    if point["memory_only"]:
        if memory is None:
            return f"{head}: memory only (no arithmetic); {rate}; no memory roof recorded for this GPU", "", "", \
                math.nan
        fraction = point["bytes_per_s"] / memory.per_second
        return (f"{head}: memory only (no arithmetic); {rate}, {share(fraction)} of the {memory.name} roof",
                memory.name, MEMORY, fraction)
    intensity = point["flop_per_byte"]
    where = f"{number(intensity)} FLOP/B; {rate} ({flop_rate(point['flops_per_s'])})"
    if memory is None and compute is None:
        return f"{head}: {where}; no roof recorded for this GPU", "", "", math.nan
    if compute is None:
        fraction = point["bytes_per_s"] / memory.per_second
        return (f"{head}: {where}, {share(fraction)} of the {memory.name} roof; no "
                f"{point.get('precision', KERNEL_PRECISION).upper()} compute roof recorded, so which roof binds is "
                "not known",
                memory.name, "", fraction)
    if memory is None:
        fraction = point["flops_per_s"] / compute.per_second
        return (f"{head}: {where}, {share(fraction)} of the {compute.name} roof; no memory roof recorded, so "
                "which roof binds is not known", compute.name, "", fraction)
    ceiling = attainable(intensity, memory, compute)
    fraction = point["flops_per_s"] / ceiling
    if intensity * memory.per_second < compute.per_second:
        return (f"{head}: memory-bound at {number(intensity)} FLOP/B; {rate}, {share(fraction)} of the "
                f"{memory.name} roof", memory.name, MEMORY, fraction)
    return (f"{head}: compute-bound at {number(intensity)} FLOP/B; {flop_rate(point['flops_per_s'])}, "
            f"{share(fraction)} of the {compute.name} roof", compute.name, COMPUTE, fraction)


def _precision(module: ModuleType, row: dict) -> str:
    """The precision of a point's arithmetic: the experiment's ``precision(row)`` where it declares one."""
    declared = getattr(module, "precision", None)
    return str(declared(row)) if callable(declared) else KERNEL_PRECISION


def kernel_points(data: pd.DataFrame, roofs: list[Roof],
                  experiments: dict[str, ModuleType] | None = None) -> pd.DataFrame:
    """Every kernel of ``data`` placed under ``roofs``: one row per kernel and problem (``POINT_COLUMNS``), with the
    roof that binds it, the fraction of that roof it reaches and its sentence (plain text: run content inside)."""
    modules = _experiments(experiments)
    names = kernel_experiments(modules)
    if data.empty:
        return pd.DataFrame(columns=POINT_COLUMNS)
    rows = data[data["experiment"].isin(names) & (data["direction"] == "device")]
    if rows.empty:
        return pd.DataFrame(columns=POINT_COLUMNS)
    rows = rows.copy()
    rows["flops"] = [float(modules[e].flops(row)) for e, row in zip(rows["experiment"], rows.to_dict("records"),
                                                                     strict=True)]
    rows = rows[rows["flops"].notna() & (rows["flops"] >= 0)]
    rows["seconds"] = rows["median_ms"] / 1e3
    rows["bytes_per_s"] = rows["bytes"] / rows["seconds"]
    placed = []
    for _, alternatives in rows.groupby(KERNEL_KEY, dropna=False, sort=False):
        best = alternatives.loc[alternatives["bytes_per_s"].idxmax()]
        labels = getattr(modules[best["experiment"]], "LABELS", {})
        flops = float(best["flops"])
        point = {
            "kernel": kernel_label(best, labels, _configuration(best, len(alternatives))),
            "words": variant_words(best["variant"], labels), "experiment": best["experiment"],
            "variant": best["variant"],
            "run_id": best["run_id"], "device_name": best["device_name"], "block_size": best["block_size"],
            "elements": best["elements"], **{c: best[c] for c in AXES},
            "intensity": best["intensity"], "configurations": len(alternatives), "bytes": float(best["bytes"]),
            "flops": flops, "median_ms": float(best["median_ms"]), "bytes_per_s": float(best["bytes_per_s"]),
            "flops_per_s": flops / float(best["seconds"]),
            "flop_per_byte": flops / float(best["bytes"]) if flops > 0 else math.nan, "memory_only": flops == 0,
            "precision": _precision(modules[best["experiment"]], best.to_dict()),
            "conditions": causes.of_row(best),  # what the witness saw while the placed point was measured
        }
        point["sentence"], point["roof"], point["bound"], point["fraction"] = sentence(
            point, binding_memory_roof(point["bytes_per_s"], roofs), compute_roof(roofs, point["precision"]))
        placed.append(point)
    points = pd.DataFrame(placed)
    points["path"] = _paths(points)
    return points[POINT_COLUMNS].reset_index(drop=True)


def _paths(points: pd.DataFrame) -> pd.Series:
    """For each point, the path it belongs to ("" for none): points of one kernel with FLOPs that differ only in
    intensity, when there are at least two of them."""
    key = ["run_id", "experiment", "variant", *AXES, "elements"]
    member = ~points["memory_only"] & points["intensity"].notna()
    keys = points[key].apply(lambda row: repr([key_value(v) for v in row]), axis=1)  # NaN and None alike
    size = member.groupby(keys).transform("sum")
    return (points["experiment"] + " · " + points["words"]).where(member & (size >= 2), "")


def placed_counts(points: pd.DataFrame) -> dict[str, int]:
    """How many kernels sit on the roofline (with FLOPs) and on the memory strip (without)."""
    memory_only = int(points["memory_only"].sum()) if not points.empty else 0
    return {"roofline": len(points) - memory_only, "memory": memory_only}


def missing_ceilings(data: pd.DataFrame, roofs: list[Roof],
                     experiments: dict[str, ModuleType] | None = None) -> list[str]:
    """What the roofline lacks, in words: the kinds of roof not measured and the ceiling experiments without a run
    in ``data`` (their recordings are what it needs)."""
    missing = []
    if not memory_roofs(roofs):
        missing.append("a memory roof (HBM bytes/s)")
    if compute_roof(roofs) is None:
        missing.append(f"an {KERNEL_PRECISION.upper()} compute roof (FLOP/s)")
    if not missing:
        return []
    recorded = set(data["experiment"]) if not data.empty else set()
    needed = [name for name in ceiling_experiments(experiments) if name not in recorded]
    what = " and ".join(missing)
    if needed:
        return [f"Not measured for this GPU: {what}. The roofline needs a recording of {', '.join(needed)} on it."]
    if not ceiling_experiments(experiments):
        return [f"Not measured for this GPU: {what}. No registered experiment measures a ceiling yet."]
    return [f"Not measured for this GPU: {what}, although the ceiling experiments have recordings here."]
