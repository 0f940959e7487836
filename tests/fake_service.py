"""A CPU-only stand-in for the GPU service, so the worker/client machinery is tested without a GPU.

It runs in a real spawned worker process through ``gpu.service.worker.serve``, exactly like ``GpuService``.
"""

from __future__ import annotations

import json
import os
import time

import pandas as pd

from gpu.core.errors import ValidationError


class FakeService:
    def __init__(self, fail_start: bool = False):
        if fail_start:
            raise RuntimeError("no CUDA device (fake)")
        self.healthy = True

    def hello(self) -> dict:
        return {"facts": {"device_name": "Fake"}, "limits": {}, "pid": os.getpid()}

    def handle(self, job, progress, should_cancel):
        kind = job["kind"]
        if kind == "echo":
            return {"pid": os.getpid(), "value": job.get("value")}
        if kind == "steps":  # a sweep of n points, each taking `seconds`
            n = job.get("n", 10)
            for i in range(n):
                if should_cancel():
                    from gpu.core.errors import JobCancelled

                    raise JobCancelled()
                progress(i, n, f"point {i}")
                time.sleep(job.get("seconds", 0.05))
            progress(n, n, "done")
            return {"pid": os.getpid(), "points": n}
        if kind == "rows":  # a sweep that streams each finished row, then waits to be released
            for i in range(job.get("n", 3)):
                progress.row({"point": i})
            deadline = time.monotonic() + 30
            while not should_cancel() and time.monotonic() < deadline and not os.path.exists(job["release"]):
                time.sleep(0.01)
            return {"points": job.get("n", 3)}
        if kind == "warm_host_pool":  # the app's first job (LiveBackend.warm): no page-locked memory here
            return {"pooled_bytes": 0}
        if kind == "invalid":
            raise ValidationError(["size 0 B is too small"])
        if kind == "sticky":  # what PyCUDA raises after an illegal address
            raise RuntimeError("cuCtxSynchronize failed: an illegal memory access was encountered")
        if kind == "recoverable":
            raise RuntimeError("out of memory (fake)")
        if kind == "crash":
            os._exit(9)
        raise ValidationError([f"unknown job kind '{kind}'"])

    def conditions_now(self) -> dict:
        """The witness's latest reading, as ``GpuService.conditions_now`` gives it (a live conditions strip)."""
        return {"gpu": 0, "sm_mhz": 1980, "others": [[1039, "python3"]], "reasons": ["SW power cap"]}

    def after_error(self, exc) -> bool:
        return "illegal memory access" not in str(exc)

    def close(self) -> None:
        pass


class RecordedService(FakeService):
    """Serves the live protocol (limits, experiment) from the committed H200 recordings, step by step.

    Lets the tests drive the live page end to end (button, progress, queue, results) without a GPU.
    The numbers are real recorded ones; only their delivery is simulated, and only in tests.
    """

    def __init__(self, seconds_per_point: float | None = None):
        super().__init__()
        from gpu.service.backends import ReplayBackend

        self.recorded = ReplayBackend().data
        # PINPOINT_FAKE_SECONDS_PER_POINT slows delivery down, for tests that watch points arrive.
        self.seconds_per_point = seconds_per_point if seconds_per_point is not None else \
            float(os.environ.get("PINPOINT_FAKE_SECONDS_PER_POINT", "0.01"))

    def hello(self) -> dict:
        facts = self.recorded.iloc[0][["device_name", "compute_capability", "sm_count", "memory_total_bytes",
                                       "pcie_gbps_theoretical", "pcie_gen", "pcie_width", "hbm_gbps_theoretical",
                                       "driver_version"]].to_dict()
        from gpu.core.occupancy import recorded_profiles

        device = recorded_profiles()[facts["device_name"]][0].as_dict()
        return {"facts": facts, "limits": self._limits(), "pid": os.getpid(), "occupancy_device": device}

    @staticmethod
    def _limits() -> dict:
        gib = 1024**3
        return {"free_device_bytes": 139 * gib, "total_device_bytes": 140 * gib, "pinned_budget_bytes": 16 * gib,
                "host_available_bytes": 120 * gib, "max_threads_per_block": 1024, "warp_size": 32}

    def handle(self, job, progress, should_cancel):
        from gpu.core.errors import JobCancelled
        from gpu.core.limits import Limits
        from gpu.core.schema import key_value
        from gpu.experiments import get_experiment
        from gpu.experiments.request import memory_reasons
        from gpu.service.worker import checked

        if job["kind"] == "limits":
            return self._limits()
        if job["kind"] != "experiment":
            return super().handle(job, progress, should_cancel)
        request = checked(job)  # as the GPU worker: a checked request, its memory re-checked against limits now
        module = get_experiment(request.experiment)
        params = request.params
        reasons = memory_reasons(module.NAME, params, Limits(**self._limits()))
        if reasons:
            raise ValidationError(reasons)
        if hasattr(module, "with_devices") and getattr(self, "set", None):  # the GPUs of its set, as the worker's
            params = module.with_devices(params, [int(g["index"]) for g in self.set])
        points = list(params.points())
        wanted = {tuple(key_value(v) for v in point) for point in points}  # a missing peer: None here, NaN stored
        recorded = self.recorded[self.recorded["experiment"] == module.NAME]
        columns = zip(*(recorded[c] for c in module.KEY_COLUMNS), strict=True)
        keys = pd.Series([tuple(key_value(v) for v in key) for key in columns], index=recorded.index, dtype=object)
        rows = recorded[keys.map(lambda key: key in wanted).astype(bool)]
        # A point two recordings hold (the peers of two H100s and of two H200s) is served once, from the newest
        when = pd.to_datetime(rows["timestamp"], utc=True, errors="coerce", format="mixed")
        newest_first = when.sort_values(ascending=False, kind="stable").index
        rows = rows.loc[newest_first][~keys.loc[newest_first].duplicated()].sort_index().reset_index(drop=True)
        records = rows.to_dict("records")
        for i, _ in enumerate(points):
            if should_cancel():
                raise JobCancelled()
            progress(i, len(points), f"point {i}")
            time.sleep(self.seconds_per_point)
            if i < len(records) and hasattr(progress, "row"):
                progress.row(records[i])  # streamed like the real worker's rows
        return rows


