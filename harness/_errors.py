"""Errors of the harness.

Three kinds are kept apart, as in trio: the user's mistake, the system under
test misbehaving (that is a *finding*, reported as a failed property, never an
exception), and a bug in the harness itself::

    HarnessError
    ├── UsageError (ValueError)        -- your input: bad option, adapter, folder; exit 2
    │   ├── AdapterError               -- the adapter raised or broke the contract; exit 2
    │   │   └── AdapterLoadError       -- the adapter cannot be imported or is incomplete
    │   └── RunFolderError             -- a missing, corrupt or too-new run folder
    └── HarnessBug (RuntimeError)      -- a bug in the harness: please file an issue

Only a failed property exits 1. ``Interrupted`` (SIGINT / SIGTERM; exit 130 /
143) derives from BaseException, like KeyboardInterrupt.
"""

from __future__ import annotations

from typing import Any


class HarnessError(Exception):
    """Root of every error the harness raises on purpose."""


class UsageError(HarnessError, ValueError):
    """The caller gave the harness something it cannot use. Exit code 2."""


class AdapterError(UsageError):
    """The adapter (or the runtime behind it) raised, or returned what the
    adapter contract forbids. ``detail`` keeps its traceback, which the
    harness saves to the report folder as ``adapter-error.txt``."""

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail
        #: where the traceback was saved, once it was
        self.saved_to: str | None = None


class AdapterLoadError(AdapterError):
    """An adapter could not be loaded or does not satisfy the contract."""


def is_adapter_fault(exc: BaseException) -> bool:
    """The adapter's own code failed (it raised, or broke the contract), as
    opposed to the user naming an adapter or an option wrong."""
    return isinstance(exc, AdapterError) and (
        bool(exc.detail) or not isinstance(exc, AdapterLoadError)
    )


class Interrupted(BaseException):
    """A signal (SIGINT, SIGTERM) asked the run to stop. A BaseException, like
    KeyboardInterrupt, so that no ``except Exception`` absorbs it."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum
        #: the partial report written before the run stopped, if any
        self.report: Any = None


class RunFolderError(UsageError):
    """A run folder is missing, corrupt, or written by a newer harness."""


class HarnessBug(HarnessError, RuntimeError):
    """Something the harness should never do happened. Please file a bug with
    the run folder attached."""
