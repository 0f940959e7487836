"""Does the duplex-aware bound hold? (prints, does not assert.) Reruns the Streams GPU test's copy-bound pipelines,
256 MiB pinned, 32 chunks: depth-first over 4 streams and staged (one stream per stage), ``--reruns`` times (10 by
default), each a fresh job whose bound is built from both-ways copies sampled between that pipeline's own samples
(``bidir_paired``). For every pipeline: its time, the bound, the ratio (pipeline / bound), the pipeline's noise
(cv) and the spread of the duplex samples; then the lowest ratio and whether any pipeline fell below its bound by
more than its own noise (ratio < 1 − cv). Beside it, the bound the older way (the run's ``bidir_both`` point,
measured after all the pipelines) to show what pairing changes.

Run on the GPU machine: ``python3 tests/benchmarks/duplex_bound.py [--reruns 10] [--profile interactive]``.
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    from gpu.core import overlap
    from gpu.service.backends import start_live, submit_values

    parser = argparse.ArgumentParser()
    parser.add_argument("--reruns", type=int, default=10)
    parser.add_argument("--profile", default="interactive")
    args = parser.parse_args()
    backend, reason = start_live()
    if backend is None:
        sys.exit(f"needs a GPU: {reason}")
    ratios, older, beaten, device = [], [], 0, "?"
    try:
        for rerun in range(1, args.reruns + 1):
            frame = submit_values(backend, "streams", {
                "size_bytes": 256 << 20, "chunks": [32], "streams": [4], "host_memory": ["pinned"],
                "issue_orders": ["depth_first", "staged"], "bidirectional": True,
                "profile": args.profile}).outcome()
            device = f"{frame['device_name'].iloc[0]} …{str(frame['gpu_uuid'].iloc[0])[-8:]}"
            table = overlap.pipeline_table(frame)
            run_wide = overlap.pipeline_table(frame[frame["variant"] != overlap.PAIRED_VARIANT])
            for row, old in zip(table.itertuples(), run_wide.itertuples(), strict=True):
                below = row.vs_bound < 1 - row.cv
                beaten += below
                ratios.append(row.vs_bound)
                older.append(old.vs_bound)
                print(f"rerun {rerun:2d} {row.issue_order:11s}: pipeline {row.pipeline_ms:.3f} ms (cv {row.cv:.2%}), "
                      f"bound {row.bound_ms:.3f} ms from {row.duplex_gbps:.1f} GB/s both ways in the same sitting "
                      f"(cv {row.duplex_cv:.2%}) -> {row.vs_bound:.3f}x"
                      + ("  BELOW BY MORE THAN ITS NOISE" if below else "")
                      + f"   [run-wide bidir_both bound: {old.vs_bound:.3f}x]")
    finally:
        backend.client.close()
    print(f"BAR duplex bound on {device}: {len(ratios)} pipelines over {args.reruns} reruns, ratio min "
          f"{min(ratios):.3f} median {statistics.median(ratios):.3f} max {max(ratios):.3f}; "
          f"{beaten} below their bound by more than their own noise (target 0)")
    print(f"BAR context: the run-wide bound (bidir_both after the pipelines) gave min {min(older):.3f} "
          f"median {statistics.median(older):.3f} max {max(older):.3f}")


if __name__ == "__main__":
    main()
