"""Listing runs (``pinpoint runs``) reads only the columns it lists of each bundled recording
(catalog.read_bundled_listing), and lists exactly what a catalog of the whole files lists."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from gpu.results import catalog
from gpu.results.store import RunStore


@pytest.mark.slow  # every bundled recording read whole: ~1 s of CPU
def test_the_listing_lists_what_the_whole_files_list():
    whole = catalog.Catalog(RunStore("sqlite://"))
    listing = catalog.Catalog(RunStore("sqlite://"), bundled=catalog.read_bundled_listing())
    for with_reference in (False, True):  # the review runs, then the Fleet page's boards too
        expected = whole.runs(with_reference=with_reference)
        assert len(expected) > 20
        pd.testing.assert_frame_equal(listing.runs(with_reference=with_reference), expected)
    assert listing.files == whole.files and listing.problems == whole.problems == []


def test_the_listing_reads_no_samples_and_names_a_damaged_file(tmp_path):
    source = catalog.ASSETS / "replay" / "transfers_nvidia-h200_2026-11-21.parquet"
    shutil.copy(source, tmp_path / source.name)
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not a parquet file")
    frames, files, problems = catalog.read_bundled_listing([tmp_path])
    [(run_id, frame)] = frames.items()
    assert list(frame.columns) == catalog.LISTED_COLUMNS and len(frame) == 304
    assert files == {run_id: f"{tmp_path.name}/{source.name}"}
    assert len(problems) == 1 and problems[0].startswith("broken.parquet: cannot read results from")
