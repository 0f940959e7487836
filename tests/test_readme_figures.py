"""The README tour's figures against what the pages' default views show (AppTest in replay): a figure quoted in the
README that the page no longer shows fails here, as the talk's figures do in tests/test_one_fact.py."""

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


@pytest.fixture(autouse=True)
def replay_mode(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")


def tour_step(title: str) -> str:
    """The README tour's step about one page, as one line of text."""
    readme = (ROOT / "README.md").read_text()
    [step] = [s for s in re.split(r"\n\d+\. ", readme.split("## A five-minute tour", 1)[1]) if s.startswith(title)]
    return " ".join(step.split())


def default_view(page: str) -> str:
    """Everything a page's default desk view writes, its Markdown unescaped and its bold marks dropped."""
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    shown = " ".join(e.value for e in [*at.markdown, *at.caption])
    return re.sub(r"\\(.)", r"\1", shown).replace("**", "").replace("\u00a0", " ")


@pytest.mark.slow
def test_the_readmes_streams_figures_are_the_default_views():
    shown = default_view("pages/streams.py")
    best = re.search(r"pinned: the best, (\d+ streams \(one per stage\) × \d+ chunks), takes ([\d.]+ ms) against "
                     r"([\d.]+ ms) serial \(([\d.]+×)\)", shown)
    assert best, shown
    config, took, serial, speedup = best.groups()
    step = tour_step("**Streams**")
    assert f"{config}, takes {took} against {serial} serial ({speedup})" in step, (best.groups(), step)
    assert "pageable: no measurable overlap" in shown and "pageable memory shows no measurable overlap" in step


def same_figure(readme: str, page: str) -> bool:
    """The README's figure is the page's, written to the README's fewer digits where it has fewer."""
    digits = len(readme.split(".")[1]) if "." in readme else 0
    return f"{float(page):.{digits}f}" == readme


@pytest.mark.slow
def test_the_readmes_transfers_figures_are_the_include_allocation_views():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["transfers_include_alloc"] = "1"
    at.run()
    at.switch_page("pages/transfers.py").run()
    assert not at.exception, at.exception
    shown = re.sub(r"\\(.)", r"\1", " ".join(m.value for m in at.markdown)).replace("**", "")
    copy = re.search(r"Copy only, 1 GiB: pinned ÷ pageable = H2D ([\d.]+)×", shown)
    allocated = re.search(r"Including allocation, 1 GiB: pinned ÷ pageable = H2D ([\d.]+)×", shown)
    assert copy and allocated, shown
    step = tour_step("**Transfers**")
    quoted = re.search(r"copies 1 GiB ([\d.]+)× as fast as pageable .* is ([\d.]+)× as fast once", step)
    assert quoted, step
    assert same_figure(quoted.group(1), copy.group(1)) and same_figure(quoted.group(2), allocated.group(1)), \
        (quoted.groups(), copy.group(1), allocated.group(1))


@pytest.mark.slow
def test_the_readmes_roofline_and_peers_figures_are_the_default_views():
    roofline = default_view("pages/roofline.py")
    ridge = re.search(r"the ridge is at ([\d.]+) FLOP/B \(FP32\)", roofline)
    placed = re.search(r"(\d+) kernels placed", roofline)
    assert ridge and placed, roofline
    assert f"the FP32 ridge at {ridge.group(1)} FLOP/B, {placed.group(1)} kernels placed" in tour_step("**Roofline**")
    peers = default_view("pages/peers.py")
    one_way = re.search(r"copy (\d+(?:–\d+)?) GB/s one way", peers)  # one figure, or the pairs' range
    latency = re.search(r"latency into the peer's memory (\d+) ns", peers)
    assert one_way and latency, peers
    step = tour_step("**Peers**")
    assert f"moves {one_way.group(1)} GB/s one way at 1 GiB" in step and f"takes {latency.group(1)} ns per load" \
        in step, step
    from gpu.core import schema
    from gpu.service.backends import ReplayBackend

    opened = ReplayBackend().recordings("peers").iloc[0]["run_id"]  # the recording the page opens on
    [file] = [p for p in (ROOT / "assets/replay").glob("peers_*.parquet") if opened in set(
        schema.read_results(p)["run_id"])]
    assert f"(`assets/replay/{file.name}`," in step, (file.name, step)


def test_the_readmes_measure_line_says_it_needs_a_gpu():
    readme = (ROOT / "README.md").read_text()
    [line] = [line for line in readme.splitlines() if line.startswith("pinpoint measure ")]
    assert "needs an NVIDIA GPU" in line, line
