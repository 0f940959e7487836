"""Links that reproduce a view: controls restored from the URL, bad values named and ignored, the URL kept in
step with the controls (AppTest in replay mode) and the value codec itself."""

import json
import re
from datetime import date
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pages._ui.url_state import parse_url_value, url_text

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture(autouse=True)
def replay_mode(monkeypatch):
    monkeypatch.setenv("PINPOINT_BACKEND", "replay")


def open_with(page, /, **params):
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def charts(at):
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


@pytest.mark.parametrize("raw,kind,options,value", [
    ("1", "bool", None, True), ("0", "bool", None, False), ("64", "int", [32, 64], 64), ("5", "int", (1, 255), 5),
    ("pinned,pageable", "strs", ["pageable", "pinned"], ["pinned", "pageable"]), ("1,16", "ints", [1, 4, 16], [1, 16]),
    ("4096~65536", "int_range", [4096, 8192, 65536], (4096, 65536)), ("free text", "str", None, "free text"),
])
def test_values_round_trip_through_their_url_text(raw, kind, options, value):
    assert parse_url_value(raw, kind, options) == value
    assert parse_url_value(url_text(value, kind), kind, options) == value


@pytest.mark.parametrize("raw,kind,options,message", [
    ("maybe", "bool", None, "not 0 or 1"), ("x", "int", [1], "not a whole number"),
    ("3", "int", [1, 2], "not one of the choices"), ("300", "int", (1, 255), "outside 1…255"),
    ("4096", "int_range", [4096], "not a range"), ("pinned,mapped", "strs", ["pinned"], "'mapped' is not one"),
])
def test_bad_values_are_refused_with_the_reason(raw, kind, options, message):
    with pytest.raises(ValueError, match=message):
        parse_url_value(raw, kind, options)


def test_a_transfers_link_restores_the_controls_and_the_view():
    at = open_with("pages/transfers.py", transfers_modes="pinned,pageable", transfers_size_range="65536~16777216",
                   transfers_include_alloc="1")
    assert at.pills(key="transfers_modes").value == ["pinned", "pageable"]
    assert at.select_slider(key="transfers_size_range").value == (65536, 16777216)
    assert at.toggle(key="transfers_include_alloc").value is True
    copy_only = charts(at)[0]
    assert copy_only["layout"]["title"]["text"].startswith("Copy only")
    assert {t["name"] for t in copy_only["data"] if "PCIe" not in t["name"]} == {"pinned", "pageable (NumPy)"}
    assert not at.warning


def shown(markdown: str) -> str:
    """A message as the reader sees it: Markdown's backslash escapes and the invisible spaces that keep a URL
    from becoming a link removed."""
    return re.sub(r"\\(.)", r"\1", markdown).replace("\u200b", "")


def warnings(at) -> str:
    return " ".join(shown(w.value) for w in at.warning)


def test_bad_and_unknown_link_values_are_named_and_the_defaults_used():
    at = open_with("pages/transfers.py", transfers_directions="sideways", transfers_size_range="5~9", bogus="1")
    raw = " ".join(w.value for w in at.warning)
    # Values from the link are shown as plain text: every Markdown mark escaped.
    assert r"transfers\_directions=sideways: \'sideways\' is not one of the choices" in raw
    warning = warnings(at)
    assert "the default is used" in warning
    assert "transfers_size_range=5~9: " in warning and "bogus is not a setting of this page" in warning
    assert at.pills(key="transfers_directions").value == ["h2d", "d2h"]  # the defaults
    assert "bogus" not in at.query_params and at.query_params["transfers_directions"] == "h2d,d2h"
    assert charts(at)


def test_the_url_follows_the_controls_and_the_link_reproduces_them():
    at = open_with("pages/transfers.py")
    at.pills(key="transfers_modes").set_value(["mapped"]).run()
    assert at.query_params["transfers_modes"] == "mapped"
    link = at.get("code")[0].value
    assert "transfers_modes=mapped" in link
    query = dict(part.split("=", 1) for part in link.split("?", 1)[1].split("&"))
    again = open_with("pages/transfers.py", **{k: v.replace("%2C", ",").replace("%7E", "~") for k, v in query.items()})
    assert again.pills(key="transfers_modes").value == ["mapped"]



