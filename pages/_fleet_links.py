"""The Fleet page's section on nodes: each node's link matrix (the suite's node runs, whose points are pairs of
GPUs) against the median of the same link type across the fleet, and the slow links named in words
(``gpu.present.fleet.links``)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from gpu.core.text import plain
from gpu.present.charts.fleet_links import link_matrix_figure
from gpu.present.fleet import links as fleet_links
from gpu.results.exchange.catalog import read_bundled
from pages import _ui as ui

SHOWN_SENTENCES = 12


@st.cache_resource(show_spinner="Reading the nodes' links…", max_entries=8, ttl=600)
def _stored_links(_store, run_ids: tuple, fingerprint: tuple) -> pd.DataFrame:
    """The pairs of a stored fleet's node runs (one run per node and experiment: a few, each read whole)."""
    return fleet_links.links(_store.load(run_id) for run_id in run_ids)


@st.cache_resource(show_spinner="Reading the bundled nodes' links…", max_entries=1)
def _bundled_links(directories: tuple) -> pd.DataFrame:
    frames, _, _ = read_bundled(directories)
    return fleet_links.links(frames.values())


def show(controls, catalog, stored: pd.DataFrame, choice: str, plan, bundled: bool, bundled_dirs) -> None:
    st.subheader("Nodes: the links between their GPUs")
    node_experiments = list(plan.node_experiments)
    if not node_experiments:
        st.caption(f"The {plain(plan.title)} suite has no node run (gpus = \"node\"): no links were measured.")
        return
    if bundled:
        table = _bundled_links(tuple(bundled_dirs))
    else:
        mine = stored[(stored["fleet_id"] == choice) & stored["experiment"].isin(node_experiments)]
        fingerprint = (catalog.store.describe(), len(stored), str(stored["stored_at"].max()))
        table = _stored_links(catalog.store, tuple(mine["run_id"]), fingerprint)
    if table.empty:
        st.markdown(f"No node of this fleet has a measured link matrix ({plain(', '.join(node_experiments))}: its "
                    "node runs). A node with one GPU has no peer.")
        return
    figures = fleet_links.figures(table)
    labels = dict(zip(figures["figure"], figures["label"], strict=True))
    figure = controls.selectbox("Link figure", list(figures["figure"]), "fleet_link_figure",
                                format_func=lambda f: labels.get(f, f))
    judged = ui.cached(fleet_links.judge)(table, figure)  # once per fleet and figure, for all sessions
    sentences = fleet_links.slow_link_sentences(judged)
    st.markdown(plain(fleet_links.summary(judged), None))
    if sentences:
        st.markdown("\n".join(f"- {plain(s, None)}" for s in sentences[:SHOWN_SENTENCES]))
        if len(sentences) > SHOWN_SENTENCES:
            st.caption(f"{len(sentences) - SHOWN_SENTENCES} more slow links; the slowest are listed.")
    host = controls.selectbox("Node", fleet_links.hosts(judged), "fleet_link_node")
    title = f"{host}: {labels[figure]} (GB/s), against its link type's median"
    ui.chart(ui.cached_figure(link_matrix_figure)(judged, host, title), key="fleet_link_matrix")
    st.caption(f"Rows are the source GPU, columns the destination; each cell is the pair's GB/s, coloured by its "
               f"ratio to the median of the pairs of the same link type (as the driver names it) on GPUs of the same "
               f"model across the fleet: red slower, blue faster. A link is named when it is more than "
               f"{fleet_links.SLOW_FLOORS:g} run-to-run floor below that median; a link type with fewer than "
               f"{fleet_links.MIN_LINKS} pairs in the fleet is shown, not judged. Nodes with a slow link come first.")
