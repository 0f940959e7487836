"""Bank conflicts: how the words a warp reads from shared memory share its 32 banks, and what padding buys."""

from __future__ import annotations

import streamlit as st

from gpu.experiments import bank_conflicts as bank
from gpu.experiments.bank_conflicts import view
from pages import _ui as ui

page = ui.Page(bank.TITLE, intro=(
    "Shared memory is 32 banks of 4 bytes, each serving one word per clock: when the threads of a warp read "
    "different words of one bank, the read is replayed once per word. Here every thread of a full GPU reads words "
    "1, 2, 4 … 32 apart from its neighbour's, in 4- and 8-byte words, then the same with each row **padded** to an "
    "odd length; and a matrix is transposed through a shared-memory tile, naive ([32][32]) and padded ([32][33]). "
    "Kernel time only (CUDA events, thousands of reads per thread so shared memory sets the time); every thread's "
    "sum and every transposed word is checked exactly. Each point is judged against conflict-free access "
    "**measured in the same run**."))

if not page.live and page.backend.recordings(bank.NAME).empty:
    page.sync()
    st.info("No bank-conflicts recording is bundled here yet. On a machine with an NVIDIA GPU, press **Measure** live, "
            "or record one with `python -m gpu.bench bank-conflicts --profile precise --out "
            "assets/replay/bank_conflicts_<device>_<date>.parquet`.")
    st.stop()
run_id = page.recording(bank.NAME, "bank_conflicts")
block_options = page.axis_options(bank.NAME, "block_size", run_id, ui.axis_steps(bank.NAME, "block_sizes", 32),
                                  axis_name="block_sizes")


def recorded(axis_name: str, column: str) -> list[int]:
    """The axis's values to offer: live, its powers of two; in replay, the recording's values of ``column`` within the
    axis's range (a recording's intensity holds the other group's values too: a transpose's 4 tile
    reads, the strides), else the axis's default."""
    declared = ui.axis(bank.NAME, axis_name)
    offered = page.axis_options(bank.NAME, column, run_id, ui.axis_powers(bank.NAME, axis_name), axis_name=axis_name)
    return [v for v in offered if declared.low <= v <= declared.high] or [ui.axis_default(bank.NAME, axis_name)]


reads_options, side_options = recorded("reads_per_thread", "intensity"), recorded("matrix_side", "matrix_side")
page.link_notes()
controls = ui.Section(page)
left, right = st.columns(2)
words = controls.axis_choices(bank.NAME, "word_sizes", "bank_words", where=left, label="Word sizes",
                              format_func=lambda size: f"{size}-byte words")
groups = controls.axis_choices(bank.NAME, "groups", "bank_groups", where=right, label="Experiments",
                               format_func={"strided": "strided reads", "transpose": "tiled transpose"}.get)
settings = ui.more_settings()
block_sizes = controls.block_size("bank_block", block_options, "Threads per block (strided reads)",
                                  placeholder="e.g. 256", default=ui.axis_default(bank.NAME, "block_sizes"),
                                  settings=settings)
reads = controls.axis_slider(bank.NAME, "reads_per_thread", "bank_reads", reads_options, where=settings,
                             format_func=lambda n: f"{n:,}")
side = controls.axis_slider(bank.NAME, "matrix_side", "bank_side", side_options, where=settings,
                            label="Transposed matrix (rows × columns)", format_func=lambda n: f"{n:,} × {n:,}")

params = {"word_sizes": list(words or []), "groups": list(groups or []), "block_sizes": block_sizes,
          "reads_per_thread": reads, "matrix_side": side}
page.sync()


def preview(partial, suffix: str) -> None:
    """While measuring: the strided reads as far as measured."""
    if (partial["group"] == "strided").any():
        ui.chart(view.strided_figure(partial), key=f"chart_strided{suffix}")


frame = page.measure(bank.NAME, params, "bank_conflicts", run_id, preview=preview)

if ui.desk():
    line = view.headline(frame)
    if line:
        st.markdown(line)
if (frame["group"] == "strided").any():
    ui.chart(ui.cached_figure(view.strided_figure)(frame), key="chart_strided")
ui.takeaway(ui.cached(view.takeaway)(frame))
ui.context(frame)  # is the headline figure normal, and were its points clean
if not ui.desk():
    st.stop()  # on stage: the strided reads and the takeaway
if (frame["group"] == "transpose").any():
    ui.chart(ui.cached_figure(view.transpose_figure)(frame), key="chart_transpose")
st.caption("The bank model (the CUDA programming guide's, compute capability 5.0 and later): 32 banks of 4 bytes, "
           "a warp's request served 128 bytes of threads at a time, each part taking as many passes as the most "
           "distinct words asked of one bank. The transposes' time includes their global reads and writes; they "
           "use 32 × 8 threads per tile whatever the block size.")
st.dataframe(ui.cached(view.table)(frame), hide_index=True)
ui.download(frame, "bank_conflicts")
