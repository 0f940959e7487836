"""The caches that let a replayed page view skip work done for an earlier view: keyed by a frame's contents
(its samples aside), and never shared mutably between sessions."""

import plotly.graph_objects as go
import pytest
import streamlit as st

from gpu.service.backends import ReplayBackend
from pages._ui import cache as shared


@pytest.fixture(scope="module")
def transfers():
    data = ReplayBackend().data
    return data[data["experiment"] == "transfers"].reset_index(drop=True)


@pytest.fixture(autouse=True)
def empty_caches():
    st.cache_data.clear()
    st.cache_resource.clear()


def test_frames_with_the_same_results_share_a_key_and_any_change_of_a_result_gives_another(transfers):
    assert shared.frame_key(transfers) == shared.frame_key(transfers.copy())
    slower = transfers.copy()
    slower.loc[3, "median_ms"] *= 1.01
    assert shared.frame_key(slower) != shared.frame_key(transfers)
    assert shared.frame_key(transfers.iloc[:-1]) != shared.frame_key(transfers)
    relabelled = transfers.assign(run_id="another")
    assert shared.frame_key(relabelled) != shared.frame_key(transfers)


def test_a_figure_is_built_once_and_every_caller_gets_its_own_copy(transfers):
    builds = []

    def build(frame, title):
        builds.append(title)
        return go.Figure(go.Scatter(x=frame["bytes"], y=frame["gbps"]), layout={"title": {"text": title}})

    cached = shared.cached_figure(build)
    first = cached(transfers, "Bandwidth")
    first.update_layout(title_text="changed by one page", font={"size": 20})  # e.g. the stage's sizes
    second = cached(transfers.copy(), "Bandwidth")
    assert builds == ["Bandwidth"]
    assert second.layout.title.text == "Bandwidth" and second.layout.font.size is None
    cached(transfers.iloc[:10], "Bandwidth")
    assert len(builds) == 2  # other results, another build


def test_a_cached_table_is_worked_out_once_per_frame(transfers):
    calls = []

    def fastest(frame):
        calls.append(1)
        return frame.sort_values("median_ms").head(3)

    cached = shared.cached(fastest)
    assert cached(transfers).equals(cached(transfers.copy()))
    assert len(calls) == 1


def test_a_frame_is_hashed_once_while_it_lives_and_again_when_its_shape_changes(transfers, monkeypatch):
    import gc

    import pandas as pd

    hashed = []
    hash_frame = pd.util.hash_pandas_object
    monkeypatch.setattr(pd.util, "hash_pandas_object", lambda *a, **k: hashed.append(1) or hash_frame(*a, **k))
    frame = transfers.copy()
    key = shared.frame_key(frame)
    assert [shared.frame_key(frame) for _ in range(8)] == [key] * 8 and len(hashed) == 1  # a page's cached calls
    frame["extra"] = 1.0  # a new column: another shape, hashed again
    assert shared.frame_key(frame) != key and len(hashed) == 2
    assert shared.frame_key(frame.iloc[:-1]) != key and len(hashed) == 3
    known = len(shared._KEYS)
    del frame
    gc.collect()
    assert len(shared._KEYS) < known  # a frame gone, its key forgotten
