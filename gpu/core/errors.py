"""PinPoint's one error hierarchy: every error PinPoint raises on purpose is a ``PinPointError``.

Each carries a message meant for the person at the page. The classes also keep the built-in base they always
had (``ValueError`` for bad input, ``RuntimeError`` for failures), so callers that catch those still do.

    PinPointError
    ├── ValidationError      parameters rejected before anything is allocated
    ├── VerificationError    a measured operation produced wrong data
    ├── JobCancelled         a newer request replaced the job
    ├── WorkerError          the job failed inside the worker (``fatal``: the worker was replaced)
    ├── WorkerUnavailable    the worker process could not start
    │   └── DeviceNotFound   no GPU answers to the chosen index or UUID (the message lists those that do)
    ├── CudaError            a CUDA driver call failed, with its CUresult ``code`` (gpu.device.libcuda)
    ├── SizeError            a size string that cannot be read (gpu.core.units)
    ├── SchemaError          a results table that does not follow the schema (gpu.core.schema)
    ├── ImportProblem        a file that cannot be imported (gpu.results.exchange.imports)
    ├── StoreError           a runs store that cannot be opened or used (gpu.results.persistence.store)
    ├── ClaimError           a talk's claim that its measurement cannot judge (gpu.present.claims)
    ├── TalkError            a talk file that cannot be shown (gpu.present.talks)
    ├── FleetError           a fleet that cannot start: no cluster, no GPU, a fleet id of another suite (gpu.fleet)
    └── AccessRefused        an action the person's role does not allow (gpu.core.access)

This module imports nothing, so every layer may raise these.
"""


class PinPointError(Exception):
    """The root of every error PinPoint raises on purpose."""


class ValidationError(PinPointError, ValueError):
    """Parameters rejected before anything is allocated; ``reasons`` are shown to the user as they are."""

    def __init__(self, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__("; ".join(self.reasons))

    def __reduce__(self):
        # An error crosses processes pickled (a Dask worker's, a spawned process's): rebuilt from its own arguments,
        # not from its message (which, read as ``reasons``, would be split into characters).
        return type(self), (self.reasons,)


class VerificationError(PinPointError, RuntimeError):
    """A measured operation produced wrong data: the job fails instead of reporting a bandwidth."""


class JobCancelled(PinPointError):
    """A newer request from the same session replaced this job."""


class WorkerError(PinPointError, RuntimeError):
    """The job failed inside the worker; ``fatal`` says the worker had to be replaced."""

    def __init__(self, message: str, fatal: bool = False):
        self.fatal = fatal
        super().__init__(message)

    def __reduce__(self):
        return type(self), (str(self), self.fatal)


class WorkerUnavailable(PinPointError, RuntimeError):
    """The worker process could not start (no GPU, no driver, kernels failed to compile…)."""


class DeviceNotFound(WorkerUnavailable):
    """No GPU answers to the chosen index or UUID (``--device``, ``PINPOINT_DEVICE``); the message lists the GPUs
    that do."""


class CudaError(PinPointError, RuntimeError):
    """A CUDA driver API call returned ``code`` (a CUresult); ``sticky`` errors leave the context unusable, so
    only a new process recovers (gpu.device.libcuda lists them)."""

    def __init__(self, code: int, call: str, description: str = "", sticky: bool = False):
        self.code, self.call, self.description, self.sticky = int(code), call, description, sticky
        super().__init__(f"{call} failed: {description + ' ' if description else ''}(CUresult {self.code})")

    def __reduce__(self):
        # Without it unpickling calls CudaError(message) and fails: a multiprocessing pool then loses the result and
        # waits for ever, and Dask cannot give the error back.
        return type(self), (self.code, self.call, self.description, self.sticky)


class SizeError(PinPointError, ValueError):
    """A size string that cannot be read."""


class SchemaError(PinPointError, ValueError):
    """A results table (or a recorded file) that does not follow the schema."""


class ImportProblem(PinPointError, ValueError):
    """A file that cannot be imported; the message names the first problem."""


class StoreError(PinPointError, RuntimeError):
    """A store that cannot be opened or used (with the reason, for the person at the page)."""


class ClaimError(PinPointError, ValueError):
    """A measurement that does not hold what a talk's claim needs (with the reason)."""


class TalkError(PinPointError, ValueError):
    """A talk file that cannot be shown, with the reason."""


class FleetError(PinPointError, RuntimeError):
    """A fleet that cannot start (no cluster, no GPU worker, a fleet id of another suite); one line for the person."""


class AccessRefused(PinPointError, PermissionError):
    """An action the actor's role does not allow; the action itself raises it, whatever a page showed."""