def chosen_gpus(gpus: list[dict], device=None, devices=None) -> list[dict]:
    """The GPUs a service is started for, as GpuService takes them: one (``device``) or a set (``devices``)."""
    from gpu.core import devices as device_sets

    indices = device_sets.choose_set(devices, gpus) if devices is not None else [device_sets.choose(device, gpus)]
    return [g for g in gpus if int(g["index"]) in indices]


class TwoGpuRecordedService(RecordedService):
    """RecordedService on a machine of two GPUs: it is started for one of them (``device``: index or UUID, as
    GpuService is) or for both (``devices``), names the first board in its facts and lists both, so the app's choice
    of GPU can be tested."""

    GPUS = [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-aaaa0000-0000-4000-8000-00000000a0a0", "host": "desk-1"},
            {"index": 1, "name": "NVIDIA H200", "uuid": "GPU-bbbb1111-1111-4111-8111-00000000b1b1", "host": "desk-1"}]

    def __init__(self, device=None, devices=None, seconds_per_point: float | None = None):
        super().__init__(seconds_per_point)
        self.set = chosen_gpus(self.GPUS, device, devices)
        self.gpu = self.set[0]

    @classmethod
    def visible_gpus(cls) -> list[dict]:
        return list(cls.GPUS)

    def hello(self) -> dict:
        info = super().hello()
        info["facts"] = {**info["facts"], "gpu_uuid": self.gpu["uuid"], "host": self.gpu["host"]}
        return {**info, "gpus": self.visible_gpus(), "gpu_index": self.gpu["index"],
                "gpu_indices": [g["index"] for g in self.set]}


class GpuSetService(FakeService):
    """FakeService on a node of several GPUs (PINPOINT_FAKE_GPUS of them, 2 unless set), started as GpuService is:
    for one GPU (``device``) or a device set (``devices``: indices or board UUIDs); ``gpu_count`` pretends a node of
    that many instead. Its hello names its set as
    GpuService's does (``gpu_index``, ``gpu_indices``, every GPU in ``gpus``). Its ``measure`` job writes a line when
    it starts and one when it ends (``time.monotonic``, one clock for every process of the machine) to a log file, so
    tests can tell which jobs measured at the same time."""

    MODEL = "NVIDIA H100 80GB HBM3"

    def __init__(self, device=None, devices=None, gpu_count: int | None = None, fail_start: bool = False):
        super().__init__(fail_start)
        self.gpus = self.visible_gpus(gpu_count)
        self.set = chosen_gpus(self.gpus, device, devices)

    @classmethod
    def visible_gpus(cls, count: int | None = None) -> list[dict]:
        count = count or int(os.environ.get("PINPOINT_FAKE_GPUS", "2"))
        return [{"index": i, "name": cls.MODEL, "uuid": f"GPU-{i:08x}-1111-4222-8333-4444{0xa0 + i:08x}",
                 "host": "node-0"} for i in range(count)]

    def hello(self) -> dict:
        first = self.set[0]
        return {"facts": {"device_name": self.MODEL, "gpu_uuid": first["uuid"], "host": first["host"]}, "limits": {},
                "pid": os.getpid(), "gpus": self.gpus, "gpu_index": first["index"],
                "gpu_indices": [g["index"] for g in self.set]}

    def handle(self, job, progress, should_cancel):
        if job["kind"] != "measure":
            return super().handle(job, progress, should_cancel)
        from gpu.core.errors import JobCancelled

        def log(event: str) -> None:
            line = {"tag": job["tag"], "event": event, "t": time.monotonic(), "gpus": [g["index"] for g in self.set]}
            with open(job["log"], "a") as f:
                f.write(json.dumps(line) + "\n")

        log("start")
        self.freeing = (job.get("free_seconds", 0), log)
        if job.get("crash"):
            os._exit(9)
        deadline = time.monotonic() + job.get("seconds", 30)
        while time.monotonic() < deadline and not (job.get("release") and os.path.exists(job["release"])):
            if should_cancel():
                log("end")
                raise JobCancelled()
            time.sleep(0.01)
        log("end")
        return {"tag": job["tag"], "gpus": [g["index"] for g in self.set]}

    def after_reply(self) -> None:
        """Free what the last job allocated (``free_seconds`` long), after its answer is sent, as GpuService does."""
        seconds, log = getattr(self, "freeing", (0, None))
        if log is not None:
            time.sleep(seconds)
            log("freed")
            self.freeing = (0, None)


