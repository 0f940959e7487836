"""A part of a page with its own controls, each written once: ``Section``'s widget methods take the key, the label and
the default (or the options) of a control, restore its value from the URL before creating it, and register it, so
the page's ``sync`` writes it back into the URL. The URL's parameter names are the widget keys."""

from __future__ import annotations

from contextlib import nullcontext
from numbers import Integral

import streamlit as st

from pages._ui import controls


def value_kind(options, many: bool = False) -> str:
    """How a control's value is written in the URL (``url_state.parse_url_value``): whole numbers when every option
    is one, else text; ``many``: several, comma-separated."""
    numbers = bool(options) and all(isinstance(v, Integral) and not isinstance(v, bool) for v in options)
    return ("ints" if numbers else "strs") if many else ("int" if numbers else "str")


class Section:
    """Controls that restore themselves from the URL. ``page``: the ``ui.Page`` whose URL state they join;
    ``where``: the container (a column, a tab, an expander) the widgets go in unless a call names its own.

    Each method restores ``key`` (once per session, only a value the control can take; ``UrlState.restore`` says
    what it drops and why), then creates the widget under ``key`` and returns its value."""

    def __init__(self, page, where=st) -> None:
        self.url = page.url
        self.where = where

    def _place(self, where):
        return self.where if where is None else where

    def _inside(self, where):
        """Inside the container (PinPoint's controls create their widgets in the current one)."""
        where = self._place(where)
        return nullcontext() if where is st else where

    def _widget(self, make: str, key: str, kind: str, allowed, where, *args, check=None, **kwargs):
        """Restore ``key`` (a value of ``kind`` among ``allowed``), then create Streamlit's widget ``make``; a value
        the link set replaces the widget's default (given both, Streamlit logs a warning with a stack dump). A range's
        default stays: Streamlit reads from it that the widget has two ends."""
        if self.url.restore(key, kind, allowed, check) and not kind.endswith("_range"):
            kwargs = {k: v for k, v in kwargs.items() if k not in ("value", "index", "default")}
        return getattr(self._place(where), make)(*args, key=key, **kwargs)

    # --- Streamlit's widgets ------------------------------------------------------------------------------------
    def select_slider(self, label: str, options: list, key: str, where=None, **kwargs):
        return self._widget("select_slider", key, value_kind(options), options, where, label, options, **kwargs)

    def range_slider(self, label: str, options: list, key: str, where=None, **kwargs) -> tuple:
        """A ``select_slider`` over ``options`` with two ends (``value``: a pair), written low~high in the URL."""
        return self._widget("select_slider", key, "int_range", options, where, label, options, **kwargs)

    def slider(self, label: str, low: int, high: int, value: int, key: str, step: int = 1, where=None, **kwargs):
        """A numeric slider from ``low`` to ``high``; a linked value must be one of its steps."""
        allowed = (low, high) if step == 1 else list(range(low, high + 1, step))
        return self._widget("slider", key, "int", allowed, where, label, low, high, value=value, step=step, **kwargs)

    def radio(self, label: str, options: list, key: str, where=None, **kwargs):
        return self._widget("radio", key, value_kind(options), options, where, label, options, **kwargs)

    def selectbox(self, label: str, options: list, key: str, where=None, **kwargs):
        return self._widget("selectbox", key, value_kind(options), options, where, label, options, **kwargs)

    def multiselect(self, label: str, options: list, key: str, where=None, **kwargs) -> list:
        return self._widget("multiselect", key, value_kind(options, many=True), options, where, label, options,
                            **kwargs)

    def pills(self, label: str, options: list, key: str, where=None, **kwargs) -> list:
        """Multi-select pills."""
        return self._widget("pills", key, value_kind(options, many=True), options, where, label, options,
                            selection_mode="multi", **kwargs)

    def toggle(self, label: str, key: str, where=None, **kwargs) -> bool:
        return self._widget("toggle", key, "bool", None, where, label, **kwargs)

    def date_range(self, label: str, key: str, first, last, where=None, **kwargs) -> tuple:
        """A date input over two ends (``first`` … ``last`` by default), written first~last (ISO dates) in the URL."""
        return self._widget("date_input", key, "date_range", None, where, label, value=(first, last), **kwargs)

    def tabs(self, labels: list[str], key: str, where=None, **kwargs) -> list:
        """Tabs whose open one is a setting: switching reruns the page (so each tab's ``.open`` is known), and the
        link names the open tab by its label. ``default`` is kept beside a linked tab: it is part of the tabs'
        identity, so dropping it for one run would reset them on the next."""
        self.url.restore(key, "str", labels)
        return self._place(where).tabs(labels, key=key, on_change="rerun", **kwargs)

    def text_input(self, label: str, key: str, check=None, where=None, **kwargs) -> str:
        """A text box; ``check(text)`` may refuse a linked text by raising ValueError with the reason."""
        return self._widget("text_input", key, "str", None, where, label, check=check, **kwargs)

    # --- PinPoint's controls (pages/_ui/controls.py) ------------------------------------------------------------
    def select_one(self, label: str, options: list, key: str, where=None, **kwargs):
        """``controls.select_one``: a slider over ``options``, or the one option written out."""
        self.url.restore(key, value_kind(options), options)
        return controls.select_one(label, options, key, where=self._place(where), **kwargs)

    def axis_slider(self, experiment: str, name: str, key: str, options: list, where=None, **kwargs):
        """``controls.axis_slider``: one value of the experiment's axis, labelled and defaulted as it declares."""
        self.url.restore(key, value_kind(options), options)
        with self._inside(where):
            return controls.axis_slider(experiment, name, key, options, **kwargs)

    def axis_choices(self, experiment: str, name: str, key: str, options=None, where=None, **kwargs) -> list:
        """``controls.axis_choices``: several of the axis's values (or of ``options``), as the axis declares."""
        offered = list(controls.axis(experiment, name).values if options is None else options)
        self.url.restore(key, value_kind(offered, many=True), offered)
        with self._inside(where):
            return controls.axis_choices(experiment, name, key, offered, **kwargs)

    def block_size(self, key: str, options: list[int], label: str, placeholder: str, default: int = 256,
                   settings=None, where=None) -> list[int]:
        """``controls.block_size_setting``: the slider ``key`` and the typed size ``{key}_typed``."""
        self.url.restore(key, "int", options)
        self.url.restore(f"{key}_typed", "str")
        with self._inside(where):
            return controls.block_size_setting(key, options, label, placeholder, default, settings)
