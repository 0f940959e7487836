"""Every stage state of every page, at 1920×1080 and 1920×960 with ?present=1 (tests/stage_states.py): each tab,
toggle, radio entry and menu entry a page shows on stage, one at a time from its default, and every talk scene. Each
fits without scrolling, keeps its text and ticks at 14 px or more with no chart text on another, draws a chart with
data (or says in one line why not) and shows exactly one takeaway. Screenshots: out/screenshots/states-*.png."""

import pytest

from tests.browser_helper import CHROMIUM
from tests.stage_states import TALK_SCENES, run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing"),
]
TABS = 3  # browser tabs side by side against the one server


def test_every_stage_state_of_every_page_fits_reads_and_says_one_thing(server):
    found = run(server, heights=(1080, 960), tabs=TABS)
    names = {state.name for state in found.states}
    print(f"{len(found.states)} stage states, each at 1920×1080 and 1920×960, in {found.seconds:.0f} s")
    # the states were read from the pages: Include allocation, every Peers copy, every Memory modes tab, the scenes
    assert {"transfers transfers_include_alloc=flipped", "memory-modes tab=Host-memory latency",
            "peers peers_method=single copy",
            "compare compare_normalized=flipped", "streams streams_lanes=one per engine",
            *(f"talk scene {n}" for n in range(1, TALK_SCENES + 1))} <= names, sorted(names)
    assert not found.problems, "\n".join(found.problems)
