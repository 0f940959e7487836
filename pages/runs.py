"""Runs: every stored and bundled run, filterable; import files from other machines, open, relabel, move to the
trash; the trash (restore, purge) and, for admins, the audit trail. Every action goes to the store with the page's
actor (``access.current_actor()``), whose ``require`` refuses what the role may not do whatever the browser sent; a
control the role may not use is shown disabled with the reason. Everything from a file or the store is shown as
plain text; a store that fails or does not answer gets one line."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from gpu.core.errors import AccessRefused
from gpu.core.schema import SchemaError
from gpu.core.text import plain
from gpu.experiments import registry
from gpu.results.exchange import imports
from gpu.results.persistence import audit
from gpu.results.persistence.store import StoreError, trash_days
from pages import _ui as ui
from pages._ui import access

PAGE_OF = registry.PAGE_OF  # each experiment's page, from the registry

page = ui.Page("Runs")
page.link_notes()
controls = ui.Section(page)  # the filters and the run chosen: in the link, restored from it
catalog = page.catalog()
actor = access.current_actor()
AUDIT_SHOWN = 500  # entries of the trail in the table; the exports hold every one
REFUSED = (StoreError, AccessRefused)  # one line each: a store that refuses, a role that may not
if ui.desk():  # on stage: the runs themselves
    st.markdown(f"Every live measurement and runner run is kept here with every sample, in "
                f"**{plain(catalog.store.describe(), None)}** "
                "(`PINPOINT_DB_URL` points a team at one PostgreSQL server). Runs bundled with PinPoint are listed "
                "beside them, marked *bundled*.")

with st.expander("Import runs from other machines (runner Parquet or CSV)"):
    uploads = st.file_uploader("Runner output files", type=["parquet", "csv"], accept_multiple_files=True,
                               key="runs_upload", disabled=not actor.may("import"), help=actor.why_not("import"))
    label = st.text_input("Label for the imported runs (optional)", key="runs_import_label",
                          placeholder="e.g. after driver 580")
    notes = st.text_area("Notes (optional)", key="runs_import_notes")
    replace = st.checkbox("Yes, replace a stored run of the same id whose content differs (its stored points are "
                          "deleted, in the same transaction)", key="runs_import_replace",
                          disabled=not actor.may("replace"), help=actor.why_not("replace"))
    unverified = st.checkbox("Store a CSV without a manifest (not a PinPoint export) as it is: nothing can show "
                             "that rows are missing from it", key="runs_import_unverified")
    st.button("Import", key="runs_import", disabled=not uploads or not actor.may("import"),
              help=actor.why_not("import"), on_click=ui.request, args=("runs_import_requested",))
    if st.session_state.pop("runs_import_requested", False) and access.permitted("import"):
        for upload in uploads or []:
            try:
                frame = imports.read_upload(upload.name, data=upload.getvalue(), unverified=unverified)
                for result in catalog.save(frame, "import", label or None, notes or None, replace=replace,
                                           actor=actor, params=imports.params_of(frame)):
                    (st.success if result.stored else st.info)(f"{plain(upload.name)}: {plain(result.message(), None)}")
            except (imports.ImportProblem, SchemaError, *REFUSED) as exc:  # every file gets its own message
                st.error(f"Nothing from {plain(upload.name)} was stored: {plain(exc, None)}")

try:
    runs = catalog.runs()
except StoreError as exc:  # a server that went away or stopped answering
    ui.show_reasons([exc], "The runs store cannot be read: the runs bundled with PinPoint are still here")
    runs = catalog.runs(with_store=False)


def trash_section() -> None:
    """The trashed runs with who and when, and Restore / Purge (admins)."""
    try:
        trashed, days = catalog.store.trashed(), trash_days()
    except StoreError as exc:  # a server gone, or a retention setting that is not a number of days
        ui.show_reasons([exc], "The trash cannot be read")
        return
    st.subheader("Trash")
    st.caption(f"Runs moved to the trash, and runs replaced on import, are kept {days:g} days, then purged; "
               "until then an admin can restore them. Runs, Compare, reports, check and the Fleet page leave them out.")
    if trashed.empty:
        st.caption("The trash is empty.")
        return
    st.dataframe(trashed[["run_id", "experiment", "device_name", "label", "reason", "trashed_at", "trashed_by",
                          "expires_at"]], hide_index=True,
                 column_config={"device_name": "device", "trashed_at": "trashed (UTC)", "trashed_by": "by",
                                "expires_at": "purged after (UTC)"})
    chosen = st.selectbox("Run in the trash", list(dict.fromkeys(trashed["run_id"])), key="runs_trash_selected")
    left, right = st.columns(2)
    left.button("Restore", key="runs_restore", disabled=not actor.may("restore"), help=actor.why_not("restore"),
                on_click=ui.request, args=(f"runs_restore_{chosen}",))
    sure = right.checkbox(f"Yes, purge run {plain(chosen)} for good", key=f"runs_purge_sure_{chosen}",
                          disabled=not actor.may("purge"), help=actor.why_not("purge"))
    right.button("Purge", key="runs_purge", disabled=not (sure and actor.may("purge")), help=actor.why_not("purge"),
                 on_click=ui.request, args=(f"runs_purge_{chosen}",))
    for action, store_action, done in (("restore", catalog.store.restore, "Restored"),
                                       ("purge", catalog.store.purge, "Purged")):
        if st.session_state.pop(f"runs_{action}_{chosen}", False) and (action == "restore" or sure):
            try:
                store_action(actor, [chosen])
            except REFUSED as exc:
                st.error(f"Run {plain(chosen)} was not {action}d: {plain(exc, None)}")
            else:
                st.session_state["runs_done"] = f"{done} run {chosen}."
                st.rerun()


def audit_section() -> None:
    """The audit trail, for those who may read it (admins); each field one line, long ones cut (the export keeps
    them whole)."""
    if not actor.may("audit"):
        return
    with st.expander("Audit trail: who changed what, when and from where"):
        try:
            trail = catalog.store.audit_trail(actor)
        except REFUSED as exc:
            ui.show_reasons([exc], "The audit trail cannot be read")
            return
        if trail.empty:
            st.caption("Nothing recorded yet.")
            return
        st.dataframe(audit.shown(trail.head(AUDIT_SHOWN)), hide_index=True)
        if len(trail) > AUDIT_SHOWN:
            st.caption(f"The newest {AUDIT_SHOWN} of {len(trail):,} entries; the exports hold every one.")
        left, right = st.columns(2)
        for column, fmt, mime in ((left, "csv", "text/csv"), (right, "json", "application/json")):
            column.download_button(f"Export as {fmt.upper()}", audit.export(trail, fmt), f"pinpoint-audit.{fmt}",
                                   mime=mime, key=f"runs_audit_{fmt}")
        st.caption("The same export: `python -m gpu.bench audit --format csv|json --out FILE`.")


def finish() -> None:
    page.sync()  # the filters and the run chosen into the address; what a link held that this page does not read named
    if ui.desk():  # on stage the runs and the run to open fill the screen: no management below them
        trash_section()
        audit_section()
    st.stop()


if (done := st.session_state.pop("runs_done", None)) is not None:
    st.success(plain(done, None))
if runs.empty:
    st.info("No runs yet: measure live, run `python -m gpu.bench …`, or import a file.")
    finish()

with ui.more_settings():  # on stage the filters fold away, so the runs and the run to open fit the screen
    if ui.desk():
        st.subheader("Filter")
    cols = st.columns(6)
filters = {}
for col, (column, title) in zip(cols[:4], [("experiment", "Experiment"), ("device_name", "Device"),
                                            ("driver_version", "Driver"), ("host", "Host")], strict=True):
    values = sorted(runs[column].dropna().astype(str).unique())
    filters[column] = controls.multiselect(title, values, f"runs_filter_{column}", where=col)
runs = runs.reset_index(drop=True)
text = controls.text_input("Label contains", "runs_filter_label", where=cols[4])
days = pd.to_datetime(runs["timestamp"].astype(str).str[:10], errors="coerce").dt.date
first_day, last_day = days.min(), days.max()
period = controls.date_range("Measured between", "runs_filter_dates", first_day, last_day, where=cols[5]) \
    if pd.notna(first_day) else ()
page.sync(final=False)  # the link box under the filters; the run chosen below joins it
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
    finish()

st.subheader("One run")
labels = {r.run_id: f"{r.run_id} · {r.experiment} · {r.device_name} · {str(r.timestamp)[:16]}"
          + (f" · {r.label}" if isinstance(r.label, str) and r.label else "") for r in shown.itertuples()}
run_id = controls.selectbox("Run", list(labels), "runs_selected", format_func=labels.get)
row = shown[shown["run_id"] == run_id].iloc[0]
left, right = st.columns(2)
left.button("Open on its page", key="runs_open", on_click=ui.request, args=(f"runs_open_{run_id}",))
if st.session_state.pop(f"runs_open_{run_id}", False):
    st.switch_page(PAGE_OF[row["experiment"]], query_params={"run": run_id})
if isinstance(row["notes"], str) and row["notes"]:
    left.markdown(f"**Notes:** {plain(row['notes'], None)}")
if row["origin"] == "bundled":
    right.caption("Bundled with PinPoint (a file in git): it cannot be moved to the trash.")
elif ui.desk():  # labels and the trash are desk work
    label_text = left.text_input("Label", value=row["label"] if isinstance(row["label"], str) else "",
                                 key=f"runs_label_{run_id}", disabled=not actor.may("label"),
                                 help=actor.why_not("label"))
    left.button("Save the label", key="runs_label_save", disabled=not actor.may("label"), help=actor.why_not("label"),
                on_click=ui.request, args=(f"runs_label_save_{run_id}",))
    if st.session_state.pop(f"runs_label_save_{run_id}", False):
        try:
            catalog.store.set_label(actor, run_id, label_text.strip() or None)
        except REFUSED as exc:
            st.error(f"The label of run {plain(run_id)} was not changed: {plain(exc, None)}")
        else:
            st.session_state["runs_done"] = f"Relabelled run {run_id}."
            st.rerun()
    sure = right.checkbox(f"Yes, move run {plain(run_id)} and its {int(row['points'])} points to the trash",
                          key=f"runs_trash_sure_{run_id}", disabled=not actor.may("trash"),
                          help=actor.why_not("trash"))
    right.button("Move to trash", key="runs_trash", disabled=not (sure and actor.may("trash")), type="secondary",
                 help=actor.why_not("trash"), on_click=ui.request, args=(f"runs_trash_{run_id}",))
    if not actor.may("trash"):  # the reason on the page, not only in a tooltip; also the answer to a forged press
        right.caption(f"Not moved to the trash: {plain(actor.why_not('trash'), None)}")
    if st.session_state.pop(f"runs_trash_{run_id}", False) and sure:
        try:
            catalog.trash(actor, [run_id])
        except REFUSED as exc:  # a role that may not, a read-only store, a run already in the trash
            st.error(f"Run {plain(run_id)} was not moved to the trash: {plain(exc, None)}")
        else:
            st.session_state["runs_done"] = f"Moved run {run_id} to the trash: restore it from the trash below."
            st.rerun()
finish()