def test_the_link_names_the_page_at_the_root_and_opens_it_with_its_values():
    """Links read /?page=transfers&… (loaded at the root, Streamlit's frontend probes no page path, so no 404s);
    opening one runs that page with the link's values, and the address then names the page as the menu does."""
    link = open_with("pages/transfers.py", transfers_modes="mapped").get("code")[0].value
    assert link.startswith("?page=transfers&") and "transfers_modes=mapped" in link
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in (part.split("=", 1) for part in link.split("?", 1)[1].split("&")):
        at.query_params[key] = value.replace("%2C", ",").replace("%7E", "~")
    at.query_params["present"] = "0"
    at.run()
    assert not at.exception, at.exception
    assert at.pills(key="transfers_modes").value == ["mapped"] and charts(at)
    assert "page" not in at.query_params and at.query_params["present"] == "0"
    assert not at.warning


def test_a_link_to_an_unknown_page_says_so_and_shows_overview():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["page"] = "<b>nowhere</b>"
    at.run()
    assert not at.exception, at.exception
    assert "page=<b>nowhere</b> is not a page of PinPoint, so Overview is shown" in warnings(at)
    assert "page" not in at.query_params

def test_a_streams_link_restores_the_chosen_timeline():
    at = open_with("pages/streams.py", streams_focus_chunks="64", streams_focus_streams="16", streams_lanes="engine")
    gantt = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("Timeline:"))
    assert "16 streams × 64 chunks" in gantt["layout"]["title"]["text"]
    assert {y for trace in gantt["data"] for y in trace["y"]} == {"copy engine H2D", "compute", "copy engine D2H"}


def test_a_compare_link_restores_the_runs_and_the_normalized_view():
    from gpu.core import schema
    from gpu.results.exchange.catalog import BUNDLED_DIRS

    h100 = schema.read_results(next(BUNDLED_DIRS[1].glob("transfers_nvidia-h100*.parquet")))["run_id"].iloc[0]
    at = open_with("pages/compare.py", compare_candidates=h100, compare_normalized="1")
    assert at.multiselect(key="compare_candidates").value == [h100]
    assert charts(at)[0]["layout"]["title"]["text"].startswith("Normalized")


@pytest.mark.parametrize("value", ["-4KiB", "99GiB", "1" * 10_000, "<script>alert(1)</script>", "x" * 10_000,
                                   "[a](http://x.example)"])
def test_bad_custom_sizes_in_a_link_give_the_default_sizes_and_a_chart_with_a_short_warning(value):
    at = open_with("pages/transfers.py", transfers_custom_sizes=value)
    assert not at.error
    warning = warnings(at)
    assert f"transfers_custom_sizes={value[:40]}" in warning and "the default is used" in warning
    assert value not in warning or len(value) <= 40  # named, shortened: never printed in full
    if len(value) > 40:
        assert "(10,000 characters)" in warning
    assert "](" not in at.warning[0].value  # shown as typed, never as a link
    assert at.text_input(key="transfers_custom_sizes").value == ""
    assert "transfers_custom_sizes" not in at.query_params
    assert charts(at) and at.select_slider(key="transfers_size_range").value == (4096, 1 << 30)


def test_bad_typed_sizes_keep_the_slider_sizes_and_their_chart():
    at = open_with("pages/transfers.py")
    at.text_input(key="transfers_custom_sizes").set_value("64KiB, 3 parsecs").run()
    assert not at.error and charts(at)
    assert "Exact sizes 64KiB, 3 parsecs not used: 'parsecs' is not a size" in warnings(at)


def test_a_reversed_size_range_is_swapped_with_a_note():
    at = open_with("pages/transfers.py", transfers_size_range=f"{1 << 30}~65536")
    assert at.select_slider(key="transfers_size_range").value == (65536, 1 << 30)
    assert f"the range was reversed, so it is read as 65536~{1 << 30}" in warnings(at)
    assert charts(at) and not at.error


