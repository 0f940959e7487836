"""What the figures that appear in more than one place share (a page's stage takeaway and desk headline, a talk's
verdict). Each such figure is worked out by one function of its experiment's view (``gpu/experiments/<name>/view.py``:
the coalescing costs against the contiguous read, the best reduction, the best pipeline …) that also names what it is
measured against; this module gives them the one style of a ratio (``ratio_text``), so a ratio reads the same wherever
it is shown ("1.24×" on the page and in the talk), and the one configuration a figure reads (``one_configuration``).

A fact reads a results frame (``gpu.core.schema``) and raises ``ClaimError`` (saying what is missing) when the frame
lacks what the figure needs. No Streamlit, no CUDA."""

from __future__ import annotations

import pandas as pd

from gpu.core import text


def ratio_text(value: float) -> str:
    """A speed ratio in the one style of verdicts: two decimals below 1.95× (where the second digit matters), one
    above, none from 100× on."""
    if value >= 100:
        return text.times(value, 0)
    return text.times(value, 1) if value >= 1.95 else text.times(value, 2)


def one_configuration(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of one vector size and block size (the largest size; block 256 where measured), so a figure never
    mixes configurations of a recording that holds several."""
    if frame.empty:
        return frame
    frame = frame[frame["elements"] == frame["elements"].max()]
    blocks = set(frame["block_size"].dropna())
    block = 256 if 256 in blocks else min(blocks, default=None)
    return frame if block is None else frame[frame["block_size"] == block]
