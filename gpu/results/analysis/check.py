"""The CI gate: ``python -m gpu.bench check --candidate RUN --against RUN|history``.

Judges every point of a candidate run with Compare's verdicts (``gpu.results.analysis.compare``) and exits as asv's
``continuous`` does: **1** when a point got *slower beyond noise*, **0** when none did, **2** when it could not
check (a run id it cannot find, runs of two experiments, runs that share no point, no earlier run to check against,
a store that cannot be opened, a file it cannot write), with one line on stderr; and **3** when every slower point
was *not clean* on the candidate's side (the witness named a cause while it was measured: another process on the
GPU, a power cap, a downtrained link): the run cannot say whether the code regressed, so the job should measure
again on a quiet GPU rather than pass or blame the change. A slower point whose candidate was clean or not observed
is a regression (1), whatever else is not clean (a cause on the baseline's side alone could only have made the
baseline slower, so it is named but excuses nothing); a point that is not clean but not slower passes. Every output
names each not-clean point's causes, and says whether the two runs were measured by the same method (their method
versions, ``gpu.core.method_versions``: the same, different, or unknown for a run recorded before runs kept one); a
change of method is named, never a verdict of its own.

``--against RUN``: the candidate against that baseline run, as Compare shows the pair (each point's band from the
history of the candidate's board or model in the catalog, see ``compare``).

``--against history`` (Conbench's question: is this result out of line with the earlier results of the same
benchmark on the same machine?). From the catalog (stored and bundled runs), the candidate's history is the runs of
its experiment on its device model, in its profile family, measured before it:

* **baseline**: the newest of those runs measured on the candidate's board (same ``gpu_uuid``) that shares a point
  with it; when the board has none, the newest such run of the device model. The change and the Mann-Whitney test
  are against it (a point must differ from it to be faster or slower at all);
* **band**: per point, the 99 % prediction interval of the log medians of the newest ``compare.HISTORY_RUNS``
  earlier runs of the board (the baseline among them) when at least ``compare.MIN_HISTORY`` of them measured the
  point with the same timer, else the baseline's median ± the kind's one-board floor (never the model's history,
  which mixes boards up to 13 % apart); when the baseline is another board's run, the device model's history (every
  board, and runs that name none), else the kind's run-to-run floor. A point is slower beyond
  noise when its median lies outside that band on the slow side. Each point's band source is written to the
  summary and the JUnit message.

Outputs: the verdict lines on stdout, a Markdown summary (``--summary FILE``, and appended to the file that
``$GITHUB_STEP_SUMMARY`` names when set) and JUnit XML (``--junit FILE``: one testcase per point, a failure for
each slower one). No Streamlit, no CUDA.
"""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import pandas as pd

from gpu.core import text
from gpu.core.errors import PinPointError
from gpu.core.text import plain, printable, shorten
from gpu.results.analysis import bands, causes, compare, report
from gpu.results.exchange.catalog import Catalog
from gpu.results.persistence.store import StoreError

HISTORY = "history"
PASSED, REGRESSED, CANNOT_CHECK, NOT_CLEAN = 0, 1, 2, 3
SHOWN_SLOWER = 20  # slower points printed on the terminal; the files hold every one


class CheckError(PinPointError, ValueError):
    """Input the gate cannot check (exit 2): the message is the one line printed."""


@dataclass
class Check:
    candidate: pd.DataFrame
    baseline: pd.DataFrame
    table: pd.DataFrame
    against: str  # "run" or "history"
    history_runs: int  # earlier runs loaded beside the baseline (the catalog's, for the bands)
    board_runs: int  # of those and the baseline, how many name the candidate's board
    passed_over: tuple[str, ...] = ()  # newer runs of the history not taken as baseline: far off the others

    @property
    def experiment(self) -> str:
        return str(self.candidate["experiment"].iloc[0])

    @property
    def slower(self) -> pd.DataFrame:
        return self.table[self.table["verdict"] == compare.SLOWER]

    @property
    def slower_not_clean(self) -> pd.DataFrame:
        """The slower points whose candidate the witness found not clean. A cause on the baseline's side alone is
        named too, but cannot excuse a slower candidate: it could only have made the baseline slower."""
        slower = self.slower
        if "candidate_conditions" not in slower:
            return slower.iloc[0:0]
        return slower[slower["candidate_conditions"].map(causes.has_causes).astype(bool)]

    @property
    def exit_code(self) -> int:
        if self.slower.empty:
            return PASSED
        # a slower point with nothing observed to explain it is a regression, whatever else is not clean
        return NOT_CLEAN if len(self.slower_not_clean) == len(self.slower) else REGRESSED


