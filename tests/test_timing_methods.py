"""The harness's timing methods (gpu/sweeps/timing_methods.py) on a simulated stream board: each stream runs its
queued operations on a stand-in clock (an operation costs what the test says; a held stream runs nothing until
its hold is released), so what each method times, issues and holds is checked without a GPU."""

import numpy as np
import pytest

from gpu.sweeps import harness, timing_methods
from gpu.sweeps.timing_methods import HELD, SINGLE, Lane, PerCopy, StreamClock, copies_per_sample, per_stream


class Board:
    """A stand-in runtime: streams with a clock each, events that read it, the hold kernel, a log of what was
    queued."""

    def __init__(self):
        self.log = []
        board = self

        class Stream:
            count = 0

            def __init__(self):
                Stream.count += 1
                self.name, self.clock = f"s{Stream.count}", 0.0

        class Event:
            def __init__(self, flags=None):
                self.at = None

            def record(self, stream):
                self.at, self.stream = stream.clock, stream
                board.log.append(f"event {stream.name}")

            def synchronize(self):
                board.log.append(f"synchronize {self.stream.name}")

            def time_till(self, other):
                return other.at - self.at

        class Cuda:
            pass

        Cuda.Stream, Cuda.Event = Stream, Event
        self.cuda = Cuda

        class Ledger:
            def host_buffer(self, nbytes, mode):
                assert mode == "mapped"
                flags = np.zeros(nbytes // 4, np.uint32)
                holder = type("Host", (), {"get_device_pointer": lambda self: 0xF1A6})()
                return _WithBase(flags, holder)

        self.ledger = Ledger()

    def kernel(self, stem, name):
        assert (stem, name) == ("timing", "hold_stream")
        board = self

        class Hold:
            def prepare(self, signature):
                pass

            def prepared_async_call(self, grid, block, stream, pointer, timeout_ns):
                board.log.append(f"hold {stream.name}")

        return Hold()

    def operation(self, cost_ms: float, name: str = "op"):
        """``issue(stream)``: one operation of ``cost_ms`` on the stream's clock."""
        def issue(stream):
            stream.clock += cost_ms
            self.log.append(f"{name} {stream.name}")

        return issue


class _WithBase(np.ndarray):
    """A host array whose ``.base`` answers ``get_device_pointer`` (as a mapped allocation's does)."""

    def __new__(cls, array, holder):
        view = array.view(cls)
        view._holder = holder
        return view

    @property
    def base(self):
        return self._holder


def test_single_times_one_issued_operation_between_two_events():
    board = Board()
    clock = StreamClock(board, board.ledger)
    sample = clock.sampler(SINGLE, board.operation(0.25))
    assert sample() == 0.25 and sample() == 0.25
    assert board.log == ["event s1", "op s1", "event s1", "synchronize s1"] * 2  # never held


def test_held_calibrates_its_batch_to_a_millisecond_and_queues_it_behind_the_hold():
    board = Board()
    clock = StreamClock(board, board.ledger)
    sample = clock.sampler(HELD, board.operation(0.01))
    # 1 operation (0.01 ms), then ceil(1.1 / 0.01) = 110 (1.1 ms >= BATCH_MS): the calibration is the warm-up
    assert isinstance(sample, PerCopy) and sample.copies == 110 and sample.counts_copies
    board.log.clear()
    assert sample() == pytest.approx(0.01)
    assert board.log[:2] == ["hold s1", "event s1"] and board.log.count("op s1") == 110
    assert board.log[-2:] == ["event s1", "synchronize s1"]


def test_batched_is_never_held_for_operations_that_wait_on_the_host():
    board = Board()
    clock = StreamClock(board, board.ledger)
    sample = clock.sampler(timing_methods.BATCHED, board.operation(2.0))
    assert sample.copies == 1 and sample() == 2.0 and not any(line.startswith("hold") for line in board.log)


def test_a_batched_sample_may_count_its_means_not_its_copies_toward_the_profiles_min_time():
    board = Board()
    sample = StreamClock(board, board.ledger).sampler(HELD, board.operation(0.5), per_copy=False)
    assert sample.copies == 3 and sample.counts_copies is False and sample() == 0.5


def test_an_unknown_method_is_named():
    board = Board()
    with pytest.raises(ValueError, match="unknown timing method 'twice' \\(known: single, batched, held\\)"):
        StreamClock(board, board.ledger).sampler("twice", board.operation(1.0))


def test_per_stream_holds_every_stream_queues_each_between_its_own_events_and_reads_each():
    board = Board()
    first, second = StreamClock(board, board.ledger), StreamClock(board, board.ledger)
    active = []

    def on(name):
        class Active:
            def __enter__(self):
                active.append(name)

            def __exit__(self, *exc):
                return False

        return Active

    lanes = [Lane(first, board.operation(0.5, "copy"), on("gpu0")), Lane(second, board.operation(0.75, "copy"),
                                                                       on("gpu1"))]
    assert per_stream(lanes, copies=2) == [1.0, 1.5]
    assert board.log == ["hold s1", "event s1", "copy s1", "copy s1", "event s1",
                         "hold s2", "event s2", "copy s2", "copy s2", "event s2",
                         "synchronize s1", "synchronize s2"]
    assert active == ["gpu0", "gpu1", "gpu0", "gpu1"]  # each device current while its stream is queued and read


def test_copies_per_sample_doubles_at_least_and_stops_at_the_cap():
    assert copies_per_sample(lambda n: 0.0) == timing_methods.MAX_BATCH  # no time measured: doubled to the cap
    assert copies_per_sample(lambda n: n * 0.6) == 2
    assert harness.PerCopy is PerCopy and harness.copies_per_sample is copies_per_sample  # the old names still work


def test_the_harness_counts_a_batched_samples_copies_toward_min_time_only_when_it_says_so(monkeypatch):
    from gpu.core import stats

    seen = []
    monkeypatch.setattr(stats, "sample_until_stable", lambda sample, profile, per_sample=1: seen.append(per_sample))
    sweep = harness.Sweep.__new__(harness.Sweep)
    sweep.telemetry, sweep.profile = type("T", (), {"sample": lambda self: None})(), None
    sweep.sample(PerCopy(lambda n: 1.0, 8))
    sweep.sample(PerCopy(lambda n: 1.0, 8, counts_copies=False))
    sweep.sample(lambda: 1.0)
    assert seen == [8, 1, 1]
