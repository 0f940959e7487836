"""A live run records the method version of the sources its worker measured with (run on the GPU machine:
pytest -m gpu)."""

import pytest

from gpu.core import method_versions
from gpu.core.units import MiB
from gpu.experiments import registry
from gpu.experiments.method import method_version
from gpu.service.backends import submit_values

pytestmark = pytest.mark.gpu


def test_a_live_run_records_its_method_version_on_every_row(live_backend):
    frame = submit_values(live_backend, "transfers", {"sizes": [MiB], "modes": ["pinned"], "directions": ["h2d"],
                                                      "profile": "interactive"}).outcome()
    expected = method_version(registry.entry_of("transfers"))
    print("\ntransfers method version:", expected)
    assert len(expected) == 16 and set(frame["method_version"]) == {expected}
    assert method_versions.of_run(frame) == expected