def _load(catalog, run_id: str, role: str) -> pd.DataFrame:
    try:
        frame = catalog.load(run_id)
    except StoreError as exc:
        raise CheckError(f"{role} {shorten(run_id)}: {exc}") from None
    if frame.empty:
        raise CheckError(f"{role} {shorten(run_id)} has no points")
    return frame


def _first(frame: pd.DataFrame, column: str):
    return frame[column].iloc[0] if column in frame.columns and not frame.empty else None


def history_baseline(catalog, candidate: pd.DataFrame) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """The newest earlier run of the candidate's board that shares a point with it, else of its device model
    (same experiment and profile family, measured before it), and the newer runs passed over because they lie far
    outside the other runs of the history (``bands.runs_off_their_history``: an import that does not hold what was
    measured must not become the baseline); CheckError when there is none."""
    device, profile = str(_first(candidate, "device_name")), str(_first(candidate, "profile"))
    mine = compare.listed_history(catalog.runs(str(_first(candidate, "experiment"))), candidate)
    board = compare.boards_of(candidate)
    on_board = compare.listed_boards(mine) == board if board else pd.Series(False, index=mine.index)
    # Board first, then newest first: the run the candidate is most like.
    ordered = mine.assign(on_board=on_board).sort_values(["on_board", "when"], ascending=False, kind="stable")
    points = compare.point_keys(candidate)
    loaded = []
    for run_id, own_board in zip(ordered["run_id"], ordered["on_board"], strict=True):
        if len(loaded) >= compare.HISTORY_RUNS or (loaded and own_board != loaded[0][1]):
            break
        frame = catalog.load(run_id)
        if not points.isdisjoint(compare.point_keys(frame)):
            loaded.append((frame, own_board))
    if loaded:
        off = bands.runs_off_their_history([frame for frame, _ in loaded])
        passed_over = []
        for frame, _ in loaded:
            run_id = str(_first(frame, "run_id"))
            if run_id not in off:
                return frame, tuple(passed_over)
            passed_over.append(run_id)
        return loaded[0][0], ()  # every run is off the others: none can be told from a lie
    where = f"{boards_words(candidate)} or its model" if board else "this device model"
    raise CheckError(f"no history to check run {shorten(str(_first(candidate, 'run_id')))} against: no earlier "
                     f"{_first(candidate, 'experiment')} run of {where} ({device}, profile "
                     f"{profile.split('/')[0]}) that measured its points, stored or bundled")


def run_check(catalog, candidate_id: str, against: str) -> Check:
    """The candidate judged against a baseline run (``against``: a run id) or against its history
    (``against="history"``): see the module's text for the baseline and band used."""
    candidate = _load(catalog, candidate_id, "candidate")
    passed_over: tuple[str, ...] = ()
    if against == HISTORY:
        baseline, passed_over = history_baseline(catalog, candidate)
    else:
        if against == candidate_id:
            raise CheckError(f"run {shorten(candidate_id)} cannot be checked against itself")
        baseline = _load(catalog, against, "baseline")
    experiments = sorted({str(_first(baseline, "experiment")), str(_first(candidate, "experiment"))})
    if len(experiments) > 1:
        raise CheckError(f"runs of different experiments cannot be checked against each other: {experiments[0]} "
                         f"and {experiments[1]}")
    reason = compare.disjoint_reason(baseline, candidate)
    if reason:
        raise CheckError(reason)
    earlier = compare.earlier_runs(catalog, baseline, candidate)
    table = compare.compare(baseline, candidate, earlier)
    board = compare.boards_of(candidate)
    # as compare counts them: the newest HISTORY_RUNS of the board's runs, the baseline among them
    board_runs = min(compare.HISTORY_RUNS, sum(compare.boards_of(f) == board for f in [baseline, *earlier])) \
        if board else 0
    return Check(candidate, baseline, table, "history" if against == HISTORY else "run", len(earlier), board_runs,
                 passed_over)


def boards_words(frame: pd.DataFrame) -> str:
    """'board GPU-…' for a run of one board, 'boards GPU-…, GPU-…' for a run that spans several; '' for none."""
    named = sorted(compare.boards_of(frame))
    return "" if not named else f"board {named[0]}" if len(named) == 1 else f"boards {', '.join(named)}"


def _run_words(frame: pd.DataFrame) -> str:
    board = boards_words(frame)
    return report.run_label(frame) + (f" · {board}" if board else "") + f" · host {_first(frame, 'host')}"