class ScheduledPeerService(TwoGpuRecordedService):
    """The peer experiment on a node of PINPOINT_FAKE_GPUS GPUs (2 unless set), its rows streamed at the times a real
    run produced them: the first at PINPOINT_FAKE_FIRST_S, the last at PINPOINT_FAKE_LAST_S, the others evenly
    between. Each point is the bundled 2 × H100 recording's row of the same copy, size and timing, re-labelled for
    its pair (or host GPU): a stand-in for timing the Peers page's live drawing, never a figure of a node shown."""

    RECORDED_ON = "NVIDIA H100 80GB HBM3"  # the bundled peer recording (peers_nvidia-h100-80gb-hbm3_2026-11-25)

    def __init__(self, device=None, devices=None, seconds_per_point: float | None = None):
        RecordedService.__init__(self, seconds_per_point)
        self.set = chosen_gpus(self.visible_gpus(), device, devices)
        self.gpu = self.set[0]
        self.first_s = float(os.environ.get("PINPOINT_FAKE_FIRST_S", "0.1"))
        self.last_s = float(os.environ.get("PINPOINT_FAKE_LAST_S", "1.5"))

    @classmethod
    def visible_gpus(cls) -> list[dict]:
        count = int(os.environ.get("PINPOINT_FAKE_GPUS", "2"))
        return [{"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{i:08x}-2222-4333-8444-5555{0xc0 + i:08x}",
                 "host": "node-0"} for i in range(count)]

    def _rows(self, points: list[tuple]) -> list[dict]:
        """Each point's recorded row, re-labelled: a pair (s, d) takes the recorded 0 → 1 row where s < d, else
        1 → 0; a host row of GPU g takes GPU g % 2's."""
        import pandas as pd

        recorded = self.recorded[(self.recorded["experiment"] == "peers")
                                 & (self.recorded["device_name"] == self.RECORDED_ON)]
        by_key = {(r["variant"], int(r["gpu_index"]), None if pd.isna(r["peer_index"]) else int(r["peer_index"]),
                   int(r["elements"]), r["timer"]): r for r in recorded.to_dict("records")}
        uuids = {int(g["index"]): g["uuid"] for g in self.visible_gpus()}
        # a run of its own, as each real run is: its own id and time (a page's caches key on them); a test that
        # compares two runs' pages names the time (PINPOINT_FAKE_TIMESTAMP)
        run = {"run_id": f"peers-standin-{time.time_ns():x}",
               "timestamp": os.environ.get("PINPOINT_FAKE_TIMESTAMP")
               or time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())}
        rows = []
        for variant, gpu, peer, elements, timer in points:
            if peer is None:
                source = by_key[(variant, gpu % 2, None, elements, timer)]
            else:
                source = by_key[(variant, 0 if gpu < peer else 1, 1 if gpu < peer else 0, elements, timer)]
            rows.append({**source, **run, "gpu_index": gpu, "gpu_uuid": uuids[gpu],
                         "peer_index": peer, "peer_uuid": None if peer is None else uuids[peer]})
        return rows

    def handle(self, job, progress, should_cancel):
        if job["kind"] != "experiment":
            return super().handle(job, progress, should_cancel)
        import pandas as pd

        from gpu.core.errors import JobCancelled
        from gpu.experiments import get_experiment
        from gpu.service.worker import checked

        request = checked(job)
        module = get_experiment(request.experiment)
        params = module.with_devices(request.params, [int(g["index"]) for g in self.set])
        points = list(params.points())
        rows = self._rows(points)
        started = time.monotonic()
        step = (self.last_s - self.first_s) / max(len(points) - 1, 1)
        for i, row in enumerate(rows):
            if should_cancel():
                raise JobCancelled()
            progress(i, len(points), f"point {i}")
            time.sleep(max(0.0, started + self.first_s + i * step - time.monotonic()))
            progress.row(row)
        return pd.DataFrame(rows)