def test_present_takes_only_0_or_1_and_says_so():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["present"] = "banana"
    at.run()  # the first page a link opens (here Overview) says it
    assert not at.exception, at.exception
    assert "present=banana is not 0 or 1, so presentation mode stays off" in warnings(at)
    assert "present" not in at.query_params
    at.switch_page("pages/transfers.py").run()
    assert [e for e in at.expander if "Link to this view" in e.label]  # the desk view


@pytest.mark.parametrize("scene,shown_scene,note", [
    ("999", 6, "scene=999 is outside 1 … 6; showing scene 6"), ("-5", 1, "scene=-5 is outside 1 … 6; showing scene 1"),
    ("two", 1, "scene=two is not a scene number; the talk starts at scene 1"), ("3", 3, None),
])
def test_a_scene_outside_the_talk_is_clamped_with_a_note(scene, shown_scene, note):
    at = open_with("pages/talk.py", scene=scene)
    assert any(c.value.endswith(f"scene {shown_scene} of 6") for c in at.caption)
    assert at.query_params["scene"] == str(shown_scene)
    if note:
        assert note in warnings(at)
    else:
        assert not at.warning


@pytest.mark.parametrize("page", ["pages/overview.py", "pages/runs.py", "pages/talk.py", "pages/coalescing.py",
                                  "pages/compare.py"])
def test_unknown_link_keys_are_named_on_every_page(page):
    if page == "pages/overview.py":  # the default page: a link without a path opens it
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params["colour"] = "blue"
        at.run()
        assert not at.exception, at.exception
    else:
        at = open_with(page, colour="blue")
    assert "colour is not a setting of this page; it is ignored" in warnings(at)
    if page in ("pages/coalescing.py", "pages/compare.py"):  # pages with a link to copy drop it from the address
        assert "colour" not in at.query_params


def test_a_scene_key_on_another_page_is_unknown_there():
    assert "scene is not a setting of this page" in warnings(open_with("pages/transfers.py", scene="2"))


