"""Peers: every GPU of a node copying to every other, over NVLink or PCIe (or through the host where the driver
allows no peer access), and each GPU's link to the host when all of them copy at once."""

from __future__ import annotations

import streamlit as st

from gpu.core import text
from gpu.core.units import format_bytes
from gpu.experiments import peers as declared_peers
from gpu.experiments import registry
from gpu.experiments.peers import cost as peer_cost
from gpu.experiments.peers import matrix as pm
from gpu.experiments.peers import view as charts
from pages import _ui as ui

NAME = "peers"  # the peer experiment (gpu/experiments/peers/__init__.py)
PAIR_KEY = "peers_pair"
SCOPE_KEY = "peers_scope"  # what a live Measure measures: the matrix at one size first, the full sweep on request
SCOPES = {"matrix": f"The matrix at {format_bytes(declared_peers.MATRIX_SIZE)}",
          "sweep": f"Every size, {format_bytes(min(declared_peers.SWEEP_SIZES))} to "
                   f"{format_bytes(max(declared_peers.SWEEP_SIZES))}, every copy and timing"}
# While measuring, the partial matrix is redrawn at most this often after its first draw (which comes with the first
# cell): a 4-GPU matrix's 64 points arrive over about 12 s, and each redraw builds and sends the whole figure.
PREVIEW_EVERY_S = 1.0
MANY_PAIRS = 6  # more pairs than this (4 GPUs and up): the topology is summed up, each pair listed on request
page = ui.Page("Peers: GPU to GPU", intro=(
    "Every GPU of a node copying into every other's memory: the **matrix** reads source (row) → destination "
    "(column) in GB/s (10⁹ bytes per second, each byte counted once, as nvbandwidth counts peer copies), each cell "
    "with its link (**NV18**: 18 NVLinks; **PCIe**: a PCIe path; **host**: no peer access, copied through the host). "
    "Copies run on a **copy engine** (`cuMemcpyPeerAsync`, started by the destination, which pulls, or by the "
    "source, which pushes) or in an **SM kernel** over peer access; **both directions at once** shows what a pair "
    "carries in full duplex, and the **latency** is a pointer chase in the peer's memory. The host links show each "
    "GPU copying to and from the host alone and with every GPU at once: GPUs that share a host link lose there. "
    "Every destination is verified whole."))
backend = page.backend
page.link_notes()


def peer_request(scope: str = "matrix") -> dict:
    """What the live Measure asks the worker for, in one place for the multi-GPU service: the peer experiment's
    declared defaults (the matrix at one size, as the health suite measures it), or with ``scope`` "sweep" its full
    sweep, every ordered pair of the GPUs the job holds. The job's device set (every GPU of this machine) is the
    service's to name; this is where a request names it."""
    declared = registry.BY_NAME.get(NAME)
    request = {axis.name: axis.default for axis in declared.arguments} if declared else {}
    return {**request, **declared_peers.FULL_SWEEP} if declared and scope == "sweep" else request


def scope_choice() -> str:
    """The live Measure's choice, the matrix at one size or the full sweep, each with how long it should take on this
    machine's GPUs before it starts: an estimate from a recorded peer run (``peer_cost``)."""
    recorded = peer_cost.pricing_run(ui.backends.replay_backend().data, backend.gpu_name())
    gpus = list(range(max(len(backend.gpus), 2)))
    found = {scope: peer_cost.estimate(declared_peers.with_devices(declared_peers.parse_params(
        {k: v for k, v in peer_request(scope).items() if k != "profile"}), gpus), recorded) for scope in SCOPES}
    captions = [text.plain(peer_cost.duration(f.seconds) + f", {text.count(f.points, 'point')}", None) if f else
                "time unknown" for f in found.values()]
    scope = ui.Section(page).radio("Measure", list(SCOPES), SCOPE_KEY, horizontal=True, format_func=SCOPES.get,
                                   captions=captions,
                                   help="The matrix: each pair's copy engine both ways and both directions at once, "
                                        "latency, and every GPU's host link, at one size, batched. Every size adds "
                                        "the size sweep, the SM copies and single copies.")
    st.caption(text.plain(peer_cost.sentence(found[scope]), None))
    return scope


def preview(partial, suffix: str) -> None:
    """While measuring: the matrix of the pairs measured so far."""
    figure = charts.matrix_preview(partial.assign(backend="live"))
    if figure is not None:
        show(figure, f"chart_matrix{suffix}")


