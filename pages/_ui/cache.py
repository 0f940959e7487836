"""Work that depends only on a recording, done once for every session: tables, sentences and figures keyed by a
results frame's contents."""

from __future__ import annotations

import contextlib
import functools
import weakref

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

# Lists per row (a pipeline table's serial samples too); the rows' other columns already tell runs apart.
UNHASHED_COLUMNS = ("samples_ms", "serial_samples_ms", "intervals")

def frame_key(frame: pd.DataFrame) -> tuple:
    """What identifies a results frame for the caches below, without hashing every sample: its columns and a hash
    of every other value (run id, parameters, medians …). Worked out once per frame object and shape: a page passes
    one frame to several cached functions (the Transfers page hashed its frame 9 times a view)."""
    plain = tuple(c for c in frame.columns if c not in UNHASHED_COLUMNS)
    known = _KEYS.get(id(frame))
    if known is not None and known[0]() is frame and known[1][:2] == (plain, len(frame)):
        return known[1]
    try:
        digest = pd.util.hash_pandas_object(frame[list(plain)], index=False).sum()
    except TypeError:  # an unhashable value (a list in a column): hash the text of every value instead
        digest = pd.util.hash_pandas_object(frame[list(plain)].astype(str), index=False).sum()
    key = (plain, len(frame), int(digest))
    with contextlib.suppress(TypeError):  # a frame that takes no weak reference is hashed at every call
        _KEYS[id(frame)] = (weakref.ref(frame, functools.partial(_forget, id(frame))), key)
    return key


# Keys of the frames alive now, by id (the weak reference tells a live frame from a later object with its id). Results
# frames are not changed in place once measured or read; a new column or row is a new shape, hashed again.
_KEYS: dict[int, tuple[weakref.ref, tuple]] = {}


def _forget(frame_id: int, reference: weakref.ref) -> None:
    if (known := _KEYS.get(frame_id)) is not None and known[0] is reference:
        _KEYS.pop(frame_id, None)


def cached(function):
    """``function(frame, …)`` (a table or a sentence computed from results) worked out once per frame and
    arguments for all sessions, so a page view does not redo it."""
    return st.cache_data(show_spinner=False, max_entries=256, ttl=3600, hash_funcs={pd.DataFrame: frame_key})(function)


def cached_figure(build):
    """``build(frame, …) → go.Figure``, built once per frame and arguments for all sessions. Each caller gets its own
    copy (a copy costs a tenth of a build), so a page that retitles or restyles it changes nobody else's."""
    shared_figure = st.cache_resource(show_spinner=False, max_entries=128, ttl=3600,
                                      hash_funcs={pd.DataFrame: frame_key})(build)

    @functools.wraps(build)
    def own_copy(*args, **kwargs):
        return go.Figure(shared_figure(*args, **kwargs))
    return own_copy