def _short_run(frame: pd.DataFrame) -> str:
    return f"run {_first(frame, 'run_id')} ({str(_first(frame, 'timestamp'))[:16].replace('T', ' ')})"


def against_words(check: Check) -> str:
    """What the candidate was judged against, in a sentence."""
    passed = (f"; passed over as baseline, far outside the other runs of its history: {', '.join(check.passed_over)}"
              if check.passed_over else "")
    return _against_words(check) + passed


def _against_words(check: Check) -> str:
    if check.against == "run":
        return f"baseline {_run_words(check.baseline)}"
    board = boards_words(check.candidate)
    model_runs = min(compare.HISTORY_RUNS, 1 + check.history_runs)  # the baseline and the newest earlier runs
    one_board = compare.same_board(check.baseline, check.candidate)
    runs, whose = (check.board_runs, "the board") if one_board else (model_runs, "the device model")
    if runs >= compare.MIN_HISTORY:
        bands = f"bands from {text.count(runs, 'earlier run')} of {whose}"
    else:
        bands = (f"bands from the measured {'one-board ' if one_board else ''}floors (fewer than {compare.MIN_HISTORY} "
                 f"earlier runs of {whose})")
    if one_board:
        return (f"its history on {board}: the board's newest earlier run, {_short_run(check.baseline)}, as "
                f"baseline; {bands}")
    why = f"no earlier run of {board} measured its points" if board else "the run names no board"
    return (f"its history on {_first(check.candidate, 'device_name')} ({why}): the model's newest earlier run, "
            f"{_run_words(check.baseline)}, as baseline; {bands}")


OUTCOMES = {PASSED: "passed", REGRESSED: "FAILED", NOT_CLEAN: "NOT CLEAN (measure again on a quiet GPU)"}


def verdict_line(check: Check) -> str:
    headline = compare.headline(check.table, len(check.baseline) - len(check.table),
                                len(check.candidate) - len(check.table))
    return f"{OUTCOMES[check.exit_code]}: {headline}"


def conditions_words(check: Check) -> str:
    """The conditions of both runs in one line (``compare.conditions_words``)."""
    return compare.conditions_words(check.baseline, check.candidate)


def method_words(check: Check) -> str:
    """Whether the candidate and its baseline were measured by the same method (``compare.method_words``)."""
    return compare.method_words(check.baseline, check.candidate)


def _figures(row) -> str:
    """A point's figures in one line: change, medians, band and where it came from, p."""
    gbps = f" ({row['baseline_gbps']:.1f} → {row['candidate_gbps']:.1f} GB/s)" \
        if pd.notna(row.get("baseline_gbps")) and pd.notna(row.get("candidate_gbps")) else ""
    return (f"{compare.percent(row['change'])}: median {text.duration_ms(row['baseline_ms'])} → "
            f"{text.duration_ms(row['candidate_ms'])}{gbps}; run-to-run ±{text.percent(row['run_to_run'], 1)} "
            f"({row['run_to_run_source']}); Mann-Whitney p {text.p_value(row['p_value'])}; conditions: "
            f"{row.get('conditions') or causes.words(None)}")


def _md(value) -> str:
    """Run content for Markdown: control characters shown as \\xNN, every punctuation mark escaped."""
    return plain(printable(value), None)


def markdown(check: Check) -> str:
    """The job summary: verdict, what was checked against what, the slower points with their figures, the band
    sources, and every point folded away. Run content (ids, devices, hosts) is escaped."""
    table = check.table
    lines = [f"## PinPoint check: {_md(check.experiment)} on {_md(_first(check.candidate, 'device_name'))}",
             "", f"**{_md(verdict_line(check))}**", "",
             f"- Candidate: {_md(_run_words(check.candidate))}",
             f"- Against: {_md(against_words(check))}",
             f"- {_md(compare.band_summary(table))}",
             f"- Conditions: {_md(conditions_words(check))}",
             f"- {_md(method_words(check))}",
             "- Verdict counts: " + " · ".join(f"{_md(name)}: {count}"
                                               for name, count in compare.verdict_counts(table).items()), ""]
    header = ["| point | baseline | candidate | change | verdict | run-to-run ± | band from | conditions |",
              "|---|---:|---:|---:|---|---:|---|---|"]

    def rows(part):
        return [f"| {_md(r['point'])} | {text.duration_ms(r['baseline_ms'])} | "
                f"{text.duration_ms(r['candidate_ms'])} | {compare.percent(r['change'])} | "
                f"{_md(compare.verdict_text(r))} | ±{text.percent(r['run_to_run'], 1)} | "
                f"{_md(r['run_to_run_source'])} | {_md(r.get('conditions') or causes.words(None))} |"
                for r in part.to_dict("records")]

    if not check.slower.empty:
        lines += [f"### Slower beyond noise ({len(check.slower)})", "", *header,
                  *rows(check.slower.sort_values("change")), ""]
    lines += [f"<details><summary>Every point ({len(table)})</summary>", "", *header, *rows(table), "", "</details>",
              ""]
    return "\n".join(lines)


