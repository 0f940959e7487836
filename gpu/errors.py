"""Errors that cross the worker boundary; each carries a message meant for the person at the page."""


class ValidationError(ValueError):
    """Parameters rejected before anything is allocated; ``reasons`` are shown to the user as they are."""

    def __init__(self, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__("; ".join(self.reasons))


class VerificationError(RuntimeError):
    """A measured operation produced wrong data: the job fails instead of reporting a bandwidth."""


class JobCancelled(Exception):
    """A newer request from the same session replaced this job."""


class WorkerError(RuntimeError):
    """The job failed inside the worker; ``fatal`` says the worker had to be replaced."""

    def __init__(self, message: str, fatal: bool = False):
        self.fatal = fatal
        super().__init__(message)
