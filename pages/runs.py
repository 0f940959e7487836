"""Runs: every stored and bundled run, filterable; import files from other machines, open, delete. Everything
from a file or the store is shown as plain text; a store that fails or does not answer gets one line."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from gpu.core.schema import SchemaError
from gpu.core.text import plain
from gpu.experiments import registry
from gpu.results import imports
from gpu.results.store import StoreError
from pages import _ui as ui

PAGE_OF = registry.PAGE_OF  # each experiment's page, from the registry

page = ui.Page("Runs")
page.link_notes()
page.sync(link=False)  # names what the link holds that this page does not read (?run= opens a run)
catalog = page.catalog()
if ui.desk():  # on stage: the runs themselves
    st.markdown(f"Every live measurement and runner run is kept here with every sample, in "
                f"**{plain(catalog.store.describe(), None)}** "
                "(`PINPOINT_DB_URL` points a team at one PostgreSQL server). Runs bundled with PinPoint are listed "
                "beside them, marked *bundled*.")

with st.expander("Import runs from other machines (runner Parquet or CSV)"):
    refused = ui.why_not("import")
    if refused:
        st.caption(refused)
    uploads = st.file_uploader("Runner output files", type=["parquet", "csv"], accept_multiple_files=True,
                               key="runs_upload", disabled=bool(refused), help=refused)
    label = st.text_input("Label for the imported runs (optional)", key="runs_import_label",
                          placeholder="e.g. after driver 580")
    notes = st.text_area("Notes (optional)", key="runs_import_notes")
    replace = st.checkbox("Yes, replace a stored run of the same id whose content differs (its stored points are "
                          "deleted, in the same transaction)", key="runs_import_replace")
    unverified = st.checkbox("Store a CSV without a manifest (not a PinPoint export) as it is: nothing can show "
                             "that rows are missing from it", key="runs_import_unverified")
    st.button("Import", key="runs_import", disabled=not uploads or bool(refused), help=refused, on_click=ui.request,
              args=("runs_import_requested",))
    if st.session_state.pop("runs_import_requested", False) and ui.permitted("import", catalog.store):
        for upload in uploads or []:
            try:
                frame = imports.read_upload(upload.name, data=upload.getvalue(), unverified=unverified)
                for result in catalog.save(frame, "import", label or None, notes or None, replace=replace):
                    (st.success if result.stored else st.info)(f"{plain(upload.name)}: {plain(result.message(), None)}")
            except (imports.ImportProblem, StoreError, SchemaError) as exc:  # every file gets its own message
                st.error(f"Nothing from {plain(upload.name)} was stored: {plain(exc, None)}")

try:
    runs = catalog.runs()
except StoreError as exc:  # a server that went away or stopped answering
    ui.show_reasons([exc], "The runs store cannot be read: the runs bundled with PinPoint are still here")
    runs = catalog.runs(with_store=False)
if runs.empty:
    st.info("No runs yet: measure live, run `python -m gpu.bench …`, or import a file.")
    st.stop()

with ui.more_settings():  # on stage the filters fold away, so the runs and the run to open fit the screen
    if ui.desk():
        st.subheader("Filter")
    cols = st.columns(6)
filters = {}
for col, (column, title) in zip(cols[:4], [("experiment", "Experiment"), ("device_name", "Device"),
                                            ("driver_version", "Driver"), ("host", "Host")], strict=True):
    values = sorted(runs[column].dropna().astype(str).unique())
    filters[column] = col.multiselect(title, values, key=f"runs_filter_{column}")
runs = runs.reset_index(drop=True)
text = cols[4].text_input("Label contains", key="runs_filter_label")
days = pd.to_datetime(runs["timestamp"].astype(str).str[:10], errors="coerce").dt.date
first_day, last_day = days.min(), days.max()
period = cols[5].date_input("Measured between", value=(first_day, last_day), key="runs_filter_dates") \
    if pd.notna(first_day) else ()
shown = runs
if isinstance(period, tuple | list) and len(period) == 2:
    shown = shown[((days >= period[0]) & (days <= period[1])).to_numpy()]
for column, chosen in filters.items():
    if chosen:
        shown = shown[shown[column].astype(str).isin(chosen)]
if text.strip():
    shown = shown[shown["label"].fillna("").str.contains(text, case=False, regex=False)]
st.caption(f"{len(shown)} of {len(runs)} runs")
st.dataframe(shown[["run_id", "experiment", "device_name", "driver_version", "timestamp", "host", "points", "label",
                    "origin", "profile"]], hide_index=True,
             column_config={"timestamp": "measured (UTC)", "device_name": "device", "driver_version": "driver"},
             height="auto" if ui.desk() else 330)
if shown.empty:
    st.stop()

st.subheader("One run")
labels = {r.run_id: f"{r.run_id} · {r.experiment} · {r.device_name} · {str(r.timestamp)[:16]}"
          + (f" · {r.label}" if isinstance(r.label, str) and r.label else "") for r in shown.itertuples()}
run_id = st.selectbox("Run", list(labels), format_func=labels.get, key="runs_selected")
row = shown[shown["run_id"] == run_id].iloc[0]
left, right = st.columns(2)
left.button("Open on its page", key="runs_open", on_click=ui.request, args=(f"runs_open_{run_id}",))
if st.session_state.pop(f"runs_open_{run_id}", False):
    st.switch_page(PAGE_OF[row["experiment"]], query_params={"run": run_id})
if isinstance(row["notes"], str) and row["notes"]:
    left.markdown(f"**Notes:** {plain(row['notes'], None)}")
if row["origin"] == "bundled":
    right.caption("Bundled with PinPoint (a file in git): it cannot be deleted here.")
else:
    refused = ui.why_not("trash")
    sure = right.checkbox(f"Yes, delete run {plain(run_id)} and its {int(row['points'])} points",
                          key=f"runs_delete_sure_{run_id}", disabled=bool(refused), help=refused)
    right.button("Delete", key="runs_delete", disabled=not sure or bool(refused), help=refused, type="secondary",
                 on_click=ui.request, args=(f"runs_delete_{run_id}",))
    if st.session_state.pop(f"runs_delete_{run_id}", False) and ui.permitted("trash") and sure:
        try:
            deleted = catalog.store.delete(run_id)
        except StoreError as exc:  # e.g. a read-only store
            st.error(f"Run {plain(run_id)} was not deleted: {plain(exc, None)}")
        else:
            if deleted:
                st.success(f"Deleted run {plain(run_id)}.")
                st.rerun()
            else:
                st.warning(f"Run {plain(run_id)} was already gone.")
