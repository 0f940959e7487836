"""One interface, two backends: **live** (the GPU worker) and **replay** (runs recorded on a real GPU).

Both answer ``submit(experiment, params, session) -> JobHandle`` with results in the schema of
``gpu.core.schema``. Replay never invents a point: it returns the recorded rows that match the request and
says which requested points were not recorded.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import threading
from pathlib import Path

import pandas as pd

from gpu.core import devices as device_sets
from gpu.core import paths, schema, stats
from gpu.core.devices import uuid_tail
from gpu.core.errors import DeviceNotFound, ValidationError, WorkerUnavailable
from gpu.core.limits import Limits
from gpu.core.units import format_bytes
from gpu.experiments import get_experiment, order
from gpu.experiments.grid import skipped_notes
from gpu.experiments.registry import min_gpus
from gpu.experiments.request import Request, check_params, checked_request, on_device
from gpu.results.persistence import legacy
from gpu.service.client import DEFAULT_SERVICE, JobHandle, WorkerClient, visible_gpus

REPLAY_DIR = paths.asset("replay")
NO_NVIDIA_GPU = "no NVIDIA GPU on this machine"
# Where the NVIDIA driver shows its GPUs (device nodes, and the driver's own list); none of them: no GPU here.
NVIDIA_GPU_SIGNS = ("/dev/nvidia[0-9]*", "/proc/driver/nvidia/gpus/*")


class PointCache:
    """Points measured through this worker, by experiment, profile and point key (the experiment's KEY_COLUMNS,
    as replay matches them). A request whose every point is here is answered from it, at once: moving a slider
    back costs nothing. Thread-safe: one cache serves every session of the app."""

    def __init__(self):
        self._rows: dict[tuple, dict] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(experiment: str, profile: str, values) -> tuple:
        return (experiment, profile, *(schema.key_value(v) for v in values))

    def remember(self, frame: pd.DataFrame, profile: str | None = None) -> None:
        """Keep a finished job's points, under the profile it was asked for (its rows name the same one)."""
        if frame is None or frame.empty:
            return
        experiment = str(frame["experiment"].iloc[0])
        columns = get_experiment(experiment).KEY_COLUMNS
        with self._lock:
            for row in frame.to_dict("records"):
                asked = stats.get_profile(profile).name if profile else str(row["profile"])
                self._rows[self._key(experiment, asked, [row[c] for c in columns])] = row

    def lookup(self, request: Request) -> pd.DataFrame | None:
        """Every point of ``request`` from the cache (rows keep their own run id and time), or None if one is
        missing."""
        profile = stats.get_profile(request.profile).name
        with self._lock:
            rows = [self._rows.get(self._key(request.experiment, profile, point)) for point in request.params.points()]
        if not rows or any(r is None for r in rows):
            return None
        return schema.validate(pd.DataFrame(rows))


