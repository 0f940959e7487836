"""What the Streams page's default request costs, estimated from a recording (no GPU needed): per point, the recorded
median × the samples the interactive profile takes at least (one warm-up, five samples, and for serial and pipeline
points the one marked run that is verified). GPU time only: host work between points (poisoning, read-back and
verification of 256 MiB) comes on top; the live figure is tests/benchmarks/live_defaults.py's.

``python3 tests/benchmarks/streams_defaults_cost.py [recording.parquet]``
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def estimate(recorded, params) -> tuple[float, int, list[tuple]]:
    """(seconds, points, the points the recording lacks) for ``params`` priced from ``recorded``."""
    from gpu.core.schema import key_value
    from gpu.experiments import streams

    profile_samples = 1 + 5  # INTERACTIVE: warm-up 1, floor_samples 5
    keys = recorded[streams.KEY_COLUMNS].itertuples(index=False, name=None)
    medians = {tuple(key_value(v) for v in key): ms for key, ms in zip(keys, recorded["median_ms"], strict=True)}
    total, missing, points = 0.0, [], list(params.points())
    for point in points:
        ms = medians.get(tuple(key_value(v) for v in point))
        if ms is None:
            missing.append(point)
            continue
        total += ms * (profile_samples + (1 if point[0] in ("serial", "pipeline") else 0))
    return total / 1e3, len(points), missing


def main() -> None:
    import pandas as pd

    from gpu.experiments import streams

    path = sys.argv[1] if len(sys.argv) > 1 else ROOT / "assets/replay/streams_nvidia-h200_2026-11-23.parquet"
    recorded = pd.read_parquet(path)
    for label, raw in (("default (pageable lesson only)", {}),
                       ("pageable at every configuration", {"pageable_grid": True}),
                       ("before: chunks 1,4,16,64, pageable grid", {"chunks": [1, 4, 16, 64], "pageable_grid": True}),
                       ("pinned only", {"host_memory": ["pinned"]})):
        seconds, points, missing = estimate(recorded, streams.parse_params(raw))
        note = f" ({len(missing)} points not in the recording)" if missing else ""
        print(f"{label:<42} {points:>3} points, GPU time >= {seconds:5.2f} s{note}")


if __name__ == "__main__":
    main()
