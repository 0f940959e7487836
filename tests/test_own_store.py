"""Each test has its own runs store: a run one test saves is never in another's, whatever order they run in."""

from gpu.core import schema
from gpu.results.persistence.store import RunStore
from tests.conftest import ROOT

SAVED = "ownstore01"


def test_a_run_saved_by_one_test():
    frame = schema.read_results(ROOT / "assets/replay/transfers_nvidia-h200_2026-11-21.parquet").assign(run_id=SAVED)
    RunStore().save(frame, "import")
    assert SAVED in set(RunStore().runs()["run_id"])


def test_is_not_in_the_next_tests_store():
    assert SAVED not in set(RunStore().runs()["run_id"])
    assert RunStore().runs().empty
