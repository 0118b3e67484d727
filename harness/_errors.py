"""Errors of the harness.

Three kinds are kept apart, as in trio: the user's mistake, the system under
test misbehaving (that is a *finding*, reported as a failed property, never an
exception), and a bug in the harness itself::

    HarnessError
    ├── UsageError (ValueError)        -- your input: bad option, adapter, folder; exit 2
    │   ├── AdapterLoadError           -- the adapter cannot be imported or is incomplete
    │   └── RunFolderError             -- a missing, corrupt or too-new run folder
    └── HarnessBug (RuntimeError)      -- a bug in the harness: please file an issue
"""

from __future__ import annotations


class HarnessError(Exception):
    """Root of every error the harness raises on purpose."""


class UsageError(HarnessError, ValueError):
    """The caller gave the harness something it cannot use. Exit code 2."""


class AdapterLoadError(UsageError):
    """An adapter could not be loaded or does not satisfy the contract."""


class RunFolderError(UsageError):
    """A run folder is missing, corrupt, or written by a newer harness."""


class HarnessBug(HarnessError, RuntimeError):
    """Something the harness should never do happened. Please file a bug with
    the run folder attached."""
