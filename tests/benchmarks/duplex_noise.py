"""Where the slow samples of copies in both directions at once come from (prints, does not assert): 200 held
samples each of both directions at once, a staged and a depth-first pipeline and one direction alone (256 MiB,
pinned), plain, with an NVML reading before every sample, and with a 2 ms host pause between samples; then 400
samples in a row of both directions at once, and whether a slow sample follows a slow one (a state of the machine)
or stands alone (something a sample does).

Run on the GPU machine: ``python3 tests/benchmarks/duplex_noise.py``.
"""
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from gpu.core import overlap  # noqa: E402
from gpu.device.context import GpuRuntime  # noqa: E402
from gpu.experiments.streams import sweep as st  # noqa: E402

rt = GpuRuntime()
SIZE = 256 << 20
with rt.job_scope() as ledger:
    b = st._Streams(rt, ledger, SIZE)
    inputs = np.arange(b.n, dtype=np.float32) % 1024
    host_in, host_out = b.host_pair("pinned", inputs)
    cases = {"bidir_both": ([(0, "h2d", 0), (1, "d2h", 0)], 1),
             "staged x32": (overlap.issue_plan(32, 3, "staged"), 32),
             "depth 4s x16": (overlap.issue_plan(16, 4, "depth_first"), 16),
             "h2d alone": ([(0, "h2d", 0)], 1)}
    modes = {"plain": lambda: None, "telemetry": rt.telemetry.sample, "pause 2ms": lambda: time.sleep(0.002)}
    for name, (plan, chunks) in cases.items():
        for mode, before in modes.items():
            for _ in range(3):
                b.run_once(plan, chunks, host_in, host_out, 0, True, staged=name.startswith("staged"))
            xs = []
            for _ in range(200):
                before()
                xs.append(b.run_once(plan, chunks, host_in, host_out, 0, True, staged=name.startswith("staged"))[0])
            xs = np.array(xs)
            slow = xs > 1.03 * np.percentile(xs, 10)
            print(f"NOISE {name:<13} {mode:<10} median {np.median(xs):.3f} cv {xs.std() / xs.mean():6.2%} "
                  f"p10/p90/max {np.percentile(xs, 10):.3f}/{np.percentile(xs, 90):.3f}/{xs.max():.3f} "
                  f"slow {slow.mean():5.1%} at {list(np.flatnonzero(slow)[:12])}", flush=True)
    # interleaved: does a slow sample follow a slow one (a state), or stand alone (an event)?
    plan, chunks = cases["bidir_both"]
    xs = np.array([b.run_once(plan, chunks, host_in, host_out, 0, True)[0] for _ in range(400)])
    slow = xs > 1.03 * np.percentile(xs, 10)
    pairs = np.mean(slow[1:] & slow[:-1]) / max(np.mean(slow), 1e-9)
    print(f"NOISE bidir_both 400 in a row: slow {slow.mean():.1%}, P(slow | previous slow) {pairs:.2f}")
    print("NOISE bidir_both sequence (ms, every 4th of the first 200): "
          + " ".join(f"{v:.2f}" for v in xs[:200:4]))
import os  # noqa: E402

os._exit(0)  # the runtime's context stays current on this thread; leave without PyCUDA's clean-up