class LiveBackend:
    kind = "live"

    def __init__(self, client: WorkerClient):
        self.client = client
        self.cache = PointCache()

    @property
    def facts(self) -> dict:
        return self.client.info.get("facts", {})

    def known_limits(self) -> Limits:
        """The limits the worker reported at start: instant, for sliders; every job re-checks fresh ones."""
        return Limits(**self.client.info["limits"])

    @property
    def gpus(self) -> list[dict]:
        """Every GPU the worker's process sees (index, model, UUID, host), for choosing another."""
        return list(self.client.info.get("gpus", []))

    @property
    def indices(self) -> list[int]:
        """The ordinals of the GPUs this backend's worker holds: its device set ([0], [0, 1], …)."""
        return self.client.gpu_indices

    @property
    def device_set(self) -> list[dict]:
        """The GPUs of this backend's set, each as ``gpus`` lists it (index, model, UUID, host)."""
        by_index = {int(g["index"]): g for g in self.gpus if "index" in g}
        return [by_index.get(i, {"index": i}) for i in self.indices]

    def gpu_name(self) -> str:
        """The GPU that measures: model · UUID tail · host (what the worker knows of them); for a set of several,
        GPUs 0,1 · model(s) · host."""
        if len(self.indices) > 1:
            members = self.device_set
            models = ", ".join(dict.fromkeys(str(g.get("name", "unknown GPU")) for g in members))
            hosts = ", ".join(dict.fromkeys(str(g["host"]) for g in members if g.get("host")))
            return " · ".join(v for v in (device_sets.set_label(self.indices), models, hosts) if v)
        facts = self.facts
        board = uuid_tail(facts["gpu_uuid"]) if facts.get("gpu_uuid") else None
        return " · ".join(str(v) for v in (facts.get("device_name", "the GPU"), board, facts.get("host")) if v)

    def label(self) -> str:
        return f"Live on {self.gpu_name()}"

    def check(self, experiment: str, params: dict) -> list[str]:
        """Reasons the request would be refused, from the limits the worker reported last (for a widget that only
        asks; a measurement builds its ``request`` once)."""
        return check_params(experiment, params, self.known_limits())

    def request(self, experiment: str, params: dict) -> Request:
        """``params`` parsed and checked once against the limits the worker reported (ValidationError with every
        reason): what ``submit`` sends, and the worker trusts."""
        return checked_request(experiment, params, self.known_limits())

    def checked_here(self, request: Request) -> Request:
        """A ``request`` checked against no device (a suite's) checked against this worker's limits, its typed
        parameters not parsed again (ValidationError with every reason)."""
        return on_device(request, self.known_limits())

    def submit(self, request: Request, session: str | None = None, reuse: bool = False,
               owner: str | None = None) -> JobHandle:
        """A job on the worker for a checked ``request``, ``owner``'s (the signed-in person's: their turn in the queue
        and their one queued job); with ``reuse``, a request whose every point was measured before (same profile) is
        answered from those points at once, with a note saying when they were measured. The runner never reuses: a
        recording is always measured anew."""
        if reuse:
            try:
                cached = self.cache.lookup(request)
            except ValueError:
                cached = None
            if cached is not None:
                handle = JobHandle(id=0, kind="reused", session=session, payload={"request": request}, owner=owner)
                when = sorted(set(str(t)[11:19] for t in cached["timestamp"]))
                handle.notes.append(f"Reused: all {len(cached)} points were measured earlier in this worker (at "
                                    f"{', '.join(when[:4])}{' …' if len(when) > 4 else ''} UTC, profile "
                                    f"{request.profile}); nothing was measured again. Turn off "
                                    "'Reuse measured points' in the sidebar to measure anew.")
                handle.finish("done", result=cached)
                return handle
        handle = self.client.submit("experiment", {"request": request}, session, owner)
        handle.notes.extend(skipped_notes(request.params))
        return handle

    def warm(self) -> JobHandle:
        """Queue the worker's first job: pin, or write every page of, the host buffers experiments keep between jobs
        (``pooled_host_buffers`` at default settings) while nobody waits, so a first Measure neither pins nor faults
        in pages. The app asks for it as it starts its worker; a measure arriving meanwhile waits behind it."""
        return self.client.submit("warm_host_pool", {})


