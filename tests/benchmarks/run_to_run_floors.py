"""Run-to-run floors (prints, does not assert): how far medians of unchanged software move between runs, per kind
of point, from the repeated runs in assets/noise/ (same code, one worker process per run) and the day-apart H200
transfers pair; the floor of a kind is the larger of the sources' 95th percentiles of |log(median ratio)|, rounded
up to 0.5 %; the one-board floors come from the pairs whose runs name the same ``gpu_uuid`` alone. Then the bars:
the share of points an unchanged pair flags (target ≤ 5 %) and the share of a 10 % change that is caught (target
≥ 95 %), with the floors alone and with a history of earlier runs.

No GPU needed: ``python3 tests/benchmarks/run_to_run_floors.py``.
"""

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpu.results.analysis import compare  # noqa: E402
from tests import run_to_run  # noqa: E402


def flagged(table):
    return table["verdict"].isin([compare.SLOWER, compare.FASTER])


def main() -> None:
    table = run_to_run.spread_table()
    shown = table.drop(columns="q95_log")
    for column in ("q50", "q90", "q95", "max"):
        shown[column] = shown[column].map(lambda v: f"{v:.1%}")
    print("|median ratio − 1| between runs of unchanged software, per source and kind:")
    print(shown.to_string(index=False))
    derived = run_to_run.derived_floors(table)
    print("\nfloors (|log ratio|): derived from the data  vs  gpu/results/analysis/compare.py RUN_TO_RUN_FLOORS")
    for kind in sorted(set(derived) | set(compare.RUN_TO_RUN_FLOORS)):
        mine, used = derived.get(kind), compare.RUN_TO_RUN_FLOORS.get(kind)
        print(f"  {kind:18} {mine!s:>7}  {used!s:>7}" + ("" if mine == used else "   <- differs"))
    one_board = run_to_run.derived_one_board_floors(table)
    print("\none-board floors (both runs name the same gpu_uuid): derived  vs  ONE_BOARD_FLOORS")
    for kind in sorted(set(one_board) | set(compare.ONE_BOARD_FLOORS)):
        mine, used = one_board.get(kind), compare.ONE_BOARD_FLOORS.get(kind)
        print(f"  {kind:18} {mine!s:>7}  {used!s:>7}" + ("" if mine == used else "   <- differs"))

    print("\nunchanged pairs: points flagged slower/faster (target ≤ 5 %)")
    total = [0, 0]
    for label, base, cand, earlier in run_to_run.unchanged_pairs():
        result = compare.compare(base, cand, earlier)
        total = [total[0] + int(flagged(result).sum()), total[1] + len(result)]
        print(f"  {label}: {int(flagged(result).sum())} of {len(result)} flagged ({flagged(result).mean():.1%}); "
              + ", ".join(f"{count} {name}" for name, count in compare.verdict_counts(result).items()))
    print(f"  all pairs: {total[0]} of {total[1]} points flagged ({total[0] / total[1]:.1%})")

    print("\nthe same, each pair judged by floors derived without it (a kind it alone measured keeps its floor)")
    held = [0, 0]
    kept = dict(compare.RUN_TO_RUN_FLOORS)
    try:
        for label, base, cand, earlier in run_to_run.unchanged_pairs():
            pair = f"{base['run_id'].iloc[0]} · {cand['run_id'].iloc[0]}"
            compare.RUN_TO_RUN_FLOORS.update({**kept, **run_to_run.derived_floors(run_to_run.spread_table(pair))})
            result = compare.compare(base, cand, earlier)
            held = [held[0] + int(flagged(result).sum()), held[1] + len(result)]
            print(f"  {label}: {int(flagged(result).sum())} of {len(result)} flagged")
    finally:
        compare.RUN_TO_RUN_FLOORS.update(kept)
    print(f"  all pairs, held out: {held[0]} of {held[1]} points flagged ({held[0] / held[1]:.1%})")

    print("\na 10 % change (times × 0.9 on every third point): changed points flagged (target ≥ 95 %)")
    quiet_total = [0, 0]
    for label, base, earlier in run_to_run.changed_cases():
        candidate = run_to_run.scaled(base)
        result = compare.compare(base, candidate, earlier)
        changed = result[candidate["changed"].to_numpy()]
        quiet = changed[changed["kind"].map(compare.floor) < math.log(1 / 0.9)]
        if not earlier:
            quiet_total = [quiet_total[0] + int(flagged(quiet).sum()), quiet_total[1] + len(quiet)]
        by_kind = changed.assign(hit=flagged(changed)).groupby("kind")["hit"].mean()
        unchanged = result.drop(changed.index)
        print(f"  {label}: {flagged(changed).mean():.1%} of {len(changed)} caught; unchanged points flagged "
              f"{int(flagged(unchanged).sum())}; caught by kind " + ", ".join(f"{k} {v:.0%}" for k, v in
                                                                          by_kind.items()))
        print("    changed points: " + ", ".join(f"{count} {name}" for name, count in
                                                 compare.verdict_counts(changed).items()))

    print(f"  floors alone, points of kinds whose floor is under 10 %: {quiet_total[0]} of {quiet_total[1]} caught")


if __name__ == "__main__":
    main()
