"""How bank conflicts are shown: each point's cost against conflict-free access (its slowdown, the SM clocks a warp's
read took, and what the bank model predicts), the strided reads' chart, the transposes' bars, the stage takeaway and
the desk headline. Every figure comes from the run's rows; the bank model's conflict is named as the model's. No
Streamlit here."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gpu.core import text
from gpu.core.schema import key_value
from gpu.experiments import bank_conflicts as bank
from gpu.present.charts._common import LEGEND_BELOW, mark_not_clean, series_color, source_title
from gpu.present.facts import ratio_text
from gpu.present.takeaways import sentence

STRIDED_SERIES = ("strided_4B", "padded_4B", "strided_8B", "padded_8B")  # the strided chart's lines, in order
WORD_COLORS = {4: series_color(0), 8: series_color(1)}  # a word size keeps its colour; padded rows are dashed
COST_COLUMNS = ["slowdown", "clocks_per_read", "model_ways"]


def _is_strided(row) -> bool:
    return bank.group_of(str(row["variant"])) == "strided"


def _key(row, variant: str | None = None, stride=None) -> tuple:
    """What a point shares with its conflict-free reference: its run, and its block size and reads per thread (a
    strided read) or its matrix side (a transpose)."""
    variant = variant or str(row["variant"])
    if _is_strided(row):
        return (row["run_id"], variant, key_value(row["block_size"]), key_value(row["intensity"]),
                key_value(row["stride"]) if stride is None else stride)
    return row["run_id"], variant, key_value(row["matrix_side"])


def reference_variant(variant: str) -> str:
    """The conflict-free access a point is judged against: stride 1 of its word size (the strided reads, where every
    lane reads its neighbour's next word), the padded tile of its word size (the transposes)."""
    word = bank.word_bytes_of(variant)
    if bank.group_of(variant) == "transpose":
        return bank.variant_of("transpose", "padded", word)
    return bank.variant_of("strided", "plain", word)


def clocks_per_read(row) -> float:
    """SM clocks per warp-wide shared-memory read of a strided point: its median time × the median SM clock recorded
    × the SMs, over the warps' reads (threads ÷ 32 × reads per thread). The bank model's floor is one clock per
    128 bytes: 1 for 4-byte words, 2 for 8-byte words. NaN for a transpose (its time is global memory's too) or a row
    without a clock."""
    try:
        clock, sms = float(row["sm_clock_mhz"]), float(row["sm_count"])
        reads = float(row["elements"]) / bank.WARP * float(row["intensity"])
        seconds = float(row["median_ms"]) / 1e3
    except (KeyError, TypeError, ValueError):
        return math.nan
    if not _is_strided(row) or not all(math.isfinite(v) and v > 0 for v in (clock, sms, reads, seconds)):
        return math.nan
    return seconds * clock * 1e6 * sms / reads


def with_costs(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with ``slowdown`` (median time ÷ that of the conflict-free access measured in the same run: stride 1
    of the word size, block size and reads per thread; the padded tile of the word size and matrix side),
    ``clocks_per_read`` and ``model_ways`` (the bank model's conflict for the point's reads)."""
    if frame.empty:
        return frame.assign(**{column: pd.Series(dtype=float) for column in COST_COLUMNS})
    data = frame.reset_index(drop=True)
    rows = data.to_dict("records")
    times = {_key(row): float(row["median_ms"]) for row in rows}
    slowdown = []
    for row in rows:
        reference = times.get(_key(row, reference_variant(str(row["variant"])), stride=1 if _is_strided(row) else None))
        slowdown.append(float(row["median_ms"]) / reference if reference else math.nan)
    return data.assign(slowdown=slowdown, clocks_per_read=[clocks_per_read(row) for row in rows],
                       model_ways=[bank.predicted_ways(row) for row in rows])


def one_configuration(frame: pd.DataFrame) -> pd.DataFrame:
    """The strided rows of one run configuration (block 256 where measured, else the smallest block; the most reads
    per thread) and every transpose of the largest matrix, so a chart or a sentence never mixes configurations."""
    strided = frame[frame["group"] == "strided"]
    if not strided.empty:
        blocks = set(strided["block_size"].dropna())
        block = 256 if 256 in blocks else min(blocks)
        strided = strided[strided["block_size"] == block]
        strided = strided[strided["intensity"] == strided["intensity"].max()]
    transposes = frame[frame["group"] == "transpose"]
    if not transposes.empty:
        transposes = transposes[transposes["matrix_side"] == transposes["matrix_side"].max()]
    return pd.concat([strided, transposes])


def strided_figure(frame: pd.DataFrame) -> go.Figure:
    """Each strided series' slowdown against stride 1 of its word size, by stride (both axes in powers of two), with
    the bank model's conflict in the hover. No point labels: at stride 1 every series sits at 1×, and labels there would
    lie on each other (the takeaway says the figures)."""
    data = with_costs(frame)
    part = one_configuration(data[data["group"] == "strided"]) if not data.empty else data
    fig = go.Figure()
    for variant in STRIDED_SERIES:
        series = part[part["variant"] == variant].sort_values("stride")
        if series.empty:
            continue
        word = bank.word_bytes_of(variant)
        fig.add_trace(go.Scatter(
            x=series["stride"], y=series["slowdown"], mode="lines+markers", name=bank.LABELS[variant],
            # 4- and 8-byte words cost the same up to stride 16: the 4-byte line is drawn wider, with larger markers,
            # so it shows beneath the 8-byte one instead of hiding under it.
            line={"color": WORD_COLORS[word], "dash": "dash" if bank.is_padded(variant) else "solid",
                  "width": 5 if word == 4 else 2},
            marker={"size": 11 if word == 4 else 6, "symbol": "circle" if word == 4 else "diamond"},
            customdata=np.column_stack([series["gbps"], series["clocks_per_read"], series["model_ways"],
                                        series["median_ms"] * 1e3, series["cv"] * 100]),
            hovertemplate="stride %{x} words: %{y:.2f}× the time of stride 1<br>%{customdata[0]:,.0f} GB/s of shared "
                          "reads, %{customdata[1]:.2f} SM clocks per warp read<br>bank model: "
                          "%{customdata[2]}-way conflict<br>median %{customdata[3]:,.1f} µs, cv %{customdata[4]:.2f} %"
                          "<extra></extra>"))
        mark_not_clean(fig, series, "stride", "slowdown")
    configuration = ""
    if not part.empty:
        configuration = (f" · block {int(part['block_size'].iloc[0])}, "
                         f"{text.count(int(part['intensity'].iloc[0]), 'read')} per thread")
    fig.update_layout(title=source_title("Shared-memory reads: time against stride 1" + configuration, frame),
                      xaxis_title="stride (words between neighbouring threads' reads)",
                      yaxis_title="× stride 1's time", legend=LEGEND_BELOW, height=440)
    strides = sorted(part["stride"].unique()) if not part.empty else []
    fig.update_xaxes(type="log", tickvals=strides, ticktext=[str(int(s)) for s in strides])
    fig.update_yaxes(type="log", dtick=math.log10(2), tickformat=",~g", exponentformat="none")
    return fig


def transpose_figure(frame: pd.DataFrame) -> go.Figure:
    """Bars of each transpose's GB/s (global reads and writes), labelled with the naive tile's slowdown against the
    padded one of its word size."""
    data = with_costs(frame)
    part = one_configuration(data[data["group"] == "transpose"]) if not data.empty else data
    order = [v for v in bank.VARIANTS["transpose"] if v in set(part["variant"])]
    part = part.set_index("variant").loc[order].reset_index() if order else part
    labels = [bank.LABELS[v].removeprefix("transpose, ") for v in part["variant"]]  # the title says "transpose"
    fig = go.Figure(go.Bar(
        x=labels, y=part["gbps"],
        text=[f"{g:,.0f} GB/s" + ("" if bank.is_padded(v) or not math.isfinite(s) else f" · {ratio_text(s)} the time")
              for v, g, s in zip(part["variant"], part["gbps"], part["slowdown"], strict=True)],
        textposition="outside", cliponaxis=False,
        marker_color=[WORD_COLORS[bank.word_bytes_of(v)] for v in part["variant"]],
        marker_pattern_shape=["" if bank.is_padded(v) else "/" for v in part["variant"]],
        customdata=np.column_stack([part["model_ways"], part["median_ms"] * 1e3, part["samples"]]),
        hovertemplate="%{x}: %{y:,.0f} GB/s<br>bank model for its tile's column reads: %{customdata[0]}-way "
                      "conflict<br>median %{customdata[1]:,.1f} µs, %{customdata[2]} samples<extra></extra>"))
    mark_not_clean(fig, part, labels, "gbps")
    side = f" · {int(part['matrix_side'].iloc[0]):,} × {int(part['matrix_side'].iloc[0]):,}" if not part.empty else ""
    fig.update_layout(title=source_title("Transpose through a shared-memory tile" + side, frame),
                      yaxis_title="GB/s (10⁹ B/s) read + written", height=420, showlegend=False)
    return fig


def table(frame: pd.DataFrame) -> pd.DataFrame:
    """The desk's table: every point with its costs."""
    data = with_costs(frame)
    return data[["variant", "stride", "matrix_side", "block_size", "intensity", "median_ms", "cv", "samples", "gbps",
                 "slowdown", "clocks_per_read", "model_ways", "stop_reason"]].assign(
        variant=lambda f: f["variant"].map(bank.LABELS)).rename(columns={
            "intensity": "reads per thread", "slowdown": "× conflict-free",
            "clocks_per_read": "SM clocks per warp read", "model_ways": "bank model (ways)"})


def _worst_strides(data: pd.DataFrame) -> list[str]:
    """Per word size: its widest plain stride against stride 1, and the padded rows at that stride (the first word
    size in full words, the next in short)."""
    parts = []
    for word in bank.WORD_SIZES:
        plain = data[(data["variant"] == bank.variant_of("strided", "plain", word)) & (data["stride"] > 1)]
        plain = plain[plain["slowdown"].notna()]
        if plain.empty:
            continue
        worst = plain.loc[plain["stride"].idxmax()]
        stride, ways = int(worst["stride"]), int(worst["model_ways"])
        padded = data[(data["variant"] == bank.variant_of("strided", "padded", word)) & (data["stride"] == stride)
                      & data["slowdown"].notna()]
        padded_cost = ratio_text(padded["slowdown"].iloc[0]) if not padded.empty else None
        if not parts:
            clause = (f"{word}-byte words {stride} apart take {ratio_text(worst['slowdown'])} as long as neighbouring "
                      f"words ({ways}-way in the bank model)")
            if padded_cost:
                clause += f", {padded_cost} in rows padded to {bank.row_words(stride, True)} words"
        else:
            clause = f"{word}-byte words {stride} apart {ratio_text(worst['slowdown'])} ({ways}-way)"
            if padded_cost:
                clause += f", padded {padded_cost}"
        parts.append(clause)
    return parts


def _transposes(data: pd.DataFrame) -> list[str]:
    """Per word size: the padded tile's speed against the naive one's (the first word size in full words)."""
    parts = []
    for word in bank.WORD_SIZES:
        naive = data[(data["variant"] == bank.variant_of("transpose", "plain", word)) & data["slowdown"].notna()]
        if naive.empty:
            continue
        padded = data[data["variant"] == bank.variant_of("transpose", "padded", word)]
        speeds = f"({padded['gbps'].iloc[0]:,.0f} vs {naive['gbps'].iloc[0]:,.0f} GB/s)"
        parts.append(f"the padded tile transposes {word}-byte words {ratio_text(naive['slowdown'].iloc[0])} as fast as "
                     f"the naive one {speeds}" if not parts else
                     f"{word}-byte words {ratio_text(naive['slowdown'].iloc[0])} {speeds}")
    return parts


def takeaway(frame: pd.DataFrame) -> str | None:
    """What conflicts cost, from the run: per word size the widest stride against stride 1 and the padded rows at that
    stride, then what padding the transpose's tile buys; None when the run has neither a stride above 1 with its
    reference nor both tiles of a word size."""
    if frame.empty:
        return None
    data = one_configuration(with_costs(frame))
    return sentence(_worst_strides(data) + _transposes(data))


def headline(frame: pd.DataFrame) -> str | None:
    """The desk's line above the chart: conflict-free shared reads per word size (GB/s, SM clocks per warp read)."""
    if frame.empty:
        return None
    data = one_configuration(with_costs(frame))
    parts = []
    for word in bank.WORD_SIZES:
        rows = data[(data["variant"] == bank.variant_of("strided", "plain", word)) & (data["stride"] == 1)]
        if rows.empty:
            continue
        row = rows.iloc[0]
        clocks = "" if math.isnan(row["clocks_per_read"]) else f", {row['clocks_per_read']:.2f} SM clocks per warp read"
        parts.append(f"{word}-byte words {row['gbps']:,.0f} GB/s{clocks}")
    if not parts:
        return None
    return "**Conflict-free shared-memory reads (stride 1), all SMs together: " + "; ".join(parts) + "**"


# The talk's charts of a bank-conflicts scene, by the name its talk file gives them (``chart = "strided"``).
TALK_FIGURES = {"strided": strided_figure, "transpose": transpose_figure}
