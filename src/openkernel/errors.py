"""One exception tree for user errors and our own bugs.

A failing *kernel* is never an exception here: compile errors, wrong answers, timeouts and
integrity violations are data (an ``EvalResult`` with a status and reasons). Exceptions are for
what the user must fix and for bugs in openkernel itself::

    OpenKernelError                 base: ``str(err)`` is one line that says how to fix it
    ├── ProblemError                the reference problem cannot be used
    │   ├── ProblemNotFound         no such file, bundled name or KernelBench id
    │   └── BadProblem              the file breaks the contract (no Model, bad get_inputs, NaN reference)
    ├── CandidateNotFound           the candidate file does not exist
    ├── ConfigError                 a bad option value (device, size, timeout), a bad skill file
    │   └── UnknownGpu              a GPU name not in the hardware table (openkernel.hardware)
    ├── EventFormatError            a line of events.jsonl this version cannot read
    ├── StoreError                  a session directory missing, not a session, or damaged
    └── InternalError               a bug in openkernel: the message asks for a report

The command line turns these into one line on stderr and a non-zero exit, in one place.
"""

from __future__ import annotations

__all__ = [
    "BadProblem",
    "CandidateNotFound",
    "ConfigError",
    "EventFormatError",
    "InternalError",
    "OpenKernelError",
    "ProblemError",
    "ProblemNotFound",
    "StoreError",
]


class OpenKernelError(Exception):
    """Base of every error openkernel raises on purpose. The message says how to fix it."""


class ProblemError(OpenKernelError):
    """The reference problem cannot be used."""


class ProblemNotFound(ProblemError):
    """No problem file, bundled problem or KernelBench id matches what was asked for."""


class BadProblem(ProblemError):
    """The problem file breaks the KernelBench contract or gives an unusable reference."""


class CandidateNotFound(OpenKernelError):
    """The candidate kernel file does not exist or cannot be read."""


class ConfigError(OpenKernelError):
    """An option has a value openkernel cannot use."""


class EventFormatError(OpenKernelError):
    """A JSON object is not an event this version of openkernel can read."""


class StoreError(OpenKernelError):
    """A session directory is missing, not a session, or damaged beyond a torn last line."""


class InternalError(OpenKernelError):
    """A bug in openkernel itself (never the user's fault)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"{message} (this is a bug in openkernel; please report it with the command you ran)")