class ReplayBackend:
    """Serves recorded runs from ``assets/replay``; each recording is one run_id of one device and date."""

    kind = "replay"

    def __init__(self, directory: Path | None = None, frames: list[pd.DataFrame] | None = None):
        """Recordings from ``directory`` (by default ``replay_directory()``), or exactly ``frames`` (a stored run
        opened on its page)."""
        self.directory = Path(directory) if directory is not None else replay_directory()
        self.source = "the opened run" if frames is not None else "the bundled recordings"
        self.frames: list[pd.DataFrame] = list(frames or [])
        self.problems: list[str] = []
        self.files: dict[Path, pd.DataFrame] = {}  # each file read → its frame (the runs catalog reuses them)
        paths = [] if frames is not None else \
            sorted(self.directory.glob("*.parquet")) + sorted(self.directory.glob("*.csv"))
        for path in paths:
            try:
                self.frames.append(legacy.read_results(path))
                self.files[path] = self.frames[-1]
            except schema.SchemaError as exc:  # one damaged file must not take the others down
                self.problems.append(f"{path.name}: {exc}")
        self.data = pd.concat(self.frames, ignore_index=True) if self.frames else pd.DataFrame(columns=schema.COLUMNS)
        self._ids = 0
        self._recordings: dict[str, pd.DataFrame] = {}

    def recordings(self, experiment: str) -> pd.DataFrame:
        """One row per recorded run of ``experiment``: run_id, device, timestamp, profile, points (worked out once
        per experiment: the recordings never change, and every page view asks several times)."""
        if experiment not in self._recordings:
            self._recordings[experiment] = self._list_recordings(experiment)
        return self._recordings[experiment].copy()

    def _list_recordings(self, experiment: str) -> pd.DataFrame:
        rows = self.data[self.data["experiment"] == experiment]
        if rows.empty:
            return pd.DataFrame(columns=["run_id", "device_name", "timestamp", "profile", "points"])
        return (rows.groupby("run_id", sort=False)
                .agg(device_name=("device_name", "first"), timestamp=("timestamp", "first"),
                     profile=("profile", "first"), points=("bytes", "size"))
                .reset_index().sort_values("timestamp", ascending=False))

    def recording_for(self, experiment: str, wanted: set) -> str | None:
        """The recording holding the most of the ``wanted`` point keys, the newest among equals (a recording may
        hold one timing method only, e.g. batched transfers recorded apart from the single-copy sweep, or one
        corner of a grid, e.g. the Roofline's one-chunk Streams sweep), or None when none holds any."""
        module = get_experiment(experiment)
        rows = self.data[self.data["experiment"] == experiment]
        best, best_count = None, 0
        for run_id in self.recordings(experiment)["run_id"]:  # newest first
            recorded = rows[rows["run_id"] == run_id]
            count = len(wanted.intersection(order.row_keys(recorded, module)))
            if count > best_count:
                best, best_count = run_id, count
        return best

    def check(self, experiment: str, params: dict) -> list[str]:
        """Reasons the request is invalid on any device (replay knows no device limits)."""
        return check_params(experiment, params, None)

    def request(self, experiment: str, params: dict) -> Request:
        """``params`` parsed and checked once, against no device (ValidationError with every reason)."""
        return checked_request(experiment, params, None)

    def submit(self, request: Request, session: str | None = None, run_id: str | None = None) -> JobHandle:
        self._ids += 1
        handle = JobHandle(id=self._ids, kind="replay", session=session, payload={"request": request})
        handle.notes.extend(skipped_notes(request.params))
        try:
            handle.finish("done", result=self._select(request, run_id, handle.notes))
        except ValidationError as exc:
            handle.finish("failed", error=exc)
        return handle

    def _select(self, request: Request, run_id: str | None, notes: list[str]) -> pd.DataFrame:
        experiment = request.experiment
        recordings = self.recordings(experiment)
        if recordings.empty:
            # Never the folder's path: a message is shown to visitors, who have no business with the server's files.
            raise ValidationError([f"no recorded {experiment} runs in {self.source}"])
        module = get_experiment(experiment)
        wanted = set(request.params.points())
        run_id = run_id or self.recording_for(experiment, wanted) or recordings.iloc[0]["run_id"]
        recorded = self.data[(self.data["experiment"] == experiment) & (self.data["run_id"] == run_id)]
        if recorded.empty:
            raise ValidationError([f"no recording with run id {run_id}"])
        keys = order.row_keys(recorded, module)
        have = set(keys)
        selected = recorded[[key in wanted for key in keys]]
        missing = wanted - have
        later = set(getattr(module, "LATER_VARIANTS", ())) - set(recorded.get("variant", ()))
        if later and "variant" in module.KEY_COLUMNS:  # a recording made before the runner measured these
            at = module.KEY_COLUMNS.index("variant")
            missing = {key for key in missing if key[at] not in later}
        if selected.empty:
            raise ValidationError([f"none of the requested points were recorded; {describe_recording(recorded)}"])
        if missing:
            size_column = getattr(module, "SIZE_COLUMN", None)  # the key column that tells its points apart by size
            if size_column in module.KEY_COLUMNS:
                at = module.KEY_COLUMNS.index(size_column)
                sizes = sorted({key[at] for key in missing})
                what = ", ".join(format_bytes(s) for s in sizes[:8]) + (" …" if len(sizes) > 8 else "")
            else:
                what = f"{len(missing)} of {len(wanted)} requested points"
            notes.append(f"not recorded, so not shown (replay never interpolates): {what}")
        # Rows keep the recording's device and timestamp; the backend column says this view is a replay.
        return selected.assign(backend="replay").reset_index(drop=True)


