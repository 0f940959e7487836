"""Does the spread of copies in both directions at once follow where the process and its pinned memory sit?
Prints, never asserts. Reports the process's CPUs, the GPU's NUMA node and the system's nodes, then measures both
directions at once (256 MiB each way, held samples) from three kinds of pinned pair, in turns, in blocks of 40
samples, so a state of the machine falls on all three alike:

- ``hostalloc``: ``cuMemHostAlloc``, as PinPoint allocates pinned memory;
- ``huge+register``: ``mmap`` with 2 MiB transparent huge pages (``MADV_HUGEPAGE``), pinned by ``cuMemHostRegister``;
- ``4k+register``: ``mmap`` with 4 KiB pages (``MADV_NOHUGEPAGE``), pinned the same way.

If one kind stays quiet while the others spread, the page size or the way memory is pinned is the cause; if all
three have their slow blocks at the same times, it is the link. Run on the GPU machine, as it is and pinned to the
GPU's CPUs: ``python3 tests/benchmarks/duplex_placement.py [--rounds 20]`` and
``taskset -c "$(cat /sys/bus/pci/devices/<bus id>/local_cpulist)" python3 tests/benchmarks/duplex_placement.py``.
"""
import argparse
import ctypes
import mmap
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from gpu.device.context import GpuRuntime  # noqa: E402
from gpu.experiments.streams import sweep as st  # noqa: E402

SIZE, HUGE, BLOCK = 256 << 20, 2 << 20, 40
BOTH = [(0, "h2d", 0), (1, "d2h", 0)]


def registered_pair(advice: int, keep: list) -> list[np.ndarray]:
    """Two page-aligned host arrays from mmap with ``advice``, touched (the pages are made then), then pinned by
    cuMemHostRegister in the current context (PyCUDA's wrapper wants an array it can own, which a view is not)."""
    libcuda = ctypes.CDLL("libcuda.so.1")
    pair = []
    for _ in range(2):
        region = mmap.mmap(-1, SIZE + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        region.madvise(advice)
        raw = np.frombuffer(region, dtype=np.uint8)
        start = (-raw.ctypes.data) % HUGE
        array = raw[start:start + SIZE]
        array[:] = 1
        status = libcuda.cuMemHostRegister_v2(ctypes.c_void_p(array.ctypes.data), ctypes.c_size_t(SIZE), 0)
        if status != 0:
            raise SystemExit(f"cuMemHostRegister failed with CUresult {status}")
        keep.append((region, raw))
        pair.append(array.view(np.float32))
    return pair


def anon_huge_kib() -> int:
    with open("/proc/self/smaps") as smaps:
        return sum(int(line.split()[1]) for line in smaps if line.startswith("AnonHugePages:"))


def placement(rt) -> str:
    bus = rt.device.pci_bus_id().lower()
    node = Path(f"/sys/bus/pci/devices/{bus}/numa_node")
    nodes = sorted(p.name for p in Path("/sys/devices/system/node").glob("node[0-9]*"))
    cpus = sorted(os.sched_getaffinity(0))
    return (f"process CPUs {cpus[0]}-{cpus[-1]} ({len(cpus)}); GPU {bus} NUMA node "
            f"{node.read_text().strip() if node.exists() else '?'} (-1: none reported); system nodes {nodes}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    rounds = parser.parse_args().rounds
    rt = GpuRuntime()
    print("PLACEMENT", placement(rt), flush=True)
    keep: list = []
    with rt.job_scope() as ledger:
        bench = st._Streams(rt, ledger, SIZE)
        inputs = np.arange(bench.n, dtype=np.float32) % 1024
        pairs = {"hostalloc": bench.host_pair("pinned", inputs)}
        before = anon_huge_kib()
        pairs["huge+register"] = registered_pair(mmap.MADV_HUGEPAGE, keep)
        after = anon_huge_kib()
        pairs["4k+register"] = registered_pair(mmap.MADV_NOHUGEPAGE, keep)
        print(f"PLACEMENT huge pages: {(after - before) >> 10} MiB of the 512 MiB huge+register pair, "
              f"{(anon_huge_kib() - after) >> 10} MiB of the 4k+register pair", flush=True)
        for name, (host_in, host_out) in pairs.items():
            for _ in range(5):
                bench.run_once(BOTH, 1, host_in, host_out, 0, True)
            alone = [bench.run_once([(0, "h2d", 0)], 1, host_in, host_out, 0, True)[0] for _ in range(20)]
            print(f"DUPLEX {name:<14} H2D alone: median {np.median(alone):.3f} ms", flush=True)
        blocks: dict[str, list] = {name: [] for name in pairs}
        for _ in range(rounds):
            for name, (host_in, host_out) in pairs.items():
                blocks[name].append([bench.run_once(BOTH, 1, host_in, host_out, 0, True)[0] for _ in range(BLOCK)])
        for name, rows in blocks.items():
            xs = np.array(rows)
            flat = xs.ravel()
            cv = flat.std() / flat.mean()
            print(f"DUPLEX {name:<14} both at once: median {np.median(flat):.3f} ms, cv {cv:.2%}, "
                  f"p10/p90 {np.percentile(flat, 10):.3f}/{np.percentile(flat, 90):.3f} ms; block medians "
                  + " ".join(f"{v:.2f}" for v in np.median(xs, axis=1)), flush=True)
        medians = {name: np.median(np.array(rows), axis=1) for name, rows in blocks.items()}
        names = list(medians)
        print("DUPLEX block medians move together? correlation "
              + ", ".join(f"{a}/{b} {np.corrcoef(medians[a], medians[b])[0, 1]:.2f}"
                          for i, a in enumerate(names) for b in names[i + 1:]), flush=True)
    os._exit(0)  # the runtime's context stays current on this thread; leave without PyCUDA's clean-up


if __name__ == "__main__":
    main()
