"""Links in a real browser (replay mode), for what AppTest cannot see: the tab the browser shows. A link naming a tab
opens on it, and a tab clicked is in "Link to this view", which opened in a new tab shows that tab again
(tests/test_url_state.py checks every control's round trip through AppTest)."""

from urllib.parse import quote_plus, urlencode

import pytest

from tests.browser_helper import CHROMIUM
from tests.test_stage_browser import link, open_page, settle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing")]

SELECTED_TAB = "[role=tab][aria-selected=true]"


def shown_tab(page) -> str:
    return page.locator(SELECTED_TAB).first.inner_text().strip()


def link_to_this_view(page, server: str) -> str:
    """The address in the page's "Link to this view" box (opened to read it)."""
    box = page.locator("[data-testid='stExpander']", has_text="Link to this view")
    box.locator("summary").click()
    address = box.locator("code").first.inner_text().strip()
    return address if address.startswith("http") else f"{server}/{address}"


@pytest.mark.parametrize("path,key,linked,clicked", [
    ("memory-modes", "memory_modes_tab", "Host-memory latency", "Batching copies"),
    ("occupancy", "occupancy_curve", "vs registers", "vs shared memory"),
])
def test_a_linked_tab_is_shown_and_a_clicked_tab_is_in_the_link(server, browser, path, key, linked, clicked):
    errors: list[str] = []
    page = open_page(browser, errors)
    page.goto(link(server, path, urlencode({key: linked})))
    settle(page, chart=True)
    assert shown_tab(page) == linked
    page.get_by_role("tab", name=clicked).click()
    page.wait_for_function("(name) => document.querySelector('[role=tab][aria-selected=true]')"
                           ".innerText.trim() === name", arg=clicked, timeout=30_000)
    settle(page, chart=True)
    address = link_to_this_view(page, server)
    assert f"{key}={quote_plus(clicked)}" in address
    again = open_page(browser, errors)
    again.goto(address)
    settle(again, chart=True)
    assert shown_tab(again) == clicked
    assert "Not used as written" not in again.inner_text("body")
    page.close()
    again.close()
    assert not errors, errors