def submit_values(backend, experiment: str, params: dict, **options) -> JobHandle:
    """A job for plain values (a suite's run, a talk's scene): parsed and checked once here, against ``backend``'s
    limits (``backend.request``), then submitted with ``options``; a refusal comes back as a failed job, so the caller
    reads it where it reads every outcome."""
    try:
        request = backend.request(experiment, params)
    except ValidationError as exc:
        handle = JobHandle(id=0, kind="refused", session=options.get("session"), payload={"params": params})
        handle.finish("failed", error=exc)
        return handle
    return backend.submit(request, **options)


def describe_recording(recorded: pd.DataFrame) -> str:
    """What a recording holds, for messages about what it does not: by size where its experiment declares a
    ``SIZE_COLUMN`` (copies), else by vector and block size (a kernel's ``bytes`` counts traffic, not a setting)."""
    modules = {get_experiment(e) for e in set(recorded["experiment"])}
    size_columns = {getattr(m, "SIZE_COLUMN", None) for m in modules}
    axes = [(size_columns.pop(), "sizes")] if len(size_columns) == 1 and None not in size_columns else \
        [("elements", "vector sizes"), ("block_size", "block sizes")]
    parts = []
    for column, label in axes:
        values = sorted(v for v in recorded[column].dropna().unique() if v)
        shown = [format_bytes(v) if label == "sizes" else f"{int(v):,}" for v in values]
        if shown:
            parts.append(f"{label} {', '.join(shown[:10])}" + (" …" if len(shown) > 10 else ""))
    parts.append("variants " + ", ".join(sorted(recorded["variant"].unique())))
    return "this recording has " + "; ".join(parts)


def pycuda_installed() -> bool:
    return importlib.util.find_spec("pycuda") is not None


def nvidia_gpu_present() -> bool:
    """Whether the NVIDIA driver shows a GPU here (its device nodes or its list), asked without loading CUDA."""
    return any(glob.glob(pattern) for pattern in NVIDIA_GPU_SIGNS)


def replay_reason(reason: str) -> str:
    """Why a page replays, for its banner: "no NVIDIA GPU on this machine: replaying recorded runs" where there is
    no GPU at all, else the reason live measurement is unavailable."""
    return f"{NO_NVIDIA_GPU}: replaying recorded runs" if reason == NO_NVIDIA_GPU else f"no live GPU here: {reason}"


def requested_mode() -> str:
    """PINPOINT_BACKEND: 'auto' (live when a GPU works, else replay), 'live' or 'replay'."""
    mode = os.environ.get("PINPOINT_BACKEND", "auto").strip().lower()
    return mode if mode in ("auto", "live", "replay") else "auto"


def replay_directory() -> Path:
    """PINPOINT_REPLAY_DIR: a folder of recordings to replay instead of the bundled ones (assets/replay), e.g. the
    runs recorded on a venue's own machine."""
    chosen = os.environ.get("PINPOINT_REPLAY_DIR", "").strip()
    return Path(chosen) if chosen else REPLAY_DIR


def chosen_device(device: str | None = None) -> str | None:
    """The GPU to measure on: ``device`` (the runner's --device), else PINPOINT_DEVICE, else None (the first)."""
    if device is not None and str(device).strip():
        return str(device).strip()
    return os.environ.get("PINPOINT_DEVICE", "").strip() or None


