"""How the fma experiment is shown: the compute ceiling's Plotly figure, TFLOP/s against independent FMA chains
per thread (a section of the Roofline page).

No Streamlit here. Every number is a measured row of one run (``gpu.core.schema``) or the theoretical rate that
``gpu.core.compute`` derives from the row's device and recorded SM clock.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from gpu.core import compute
from gpu.core.text import chart_text
from gpu.experiments import fma
from gpu.present.charts._common import LEGEND_BELOW, source_label

COLORS = {compute.FP32: "#636EFA", compute.FP64: "#EF553B"}
DASHES = ["solid", "dot", "dashdot", "longdash"]  # one per block size, when a run has several


def _title(text: str, frame: pd.DataFrame) -> dict:
    return {"text": f"{text}<br><sup>{source_label(frame)}</sup>"}


def rate_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The run's rows with ``tflops`` (measured), ``theoretical_tflops`` (at the row's own recorded clock; NaN where
    the compute capability is not in the table) and ``pct_of_theoretical``."""
    records = frame.to_dict("records")
    measured = [fma.flops_per_second(row) / 1e12 for row in records]
    theory = [compute.row_theoretical_flops(row) for row in records]
    theoretical = [t / 1e12 if t is not None else np.nan for t in theory]
    return frame.assign(tflops=measured, theoretical_tflops=theoretical,
                        pct_of_theoretical=[m / t * 100 for m, t in zip(measured, theoretical, strict=True)])


def figure(frame: pd.DataFrame, *, stage: bool = False) -> go.Figure:
    """Measured TFLOP/s against chains per thread, one line per precision (and block size), and each precision's
    theoretical rate at the clock its best point recorded as a dashed line, named with the best point's share.
    ``stage``: each point also labelled with its share of theoretical, the hover shorter (the room reads the
    numbers on the chart)."""
    table = rate_table(frame).reset_index(drop=True)
    fig = go.Figure()
    blocks = sorted(table["block_size"].dropna().unique())
    chains = sorted(int(c) for c in table["chains"].dropna().unique())
    x_range = [min(chains, default=1), max(chains, default=16)]
    for precision in fma.PRECISIONS:
        rows = table[table["variant"] == precision]
        if rows.empty:
            continue
        label, color = fma.LABELS[precision], COLORS[precision]
        for i, block in enumerate(blocks):
            part = rows[rows["block_size"] == block].sort_values("chains")
            if part.empty:
                continue
            name = label if len(blocks) == 1 else f"{label}, block {int(block)}"
            share = [f"{p:.0f} %" if np.isfinite(p) else "" for p in part["pct_of_theoretical"]]
            fig.add_trace(go.Scatter(
                x=part["chains"], y=part["tflops"], name=name, mode="lines+markers+text" if stage else
                "lines+markers", text=share if stage else None, textposition="top center",
                line={"color": color, "dash": DASHES[i % len(DASHES)]}, marker={"size": 10 if stage else 8},
                customdata=np.column_stack([part["pct_of_theoretical"], part["sm_clock_mhz"],
                                            part["median_ms"], part["cv"] * 100]),
                hovertemplate=(f"{label} · %{{x}} chains: %{{y:.1f}} TFLOP/s" + (
                    "<extra></extra>" if stage else
                    " (%{customdata[0]:.0f} % of theoretical at %{customdata[1]:,.0f} MHz)<br>"
                    "median %{customdata[2]:.3f} ms, cv %{customdata[3]:.2f} %<extra></extra>"))))
        best = rows.iloc[int(np.argmax(rows["tflops"].to_numpy()))]
        if np.isfinite(best["theoretical_tflops"]):
            fig.add_trace(go.Scatter(
                x=x_range, y=[best["theoretical_tflops"]] * 2, mode="lines", line={"color": color, "dash": "dash",
                                                                                     "width": 1.5},
                name=(f"{label} theoretical at {best['sm_clock_mhz']:,.0f} MHz: {best['theoretical_tflops']:,.1f} "
                      f"TFLOP/s (best {best['pct_of_theoretical']:.0f} %)"),
                hovertemplate=(f"{label} theoretical: %{{y:.1f}} TFLOP/s = SMs × FMA lanes × 2 × "
                               f"{best['sm_clock_mhz']:,.0f} MHz<extra></extra>")))
        else:
            capability = chart_text(best.get("compute_capability"))
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line={"color": color, "dash": "dash"},
                                     name=f"{label}: no theoretical figure for compute capability {capability}",
                                     hoverinfo="skip"))
    fig.update_layout(title=_title("Compute ceiling: FMA throughput vs independent chains per thread", frame),
                      xaxis={"title": "independent FMA chains per thread", "type": "log", "tickvals": chains,
                             "ticktext": [str(c) for c in chains]},
                      yaxis={"title": "TFLOP/s (10¹² FLOP/s, FMA = 2 FLOP)", "rangemode": "tozero"},
                      legend=LEGEND_BELOW, height=460)
    return fig