def junit_xml(check: Check) -> str:
    """JUnit XML for CI test reports: one testsuite, one testcase per point, a failure for each slower one with
    its figures in the message."""
    def clean(value) -> str:  # XML 1.0 has no place for control characters: show them as \\xNN
        return printable(value).replace("\t", " ")

    suites = ET.Element("testsuites", name="PinPoint check")
    suite = ET.SubElement(suites, "testsuite", name=clean(f"{check.experiment} on "
                                                          f"{_first(check.candidate, 'device_name')}"),
                          tests=str(len(check.table)), failures=str(len(check.slower)), errors="0", skipped="0")
    properties = ET.SubElement(suite, "properties")
    for name, value in (("candidate", _run_words(check.candidate)), ("against", against_words(check)),
                        ("bands", compare.band_summary(check.table)), ("conditions", conditions_words(check)),
                        ("method", method_words(check))):
        ET.SubElement(properties, "property", name=name, value=clean(value))
    for row in check.table.to_dict("records"):
        case = ET.SubElement(suite, "testcase", classname=clean(f"pinpoint.{check.experiment}"),
                             name=clean(row["point"]))
        if row["verdict"] == compare.SLOWER:
            said = compare.verdict_text(row)
            failure = ET.SubElement(case, "failure", type="slower beyond noise, not clean" if row.get("not_clean")
                                    else "slower beyond noise", message=clean(f"{said}, {_figures(row)}"))
            failure.text = clean(f"{row['point']}: {_figures(row)}\ncandidate {_short_run(check.candidate)} against "
                                 f"{against_words(check)}")
        else:
            ET.SubElement(case, "system-out").text = clean(f"{compare.verdict_text(row)}, {_figures(row)}")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _write(path: str, content: str, append: bool = False) -> None:
    try:
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            f.write(content)
    except OSError as exc:
        raise CheckError(f"cannot write {shorten(path, 120)}: {exc.strerror or exc}") from None


def check_command(args, catalog=None) -> int:
    """The runner's ``check``: 0 none slower, 1 some point slower beyond noise, 2 could not check (one line on
    stderr, never a traceback), 3 every slower point not clean (its causes named)."""
    try:
        if catalog is None:
            catalog = Catalog()
        check = run_check(catalog, args.candidate, args.against)
        print(printable(f"{verdict_line(check)}\n  candidate: {_run_words(check.candidate)}\n  against: "
                        f"{against_words(check)}\n  {compare.band_summary(check.table)}\n  conditions: "
                        f"{conditions_words(check)}\n  {method_words(check)}"))
        slower = check.slower.sort_values("change")
        for row in slower.head(SHOWN_SLOWER).to_dict("records"):
            named = causes.cause_words(row.get("baseline_conditions"), row.get("candidate_conditions"))
            print(printable(f"  slower{f', not clean ({named})' if named else ''}: {row['point']}: {_figures(row)}"))
        if len(slower) > SHOWN_SLOWER:
            print(f"  and {len(slower) - SHOWN_SLOWER} more slower points (the summary and JUnit files list each)")
        summary = markdown(check)
        if args.summary:
            _write(args.summary, summary)
        if os.environ.get("GITHUB_STEP_SUMMARY"):
            _write(os.environ["GITHUB_STEP_SUMMARY"], summary + "\n", append=True)
        if args.junit:
            _write(args.junit, junit_xml(check))
        return check.exit_code
    except (CheckError, StoreError) as exc:
        print(printable(f"error: {' '.join(str(exc).split())}"), file=sys.stderr)
        return CANNOT_CHECK
    except Exception as exc:  # a failure nobody foresaw: still one line, and not mistaken for a regression
        print(printable(f"error: unexpected {type(exc).__name__}: {shorten(' '.join(str(exc).split()), 300)}"),
              file=sys.stderr)
        return CANNOT_CHECK