def worker_service() -> str:
    """PINPOINT_WORKER_SERVICE swaps the worker's service (``module:Class``); only tests and the simulated fleet set
    it, to drive the live paths through real worker processes on machines without a GPU."""
    return os.environ.get("PINPOINT_WORKER_SERVICE", DEFAULT_SERVICE)


def gpus_needed(experiment: str) -> tuple[int, int | None]:
    """(fewest, most) GPUs a job of ``experiment`` measures on: an experiment declares ``MIN_GPUS`` (2 for a peer
    measurement, which then takes any set of two or more); one that declares none measures one GPU."""
    need = min_gpus(get_experiment(experiment))
    return need, (1 if need <= 1 else None)


def _service_or_refusal() -> str:
    if requested_mode() == "replay":
        raise WorkerUnavailable("PINPOINT_BACKEND=replay: recorded runs only")
    service = worker_service()
    if service == DEFAULT_SERVICE and not pycuda_installed():
        # The GPU extra helps only where there is a GPU to use it on.
        raise WorkerUnavailable("PyCUDA is not installed (see requirements-gpu.txt)" if nvidia_gpu_present()
                                else NO_NVIDIA_GPU)
    return service


def resolve_devices(devices, gpus: list[dict] | None = None, *, need: int = 1, most: int | None = None,
                    job: str = "this job") -> list[dict]:
    """The GPUs a device set names ("0,1", "all", board UUIDs or their prefixes, a list of them), each as listed;
    ``gpus``: the machine's GPUs when known (a worker's hello), else asked in a spawned process. DeviceNotFound, in
    one line naming the bad value and the GPUs that exist (see ``gpu.core.devices.choose_set``)."""
    listed = list(gpus) if gpus is not None else visible_gpus(_service_or_refusal())
    by_index = {int(g["index"]): g for g in listed}
    return [by_index[i] for i in device_sets.choose_set(devices, listed, need=need, most=most, job=job)]


def open_live(device: str | None = None, devices=None, *, gpus: list[dict] | None = None, need: int = 1,
              most: int | None = None, job: str = "this job") -> LiveBackend:
    """A live backend with its own worker process: on one GPU (``device``: index or board UUID; default
    PINPOINT_DEVICE, else the first), or on a device set (``devices``: "0,1", "all", UUIDs or a list; the worker holds
    every GPU of it, and no other job measures on them while its jobs run). ``need``/``most``/``job``: what the
    set must hold (see ``resolve_devices``); a job that needs several GPUs takes ``device`` as a set of one, and
    no choice at all as every GPU. WorkerUnavailable (DeviceNotFound when no GPU answers to the choice)
    when there is none."""
    service = _service_or_refusal()
    if devices is None and need <= 1:
        device = chosen_device(device)
        return LiveBackend(WorkerClient(service=service, service_options={"device": device} if device else None))
    if devices is not None and device is not None:
        raise DeviceNotFound("give one GPU or a set of GPUs, not both")
    members = resolve_devices(devices if devices is not None else device, gpus, need=need, most=most, job=job)
    boards = [g.get("uuid") or int(g["index"]) for g in members]  # the worker checks a board by its UUID
    options = {"device": boards[0]} if len(boards) == 1 else {"devices": boards}
    return LiveBackend(WorkerClient(service=service, service_options=options))


def start_live(device: str | None = None, devices=None, **choice) -> tuple[LiveBackend | None, str]:
    """A live backend (as ``open_live`` takes it), or None with the reason it is not available."""
    try:
        return open_live(device, devices, **choice), ""
    except DeviceNotFound as exc:
        return None, str(exc)
    except WorkerUnavailable as exc:
        if requested_mode() == "replay" or str(exc) == NO_NVIDIA_GPU or "PyCUDA is not installed" in str(exc):
            return None, str(exc)
        return None, f"no usable CUDA device: {exc}"
