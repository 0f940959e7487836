"""What every page shares, by concern: ``backends`` (where the numbers come from), ``measure`` (the Measure flow and
store saving), ``url_state`` (links that reproduce a view), ``stage`` (presentation mode, defined once), ``controls``
(widget helpers), ``cache`` (work done once per recording for every session) and ``access`` (who is at the page, and
what their role lets them do).

A page starts with ``page = ui.Page(title, intro)``, which runs the steps that must come first (routed through app.py,
the backend chosen, the URL state started) and writes the title (and, at the desk, the intro), then: controls (each
written once, through a ``ui.Section``, which restores it from the URL; ``page.sync`` after them) → ``page.measure``
→ charts (``ui.chart``) → ``ui.takeaway``. ``page.measure`` refuses to run while a control restored from the URL has
not been synced into it."""

from __future__ import annotations

import streamlit as st

from gpu.service.backends import submit_values
from pages._ui import backends, controls, measure, url_state
from pages._ui.access import current_actor, permitted, sign_in_gate, why_not
from pages._ui.backends import (
    current_backend,
    live_backend,
    loaded_run,
    open_run_page,
    opened_run,
    replay_backend,
    require_router,
    run_catalog,
    session_id,
    source_banner,
    source_sidebar,
    use_replay,
)
from pages._ui.cache import cached, cached_figure, frame_key
from pages._ui.context import context
from pages._ui.controls import (
    axis,
    axis_choices,
    axis_default,
    axis_label,
    axis_powers,
    axis_slider,
    axis_steps,
    block_size_setting,
    download,
    first_default,
    select_one,
    show_reasons,
    typed_block_size,
)
from pages._ui.measure import outcome, request
from pages._ui.section import Section
from pages._ui.stage import (
    chart,
    check_present_value,
    desk,
    more_settings,
    plot,
    presenting,
    shortcuts,
    stage_exit,
    stage_style,
    takeaway,
)
from pages._ui.url_state import UrlState, open_linked_page, parse_url_value, url_text, view_link

__all__ = ["Page", "Section", "UrlState", "axis", "axis_choices", "axis_default", "axis_label", "axis_powers",
           "axis_slider", "axis_steps", "backends", "block_size_setting", "cached", "cached_figure", "chart",
           "check_present_value", "context", "controls", "current_actor", "current_backend", "desk", "download",
           "first_default",
           "frame_key", "live_backend", "loaded_run", "measure", "more_settings", "open_linked_page", "open_run_page",
           "opened_run", "outcome", "parse_url_value", "permitted", "plot", "presenting", "replay_backend", "request",
           "require_router", "run_catalog", "select_one", "session_id", "shortcuts", "show_reasons", "sign_in_gate",
           "source_banner", "source_sidebar", "stage_exit", "stage_style", "submit_values", "takeaway",
           "typed_block_size", "url_state", "url_text", "use_replay", "view_link", "why_not"]


class Page:
    """One run of a page script, its steps in order. Creating it routes the page through app.py (never on its own)
    and starts this run's URL state; ``backend`` is the live worker, the replay, or a run opened from the URL."""

    def __init__(self, title: str | None = None, intro: str | None = None) -> None:
        """``title``: the page's heading; ``intro``: what the page measures and how, shown at the desk only."""
        require_router()
        self.url = UrlState.start()
        self._backend = None
        if title is not None:
            st.title(title)
        if intro and desk():
            st.markdown(intro)

    @property
    def backend(self):
        if self._backend is None:
            self._backend = current_backend()
        return self._backend

    @property
    def live(self) -> bool:
        return self.backend.kind == "live"

    # --- controls -----------------------------------------------------------------------------------------------
    def link_notes(self) -> None:
        """Where the warning about a link's unusable values goes (else: where ``sync`` is first called)."""
        self.url.notes_here()

    def sync(self, final: bool = True, link: bool = True, own: tuple[str, ...] = ()) -> None:
        """After the controls: the URL follows them (see ``UrlState.sync``)."""
        self.url.sync(final, link, own)

    def recording(self, experiment: str, key: str, holds=None) -> str | None:
        """In replay, the recording to show (see ``controls.recording_choice``)."""
        return controls.recording_choice(self.backend, experiment, key, holds)

    def axis_options(self, experiment: str, column: str, run_id: str | None, live_options: list[int],
                     fallback: int | None = None, axis_name: str | None = None) -> list[int]:
        """Live: ``live_options``. Replay: the values of ``column`` the recording holds, else ``fallback`` (by
        default the declared default of the axis ``axis_name``; see ``controls.axis_options``)."""
        return controls.axis_options(self.backend, experiment, column, run_id, live_options, fallback, axis_name)

    def recorded_values(self, experiment: str, column: str, run_id: str | None = None) -> list:
        return controls.recorded_values(self.backend, experiment, column, run_id)

    def catalog(self):
        """The runs store and the bundled runs; when the store cannot be opened the page says why and stops."""
        catalog, reason = run_catalog()
        if catalog is None:
            controls.show_reasons([reason], "The runs store cannot be opened")
            st.stop()
        return catalog

    # --- measure ------------------------------------------------------------------------------------------------
    def measure(self, experiment: str, params: dict, key: str, run_id: str | None = None,
                extra_reasons: list[str] | None = None, preview=None):
        """The page's one experiment, measured or replayed; the page stops when there is none (after saying why,
        or asking for Measure). The controls must be synced into the URL first, so a link holds what is shown."""
        if self.url.unsynced:
            raise RuntimeError("page.sync() must follow the controls before page.measure()")
        return measure.checked_frame(self.backend, experiment, params, key, run_id, extra_reasons, preview)

    def section(self, experiment: str, params: dict, key: str, run_id: str | None = None,
                extra_reasons: list[str] | None = None, preview=None):
        """One experiment of a page with several in sections: its frame, or None (after saying why); the page's
        ``sync`` comes after its last section."""
        return measure.section_frame(self.backend, experiment, params, key, run_id, extra_reasons, preview)
