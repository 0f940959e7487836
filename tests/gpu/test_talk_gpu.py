"""The talk's live path on a GPU: pressing m measures the scene and the verdict is computed from that run."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.gpu
APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.mark.parametrize("scene", ["1", "6"])
def test_measure_live_judges_the_scene_from_the_live_run(monkeypatch, scene):
    monkeypatch.setenv("PINPOINT_BACKEND", "auto")
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params["scene"] = scene
    at.run()
    at.switch_page("pages/talk.py").run()
    at.button(key="talk_measure").click().run()
    assert not at.exception, at.exception
    assert any("**Measured live** on NVIDIA" in c.value for c in at.caption), [w.value for w in at.warning]
    headline = next(m.value for m in at.markdown if m.value.startswith("## "))
    assert not headline.startswith("## No verdict"), headline
    print(f"\nscene {scene} live: {headline}")