def peer_backend():
    """The live backend that holds every GPU of this machine (a worker of its own for that device set, while other
    jobs wait for its GPUs), or None and the reason in one line: the one place the page asks for its device set."""
    gpus = backend.gpus
    if len(gpus) < 2:
        return None, (f"The peer matrix needs two GPUs; this machine has {text.count(max(len(gpus), 1), 'GPU')} "
                      f"({text.plain(backend.gpu_name(), 80)}).")
    return ui.backends.live_backend_for("all", need=2, job="the peer matrix")


def live_frame():
    """The peer run measured now, on every GPU of this machine; a machine of one GPU is told why not."""
    live, reason = peer_backend()
    if live is None:
        page.sync()
        st.info(f"{reason} Switch on **Replay recorded runs** in the sidebar to see a recorded node.",
                icon=":material/hub:")
        st.stop()
    scope = scope_choice()
    page.sync(final=False)
    return ui.measure.checked_frame(live, NAME, peer_request(scope), "peers", preview=preview,
                                    redraw_s=PREVIEW_EVERY_S)


def recorded_frame():
    """The chosen peer recording's rows (or an opened run's); without one the page says so and stops."""
    # Several recordings: on stage their menu folds into More settings, so the matrix and its takeaway fit 1920×960
    with ui.more_settings() if len(backend.recordings(NAME)) > 1 else st.container():
        run_id = page.recording(NAME, "peers")
    rows = backend.data[backend.data["experiment"] == NAME]
    if rows.empty:
        page.sync()
        st.info("No peer recording exists yet: the matrix needs a run recorded on a machine of two or more GPUs, "
                "and none is bundled here. On such a machine, press **Measure** live, or record one with "
                "`python -m gpu.bench peers --profile precise --out assets/replay/peers_<device>_<date>.parquet`.",
                icon=":material/hub:")
        st.stop()
    run_id = run_id or backend.recordings(NAME).iloc[0]["run_id"]
    page.sync(final=False)
    return rows[rows["run_id"] == run_id].assign(backend="replay").reset_index(drop=True)


def show(figure, key: str) -> None:
    """A matrix-sized figure: taller than the stage's other charts (8 GPUs keep two readable lines per cell)."""
    if ui.presenting():
        ui.plot(charts.for_stage(figure), key=key)
    else:
        ui.plot(figure, key=key)


def offered(key: str, options: list) -> None:
    """A chained control (its options follow another's choice) drops a value it no longer offers."""
    if key in st.session_state and st.session_state[key] not in options:
        del st.session_state[key]


frame = live_frame() if page.live else recorded_frame()
default = pm.default_view(frame)
if default is None:
    page.sync()
    st.info(f"This run holds no copies between GPUs ({text.count(len(frame), 'point')}, variants "
            f"{text.plain(', '.join(sorted(set(frame['variant']))), 120)}): nothing to draw as a matrix.")
    st.stop()

# --- the view: which copy, timed how, at which size --------------------------------------------------------------
controls = ui.Section(page)
pairs = pm.pair_rows(frame)
variants = [v for v in (*pm.ONE_WAY, pm.BIDIRECTIONAL) if v in set(pairs["variant"])]
# The copy menu's five entries wrap onto three rows in a narrower column: 43 px more than a 1920×960 stage holds.
left, middle, right = st.columns([7, 2, 3])
variant = controls.radio("Copy", variants, "peers_variant", where=left, horizontal=True,
                         index=variants.index(default.variant), format_func=lambda v: pm.LABELS.get(v, v),
                         help="Copy engine: cuMemcpyPeerAsync, started by the destination's GPU (pulls) or the "
                              "source's (pushes). SM kernel: a copy kernel reading or writing the peer's memory "
                              "over peer access. Both directions: each direction's rate while the other runs.")
methods = [name for name, timer in pm.TIMER_OF.items() if timer in pm.methods(pairs, variant)]
offered("peers_method", methods)
method = controls.radio("Timing", methods, "peers_method", where=middle, horizontal=True,
                        format_func=lambda m: pm.METHODS[pm.TIMER_OF[m]],
                        help="Batched: back-to-back copies between two events, as nvbandwidth times them. Single "
                             "copy: CUDA events around each copy, its issue cost included.")
