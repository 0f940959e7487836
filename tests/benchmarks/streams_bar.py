"""Streams quality bar (prints, does not assert): at 256 MiB pinned, the best pipeline that can overlap against both
bounds measured in the same run: the duplex-aware bound (target ≤ 1.08×), which counts both directions' bytes at
the rate H2D and D2H reach together (in their fastest tenth of samples), and the copy-engine bound (each direction
at its solo rate); the best round-robin pipeline beside the best of all (a staged pipeline, one stream per stage,
is usually best); and whether pageable memory shows any measurable overlap (it should not).

Run on the GPU machine: ``python3 tests/benchmarks/streams_bar.py [--profile precise/timeout_s=2]``.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    from gpu.core import overlap
    from gpu.service.backends import start_live, submit_values

    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="precise/timeout_s=2")
    parser.add_argument("--out", help="also write the pinned run (with its timelines) here (.parquet)")
    args = parser.parse_args()
    backend, reason = start_live()
    if backend is None:
        sys.exit(f"needs a GPU: {reason}")
    try:
        pinned = submit_values(backend, "streams", {
            "size_bytes": 256 << 20, "chunks": [8, 16, 32, 64], "streams": [2, 3, 4, 8, 16],
            "host_memory": ["pinned"], "issue_orders": ["depth_first", "breadth_first", "staged"],
            "bidirectional": True, "profile": args.profile}).outcome()
        pageable = submit_values(backend, "streams", {
            "size_bytes": 256 << 20, "chunks": [16], "streams": [4], "host_memory": ["pageable"],
            "issue_orders": ["depth_first", "breadth_first"], "bidirectional": True,
            "profile": args.profile}).outcome()
    finally:
        backend.client.close()
    table = overlap.pipeline_table(pinned).sort_values("pipeline_ms")
    cols = ["streams", "chunks", "issue_order", "pipeline_ms", "serial_ms", "h2d_ms", "kernel_ms", "d2h_ms",
            "engine_bound_ms", "duplex_bound_ms", "vs_bound", "vs_engine_bound", "efficiency", "cv"]
    print(f"device: {pinned['device_name'].iloc[0]} · async engines {pinned['async_engine_count'].iloc[0]} · "
          f"profile {args.profile}")
    print(table[cols].head(10).round(4).to_string(index=False))
    round_robin = overlap.overlap_summary(table[table["issue_order"] != "staged"]).iloc[0]
    rr_config = overlap.config_text(round_robin.best_streams, round_robin.best_chunks, round_robin.best_order)
    print(f"BAR context: best round-robin pipeline {rr_config} {round_robin.best_order}: {round_robin.best_ms:.3f} ms "
          f"-> {round_robin.best_ms / round_robin.best_duplex_bound_ms:.3f}x the duplex-aware bound")
    both = pinned[pinned["variant"] == "bidir_both"].iloc[0]
    fastest = min(both["samples_ms"])
    print(f"BAR context: both directions at once, {both['samples']} samples: median {both['median_ms']:.3f} ms, "
          f"fastest tenth {overlap.duplex_ms(both):.3f} ms (the bound's), fastest {fastest:.3f} ms, "
          f"cv {both['cv']:.2%}")
    best = overlap.overlap_summary(table).iloc[0]
    print(f"BAR pinned 256 MiB best: {overlap.config_text(best.best_streams, best.best_chunks, best.best_order)} "
          f"{best.best_order}: "
          f"pipeline {best.best_ms:.3f} ms vs duplex-aware bound {best.best_duplex_bound_ms:.3f} ms -> "
          f"{best.best_ms / best.best_duplex_bound_ms:.3f}x (target <= 1.08); vs copy-engine bound "
          f"{best.best_engine_bound_ms:.3f} ms -> {best.best_vs_engine_bound:.3f}x; serial "
          f"{best.best_serial_ms:.3f} ms, speedup {best.best_speedup:.2f}x, {overlap.gain_text(best)}")
    gbps = pinned[pinned["group"] == "bidirectional"].set_index("variant")["gbps"]
    share = gbps["bidir_both"] / (gbps["bidir_h2d"] + gbps["bidir_d2h"])
    print(f"BAR context: one 256 MiB H2D alone {gbps['bidir_h2d']:.1f} GB/s, D2H alone {gbps['bidir_d2h']:.1f} GB/s, "
          f"both at once {gbps['bidir_both']:.1f} GB/s together ({share:.0%} of the sum of the solo rates)")
    if args.out:
        from gpu.core import schema

        schema.to_parquet(pinned, args.out)
    page = overlap.pipeline_table(pageable)
    for row in page.to_dict("records"):
        print(f"BAR pageable 256 MiB {row['streams']} streams x {row['chunks']} chunks {row['issue_order']}: pipeline "
              f"{row['pipeline_ms']:.2f} ms, serial {row['serial_ms']:.2f} ms (cv {row['cv']:.1%}, serial "
              f"{row['serial_cv']:.1%}), duplex-aware bound {row['duplex_bound_ms']:.2f} ms, copy-engine bound "
              f"{row['engine_bound_ms']:.2f} ms: "
              + ("gain beyond the noise" if overlap.gain_beyond_noise(row) else "no measurable overlap"))


if __name__ == "__main__":
    main()
