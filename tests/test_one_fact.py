"""One fact, one number: every verdict of the built-in talk against the stage view of the page that shows the same
recording (AppTest in replay). A figure that the talk and the page work out apart, or against different baselines,
fails here."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from gpu.experiments.registry import EXPERIMENTS
from gpu.present import claims, talks
from gpu.service.backends import ReplayBackend, submit_values

APP = str(Path(__file__).resolve().parent.parent / "app.py")
# The page view that shows a scene's figures, where it is not the page's default view.
VIEWS = {"pinned_allocated_per_call": {"transfers_include_alloc": "1"}}
SCENES = talks.load().scenes


@pytest.fixture(autouse=True)
def replay_mode(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")


def stage_lines(page: str, view: dict) -> list[str]:
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["present"] = "1"
    for key, value in view.items():
        at.query_params[key] = value
    at.run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return [m.value.replace("\u00a0", " ") for m in at.markdown if m.value.startswith("### ")]  # units kept whole


def test_every_judge_names_the_figures_a_page_shares():
    assert {s.judge for s in SCENES} <= set(claims.shared_figures())


@pytest.mark.parametrize("scene", SCENES, ids=lambda s: s.judge)
@pytest.mark.slow
def test_the_talk_and_the_page_say_the_same_figures(scene):
    values = claims.judges()[scene.judge](submit_values(ReplayBackend(), scene.experiment, scene.params).outcome())
    verdict = talks.headline(scene, submit_values(ReplayBackend(), scene.experiment, scene.params).outcome())
    stage = " ".join(stage_lines(EXPERIMENTS[scene.experiment].PAGE, VIEWS.get(scene.judge, {})))
    for field in claims.shared_figures()[scene.judge]:
        figure = str(values[field])
        assert figure in verdict, (field, figure, verdict)  # the talk says it…
        assert figure in stage, (field, figure, stage)  # …and the page says the same


def test_the_sweep_charts_draw_the_contiguous_read_their_costs_are_judged_against():
    from gpu.experiments.coalescing import view

    frame = submit_values(ReplayBackend(), "coalescing", {"elements": 1 << 26, "block_sizes": [256]}).outcome()
    for variant in ("strided", "offset"):
        names = [t.name for t in view.sweep_figure(frame, variant).data]
        assert "contiguous read: copy, 1 float/thread (2680 GB/s)" in names, names
