"""Every registered experiment has a page, a runner subcommand with its defaults, Compare labels and a recording."""

from pathlib import Path

import pytest

from gpu import bench
from gpu.core import schema
from gpu.core.errors import ValidationError
from gpu.experiments import EXPERIMENTS, REGISTRY, get_experiment, registry
from gpu.results.analysis import compare
from gpu.sweeps import harness
from pages import _shared as shared

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("entry", REGISTRY, ids=lambda e: e.name)
def test_every_experiment_has_a_page_a_runner_subcommand_labels_and_a_recording(entry):
    module = entry.module
    assert get_experiment(entry.name) is module and EXPERIMENTS[entry.name] is module
    assert (ROOT / entry.page).is_file() and entry.page in [p.file for p in shared.PAGES]
    # The runner takes the subcommand with every default, and its defaults are a valid request.
    jobs = bench.experiment_jobs(bench.parse_args([entry.command, "--profile", "interactive"]))
    assert jobs and all(module.invalid_reasons(module.parse_params(job), None) == [] for job in jobs)
    # A recording in assets/replay, whose points Compare can name and key.
    recordings = sorted((ROOT / "assets" / "replay").glob(f"{entry.name}_*.parquet"))
    assert recordings, f"no recording of {entry.name} in assets/replay"
    frame = schema.read_results(recordings[0])
    assert set(module.KEY_COLUMNS) <= set(frame.columns)
    labels = [compare.point_label(entry.name, row) for row in frame.head(20).to_dict("records")]
    assert all(isinstance(label, str) and label for label in labels)


def test_pages_runs_and_names_derive_from_the_registry():
    assert list(EXPERIMENTS) == [e.name for e in REGISTRY]
    assert registry.experiment_pages() == list(dict.fromkeys(e.page for e in REGISTRY))
    assert {registry.PAGE_OF[e.name] for e in REGISTRY} == set(registry.experiment_pages())
    assert len({e.command for e in REGISTRY}) == len(REGISTRY)


def _sweeps(module) -> list:
    return [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, harness.Sweep)
            and v is not harness.Sweep]


def test_declared_experiments_state_their_axes_and_key_columns():
    for entry in REGISTRY:
        sweeps = [v for v in vars(entry.sweep_module()).values() if isinstance(v, type) and issubclass(v, harness.Sweep)
                  and v is not harness.Sweep]
        assert len(sweeps) == 1, (entry.name, sweeps)  # every experiment is measured over the one harness
        sweep = sweeps[0]
        assert sweep.NAME == entry.name and sweep.TITLE and sweep.KEY_COLUMNS == entry.module.KEY_COLUMNS
        params = entry.module.Params()
        for axis in sweep.AXES:
            assert getattr(params, axis.name) == axis.default, (entry.name, axis.name)
            assert axis in entry.arguments


def test_each_experiment_declares_its_labels_and_the_registry_finds_its_sweep_by_name():
    for entry in REGISTRY:
        assert entry.labels and all(isinstance(label, str) and label for label in entry.labels.values()), entry.name
        sweep = entry.sweep_module()
        # an experiment package's own sweep.py, imported by the registry on first use
        assert sweep.__name__ == f"{entry.module.__name__}.sweep" and hasattr(entry.module, "__path__")
        assert registry.sweep_of(entry.name) is sweep.run is entry.sweep()
    with pytest.raises(ValidationError, match="unknown experiment 'nope'"):
        registry.sweep_of("nope")
