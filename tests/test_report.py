"""The review report and Compare's chart and table, from the bundled H100 and H200 runs (no Streamlit)."""

import html

import pytest

from gpu.core import schema
from gpu.experiments import registry
from gpu.results.analysis import compare, report
from gpu.results.exchange.catalog import BUNDLED_DIRS


def bundled(pattern: str, directory: int):
    return schema.read_results(next(BUNDLED_DIRS[directory].glob(pattern)))


@pytest.fixture(scope="module")
def coalescing_pair():
    return bundled("coalescing_nvidia-h200_*.parquet", 0), bundled("coalescing_nvidia-h100*.parquet", 1)


def test_the_report_shows_the_normalized_verdicts_and_readable_times(coalescing_pair):
    h200, h100 = coalescing_pair
    page = report.render(h200, [h100])
    normalized = compare.compare_normalized(h200, h100)
    headline = compare.headline(normalized, len(h200) - len(normalized), len(h100) - len(normalized))
    assert html.escape("Normalized to each device's limit: " + headline) in page  # the normalized verdicts
    assert f"{(normalized['verdict'] == 'faster').sum()} faster" in headline
    assert "&lt; 0.001" in page and " ms</td>" in page and "<td>0</td>" not in page


def test_the_normalized_table_keeps_the_candidates_own_times(coalescing_pair):
    h200, h100 = coalescing_pair
    raw, normalized = compare.compare(h200, h100), compare.compare_normalized(h200, h100)
    assert list(normalized["candidate_ms"]) == list(raw["candidate_ms"])
    assert normalized["change"].round(9).equals(raw["normalized_change"].round(9))
    assert (normalized["verdict"] == "slower").sum() < (raw["verdict"] == "slower").sum()


def test_kernel_points_are_placed_by_what_differs_between_them(coalescing_pair):
    series, x = report.point_series(compare.compare(*coalescing_pair))
    assert set(series) >= {"strided", "offset", "copy_f4", "transpose_padded"}
    assert "block 256 · stride 16" in set(x) and not any("67,108,864 elements" in label for label in x)


def test_transfer_points_are_named_in_the_experiments_own_words_from_the_registry():
    h200, h100 = (bundled("transfers_nvidia-h200_*.parquet", 0), bundled("transfers_nvidia-h100*.parquet", 1))
    labels = registry.labels_of("transfers")
    assert labels["pinned_wc"] == "pinned write-combined" and labels is registry.BY_NAME["transfers"].labels
    series, x = report.point_series(compare.compare(h200, h100), labels)
    assert "pinned write-combined H2D" in set(series) and not any(s.startswith("pinned_wc") for s in series)
    assert "pinned_wc H2D" in set(report.point_series(compare.compare(h200, h100))[0])  # no labels: as recorded
    page = html.unescape(report.render(h200, [h100]))
    assert "pinned write-combined H2D" in page