timer = pm.TIMER_OF[method]
sizes = pm.sizes(pairs, variant, timer)
offered("peers_size", sizes)
with right:
    size = controls.select_one("Copy size", sizes, "peers_size", value=sizes[-1], format_func=format_bytes)
view = pm.View(variant, timer, int(size))
if not ui.desk():
    page.sync(own=(PAIR_KEY,))  # on stage the pair's sweep is not shown: its setting stays in the address

show(ui.cached_figure(charts.matrix_figure)(frame, view), "chart_matrix")
ui.takeaway(ui.cached(charts.takeaway)(frame, view))
ui.context(frame)  # is the headline figure normal, and were its points clean
if not ui.desk():
    st.stop()  # on stage: the matrix and its takeaway; the topology and the other views are for the desk

line = ui.cached(charts.takeaway)(frame, view)
if line:
    st.markdown(f"**{text.plain(line, None)}**")
st.caption("Rows: the source GPU; columns: the destination. Cells: GB/s one way and the link (NV18: 18 NVLinks; "
           "PCIe: a PCIe path; host: no peer access, copied through the host); — marks a pair the run did not "
           "measure. Hover a cell for its exact figures.")

st.subheader("Topology in words")
sentences = ui.cached(pm.topology_sentences)(frame, view)
listed = "\n".join(f"- {text.plain(s, None)}" for s in sentences)
if len(sentences) > MANY_PAIRS:  # a node of many GPUs: the summary, and every pair on request
    st.markdown(text.plain(ui.cached(pm.topology_summary)(frame, view), None) + ".")
    with st.expander(f"Every pair ({len(sentences)})", icon=":material/format_list_bulleted:"):
        st.markdown(listed)
else:
    st.markdown(listed)
slow = ui.cached(pm.slow_pairs)(frame, view)
if not slow.empty:
    st.warning(f"{text.count(len(slow), 'pair')} below {text.percent(pm.SLOW)} of the median pair of its link type: "
               + ", ".join(f"GPU {r.a} ↔ GPU {r.b} ({text.percent(r.of_median)})" for r in slow.itertuples()))

both_view = charts.bidirectional_view(frame, view)
latency_view = pm.latency_view(frame)
if both_view or latency_view:
    st.subheader("Both directions at once, and latency")
    both_column, latency_column = st.columns(2)
    if both_view:
        with both_column:
            ui.plot(ui.cached_figure(charts.bidirectional_figure)(frame, both_view), key="chart_bidirectional")
    else:
        both_column.caption("This run did not copy both directions of a pair at once.")
    if latency_view:
        with latency_column:
            ui.plot(ui.cached_figure(charts.latency_figure)(frame, latency_view), key="chart_latency")
            st.caption(f"ns per dependent load, working set {format_bytes(latency_view.size)} (the largest measured).")
    else:
        latency_column.caption("This run did not measure latency between GPUs.")

st.subheader("One pair, every size")
ordered = pm.ordered_pairs(frame)
pair_names = [f"{s}-{d}" for s, d in ordered]
pair = controls.selectbox("Pair (source → destination)", pair_names, PAIR_KEY,
                          format_func=lambda p: "GPU {} → GPU {}".format(*p.split("-")))
source, destination = (int(v) for v in pair.split("-"))
ui.plot(ui.cached_figure(charts.pair_sweep_figure)(frame, source, destination), key="chart_pair_sweep")
st.caption("Solid: batched copies; dotted: one copy at a time (its issue cost included). Small copies are bound "
           "by their start-up cost, large ones by the link.")

st.subheader("Host links: alone and all at once")
host_line = ui.cached(pm.host_sentence)(frame)
if host_line:
    st.markdown(text.plain(host_line, None))
    ui.plot(ui.cached_figure(charts.host_figure)(frame), key="chart_host")
else:
    st.caption("This run did not copy between the host and every GPU at once.")
page.sync()

st.subheader("The numbers")
# A latency row has no GB/s and a copy no ns per access: "—" there, not Streamlit's "None"
st.dataframe(ui.cached(charts.numbers_table)(frame), hide_index=True, placeholder="—",
             column_config={"GB/s": st.column_config.NumberColumn(format="%.1f"),
                            "ns per access": st.column_config.NumberColumn(format="%.0f"),
                            "median µs": st.column_config.NumberColumn(format="%.2f"),
                            "cv %": st.column_config.NumberColumn(format="%.2f")})
ui.download(frame, "peers")
