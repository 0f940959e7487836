"""The live conditions strip during a Measure (gpu/present/live.py and pages/_ui/measure.follow): the worker's
``conditions_now`` in one plain-text line; garbage left out, nothing shown without a witness."""

from streamlit.testing.v1 import AppTest

from gpu.present.live import conditions_strip

NOW = {"sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "power_w": 382.4, "power_limit_w": 700, "temperature_c": 43,
       "other_processes": [[1039, "python3"]], "reasons": ["SW power cap"]}


def test_the_strip_says_clocks_power_temperature_other_processes_and_reasons():
    assert conditions_strip(NOW) == ("GPU now: SM 1,980 MHz · memory 2,619 MHz · 382 W of 700 W · 43 °C · other "
                                     "processes: pid 1039 (python3) · SW power cap")
    assert conditions_strip({**NOW, "other_processes": [], "reasons": []}).endswith("43 °C · no other process")


def test_no_witness_shows_nothing_and_garbage_is_left_out():
    assert conditions_strip(None) is None and conditions_strip({}) is None
    garbage = {"sm_clock_mhz": -5, "mem_clock_mhz": "fast", "power_w": float("nan"), "temperature_c": None,
               "other_processes": [["x", "y"], 7, [12]]}
    assert conditions_strip(garbage) == "GPU now: no other process"
    many = conditions_strip({"other_processes": [[p, "p"] for p in range(5)]})
    assert many.endswith("pid 2 (p) and 2 more")


def follow_script():
    import types

    import streamlit as st

    from pages._ui import measure

    class Handle:
        """Just what ``follow`` reads of a running job: two polls running, then done."""
        state, total, done, text, rows = "running", 4, 2, "pinned 1 GiB", []

        def __init__(self, now):
            self.conditions_now, self.polls = now, 0

        def wait(self, timeout):
            self.polls += 1
            return self.polls > 3

    now = st.session_state.get("now")
    original = measure.st.empty

    def recording_empty():  # keep what each placeholder showed, as the page does not outlive the job
        slot = original()
        shown = st.session_state.setdefault("shown", [])
        return types.SimpleNamespace(caption=lambda body: shown.append(body) or slot.caption(body),
                                     empty=slot.empty, container=slot.container)

    measure.st.empty = recording_empty
    try:
        measure.follow(Handle(now))
    finally:
        measure.st.empty = original


def test_follow_shows_the_strip_as_plain_text_while_a_job_measures():
    hostile = {**NOW, "other_processes": [[66, "**bold** <b>x</b>"]]}
    at = AppTest.from_function(follow_script, default_timeout=60)
    at.session_state["now"] = hostile
    at.run()
    assert not at.exception
    [line] = at.session_state["shown"]
    # stored text is Markdown-escaped (st.caption renders Markdown): the name reads as typed, never as markup
    assert line.startswith("GPU now\\: SM 1,980 MHz") and "pid 66 \\(\\*\\*bold\\*\\* \\<b\\>x\\</b\\>\\)" in line
    empty = AppTest.from_function(follow_script, default_timeout=60)
    empty.session_state["now"] = None
    empty.run()
    assert not empty.exception and empty.session_state["shown"] == []