def open_link(path: str, params: dict) -> AppTest:
    """A PinPoint link: /?page=PATH&… opened in a fresh session."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["page"] = path
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def choose_second(key: str, value_of=lambda shown: shown):
    """A step before the link is taken: the second option of the selectbox ``key`` chosen, as a user would
    (``value_of``: the option's value from its text, where the page formats it)."""
    def step(at: AppTest) -> None:
        box = at.selectbox(key=key)
        assert len(box.options) >= 2, box.options
        box.set_value(value_of(box.options[1])).run()
    return step


MEMORY_TABS = ["Managed memory", "Pools vs per-call allocation", "Batching copies", "Host-memory latency"]
OCCUPANCY_CURVES = ["vs block size", "vs registers", "vs shared memory"]
# Every page, and every state of a page that a control outside its widgets' values sets: each tab, a highlighted
# kernel, a run chosen on the Runs page.
ROUND_TRIPS = [pytest.param(path, {}, None, id=path) for path in (
    "overview", "transfers", "coalescing", "reductions", "occupancy", "streams", "roofline", "memory-modes", "peers",
    "runs", "compare", "fleet")] + [
    pytest.param("memory-modes", {"memory_modes_tab": tab}, None, id=f"memory-modes-{tab}") for tab in MEMORY_TABS] + [
    pytest.param("occupancy", {"occupancy_curve": tab}, None, id=f"occupancy-{tab}") for tab in OCCUPANCY_CURVES] + [
    pytest.param("roofline", {}, choose_second("roofline_kernel"), id="roofline-kernel"),
    pytest.param("runs", {}, choose_second("runs_selected", lambda shown: shown.split(" · ")[0]), id="runs-run"),
    pytest.param("runs", {"runs_filter_experiment": "transfers", "runs_filter_label": "a"}, None, id="runs-filters"),
    pytest.param("compare", {}, choose_second("compare_history_point"), id="compare-history"),
    pytest.param("talk", {"scene": "3"}, None, id="talk-scene")]
# The widgets a link does not hold: the sidebar's (this session's source and mode) and the Runs page's actions
# (an import, a label, the trash), which change the store, not the view.
NOT_VIEW = re.compile(r"^(runs_import_|runs_upload|runs_label_|runs_trash_|runs_purge_)")
WIDGETS = ("selectbox", "multiselect", "select_slider", "slider", "toggle", "radio", "text_input", "text_area",
           "date_input", "button_group", "checkbox", "number_input")


def view_controls(at: AppTest) -> dict[str, object]:
    """Each control of the page that sets what it shows, by key, with its value."""
    sidebar = {w.key for kind in WIDGETS for w in at.sidebar.get(kind)}
    return {w.key: w.value.tolist() if hasattr(w.value, "tolist") else w.value for kind in WIDGETS
            for w in at.get(kind) if w.key and w.key not in sidebar and not NOT_VIEW.match(w.key)}


@pytest.mark.parametrize("path,opened,step", ROUND_TRIPS)
@pytest.mark.slow
def test_the_link_a_page_writes_reopens_it_with_every_control_as_written(path, opened, step):
    """Every control that sets the view, the open tab included, writes its value into the address; that address,
    opened anew, restores every one of them (none named as unusable), opens the same tab, and writes the same
    address back."""
    first = open_link(path, opened)
    if step is not None:
        step(first)
    written = dict(first.query_params)
    assert opened.items() <= written.items(), written
    controls = view_controls(first)
    unwritten = {k for k, v in controls.items() if v not in (None, "") and v != [] and k not in written}
    assert not unwritten, f"controls not in the link: {unwritten}"
    if path != "overview":  # the one page without settings
        assert written, "no settings written"
    reopened = open_link(path, written)
    assert "Not used as written" not in warnings(reopened)
    assert dict(reopened.query_params) == written
    assert view_controls(reopened) == controls
    for key in {"memory_modes_tab", "occupancy_curve"} & set(written):
        assert reopened.session_state[key] == written[key]


def test_an_occupancy_link_sets_the_calculator_and_refuses_values_off_its_sliders():
    at = open_link("occupancy", {"occupancy_block": "512", "occupancy_registers": "64", "occupancy_static": "1024",
                                 "occupancy_dynamic": "100"})
    assert at.select_slider(key="occupancy_block").value == 512
    assert at.slider(key="occupancy_registers").value == 64 and at.slider(key="occupancy_static").value == 1024
    assert at.slider(key="occupancy_dynamic").value == 0  # not a step of 256 bytes: the default, and a note
    assert "occupancy_dynamic=100" in warnings(at)


def test_a_memory_modes_link_restores_the_batching_pieces_it_names():
    written = dict(open_link("memory-modes", {}).query_params)
    count = written["batching_count"]
    pieces = written[f"batching_pieces_{count}"].split(",")[:2]
    at = open_link("memory-modes", {f"batching_pieces_{count}": ",".join(pieces)})
    assert [str(p) for p in at.button_group(key=f"batching_pieces_{count}").value] == pieces
    assert at.query_params[f"batching_pieces_{count}"] == ",".join(pieces)


@pytest.mark.parametrize("path,params,note", [
    ("transfers", {"transfers_directions": ["h2d", "sideways", "d2h"]},
     "transfers_directions is given 3 times (h2d, sideways, d2h); only the last, d2h, is used"),
    ("transfers", {"present": ["1", "0"]}, "present is given 2 times (1, 0); only the last, 0, is used"),
    ("talk", {"scene": ["NaN", "2"]}, "scene is given 2 times (NaN, 2); only the last, 2, is used"),
])
def test_a_key_given_twice_is_read_once_with_a_note_naming_what_was_used(path, params, note):
    at = open_link(path, params)
    assert note in warnings(at)
    assert all(not isinstance(at.query_params.get(key), list) for key in params)  # the address keeps one value
    if path == "transfers" and "transfers_directions" in params:
        assert at.pills(key="transfers_directions").value == ["d2h"] and charts(at)
    if "present" in params:  # present=0 is the desk view
        assert [e for e in at.expander if "Link to this view" in e.label]
    if path == "talk":
        assert any(c.value.endswith("scene 2 of 6") for c in at.caption)


def test_a_value_named_twice_in_a_list_is_kept_once_with_a_note():
    at = open_link("coalescing", {"coalescing_groups": "strided,strided,strided"})
    assert "coalescing_groups=strided,strided,strided: a value is named more than once, so it is read as strided" \
        in warnings(at)
    assert at.pills(key="coalescing_groups").value == ["strided"]
    assert at.query_params["coalescing_groups"] == "strided"


def test_a_control_the_page_stops_showing_is_dropped_from_the_address_without_a_note():
    """A parameter the session's page wrote itself (the Roofline's kernel, before a GPU with nothing to highlight
    was chosen) came from no link: it is not named as a setting the page does not know."""
    def page():
        import streamlit as st

        from pages._ui.url_state import UrlState
        url = UrlState.start()
        if st.session_state.get("with_kernel", True):
            url.restore("kernel", "str", ["(none)", "copy"])
            st.selectbox("Highlight a kernel", ["(none)", "copy"], key="kernel")
        url.sync(link=False)

    at = AppTest.from_function(page, default_timeout=60)
    at.query_params["colour"] = "blue"
    at.run()
    assert "colour is not a setting of this page" in warnings(at) and at.query_params["kernel"] == "(none)"
    at.session_state["with_kernel"] = False
    at.run()
    assert not at.warning and "kernel" not in at.query_params


def test_a_latency_size_linked_without_its_tab_is_kept_for_it_not_refused():
    at = open_link("memory-modes", {"host_latency_sizes": "4096"})
    assert "host_latency_sizes" not in warnings(at)
    assert at.query_params["host_latency_sizes"] == "4096"  # kept for the tab, which applies it when opened
    assert at.session_state["memory_modes_tab"] == "Managed memory"


def test_the_runs_page_offers_a_link_with_its_filters_and_takes_them_back():
    at = open_link("runs", {"runs_filter_experiment": "transfers", "runs_filter_dates": "2000-01-01~2099-12-31"})
    assert not at.warning
    link = at.get("code")[0].value
    assert link.startswith("?page=runs&") and "runs_filter_experiment=transfers" in link
    assert at.date_input(key="runs_filter_dates").value == (date(2000, 1, 1), date(2099, 12, 31))
    assert set(at.dataframe[0].value["experiment"]) == {"transfers"}
    at = open_link("runs", {"runs_filter_dates": "2026-13-01~2026-11-25"})
    assert "runs_filter_dates=2026-13-01~2026-11-25: '2026-13-01' is not a date (YYYY-MM-DD); the default is used" \
        in warnings(at)


@pytest.mark.parametrize("path", ["memory-modes", "fleet", "peers", "compare", "occupancy"])
def test_a_linked_value_replaces_the_default_without_streamlit_logging_a_stack_dump(path, monkeypatch):
    """Given a default and a value set through Session State, Streamlit logs a warning with a stack dump (once per
    process, hence the flag reset). A value from a link replaces the default instead. (Ranges keep theirs: Streamlit
    reads their two ends from it; none is on these pages.)"""
    import logging

    from streamlit.elements.lib import policies

    written = dict(open_link(path, {}).query_params)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger(policies.__name__)
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    logger.addHandler(handler)
    try:
        open_link(path, written)
    finally:
        logger.removeHandler(handler)
    assert not [r.getMessage() for r in records if "created with a default value" in r.getMessage()]


def test_a_page_that_syncs_twice_names_every_unusable_value_of_its_link():
    """Compare writes its history's controls after the comparisons: their notes join the first ones."""
    at = open_link("compare", {"colour": "blue", "compare_history_point": "nowhere"})
    warning = warnings(at)
    assert "colour is not a setting of this page" in warning
    assert "compare_history_point=nowhere: 'nowhere' is not one of the choices" in warning
    assert len([w for w in at.warning if "Not used as written" in w.value]) == 1
