"""Runs → "Open on its page" for every bundled run, and /?run=ID, through AppTest (replay, a throwaway store): each
run opens on its own page (and tab, and timing view) with no error box, and no message names a server path."""

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from gpu.core.errors import ValidationError
from gpu.experiments.registry import PAGE_OF
from gpu.service.backends import ReplayBackend, submit_values
from tests.test_app_reviews import fresh_store  # noqa: F401 (autouse: replay mode, a throwaway store)

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


def messages(at) -> list[str]:
    return [e.value for kind in (at.error, at.warning, at.info, at.caption, at.markdown, at.exception) for e in kind]


def server_paths(texts: list[str]) -> list[str]:
    """Absolute paths of this machine in shown text: the checkout's, a temporary folder's, a home folder's."""
    pattern = re.compile(rf"({re.escape(str(ROOT))}|/tmp/|/home/|/work/|/root/|/var/)")
    return [t for t in texts if pattern.search(t.replace("\\", ""))]


def bundled_runs() -> list[tuple[str, str]]:
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/runs.py").run()
    options = at.selectbox(key="runs_selected").options
    return [(o.split(" · ")[0], o.split(" · ")[1]) for o in options]


@pytest.mark.slow
def test_every_bundled_run_opens_on_its_page_without_an_error_or_a_server_path():
    runs = bundled_runs()
    assert {experiment for _, experiment in runs} == set(PAGE_OF)  # every experiment has a bundled run
    for run_id, experiment in runs:
        at = AppTest.from_file(APP, default_timeout=120).run()
        at.switch_page("pages/runs.py").run()
        at.selectbox(key="runs_selected").set_value(run_id).run()
        at.button(key="runs_open").click().run()
        shown = messages(at)
        assert not at.exception and not at.error, (run_id, experiment, shown)
        assert at.query_params["run"] == run_id
        assert any(f"**Bundled run** {run_id}" in i.value for i in at.info), (run_id, shown)  # not "Stored run"
        assert at.get("plotly_chart"), (run_id, experiment, shown)  # the run is drawn, not only talked about
        assert not [t for t in shown if "cannot run" in t or "nothing to replay" in t], (run_id, shown)
        assert not server_paths(shown), (run_id, server_paths(shown))


def test_a_run_in_the_root_address_opens_its_page():
    run_id, experiment = next((r, e) for r, e in bundled_runs() if e == "coalescing")
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception
    assert at.query_params["run"] == run_id and "coalescing_elements" in at.query_params  # the Coalescing page's
    assert any(f"**Bundled run** {run_id}" in i.value for i in at.info)  # a recording shipped with PinPoint


def test_a_replay_without_the_experiment_names_no_folder(tmp_path):
    with pytest.raises(ValidationError) as caught:
        submit_values(ReplayBackend(tmp_path), "managed", {}).outcome()
    assert str(tmp_path) not in str(caught.value) and "no recorded managed runs" in str(caught.value)
