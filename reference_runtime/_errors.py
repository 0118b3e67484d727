"""Errors raised by the reference runtime.

Every error the runtime raises on purpose derives from :class:`RuntimeFault`.
Three kinds are kept apart: the caller's mistake (bad input or configuration),
a conflict that concurrency makes normal (stale write, lost lease), and the
outside world misbehaving (a service rejected or timed out, a storage
connection was lost)::

    RuntimeFault
    ├── InputError (ValueError)            -- the caller's mistake; nothing was written
    │   ├── MalformedEventError
    │   ├── UnknownWorkflowError
    │   ├── ForgedApprovalError
    │   └── ConfigError
    │       ├── NoStoreError               (the store URL names nothing yet)
    │       └── ForeignStoreError          (it names a file or schema that is not ours)
    ├── ConcurrencyConflict                -- another writer won; reload and retry
    │   ├── StaleWriteError                (state_version moved on)
    │   ├── LeaseLostError                 (fenced: the lease expired or was taken)
    │   └── MemoryConflictError            (another run wrote that memory version first)
    ├── IllegalTransitionError             -- the state machine forbids it (a bug in the caller)
    ├── DuplicateRunError
    ├── FutureSchemaError                  -- a payload written by newer code; the run is parked
    ├── StorageUnavailable                 -- a store or lease connection broke; work stops, retry
    │   └── StoreUnreachable               (no connection could be made at all)
    └── ServiceError                       -- an external service's answer
        ├── ServiceRejected                (definitely not applied)
        └── OutcomeUnknown                 (may or may not have been applied)
"""

from __future__ import annotations


class RuntimeFault(Exception):
    """Root of every error the reference runtime raises on purpose."""


class InputError(RuntimeFault, ValueError):
    """The caller gave input the runtime cannot accept. No state was changed."""


class MalformedEventError(InputError):
    """An inbound message does not have the shape its kind requires."""


class UnknownWorkflowError(InputError):
    """A run names a workflow (or a version of it) the registry does not know."""


class ForgedApprovalError(InputError):
    """An approval decision whose signature or approver role does not verify."""


class ConfigError(InputError):
    """A configuration value (URL, option, crash-point spec) is invalid."""


class NoStoreError(ConfigError):
    """A command that only reads or changes existing runs was pointed at a
    store that does not exist (a missing or empty file, a schema without
    tables). Nothing was created."""


class ForeignStoreError(ConfigError):
    """The store URL names something that is not a store of this runtime: a
    directory, a file that is not a database, or a database whose tables
    belong to another program. Nothing was written to it."""


class ConcurrencyConflict(RuntimeFault):
    """Another writer changed the run first. Reload durable state and decide again."""


class StaleWriteError(ConcurrencyConflict):
    """An update carried a ``state_version`` that is no longer current."""

    def __init__(self, run_id: str, expected: int, actual: int | None) -> None:
        self.run_id, self.expected, self.actual = run_id, expected, actual
        super().__init__(
            f"stale write to run {run_id!r}: it was read at state_version {expected}, "
            f"but the store holds {actual}; another writer advanced it. Reload and retry."
        )


class LeaseLostError(ConcurrencyConflict):
    """The worker's lease expired or another worker holds a newer fencing token."""

    def __init__(self, run_id: str, worker_id: str, token: int, reason: str) -> None:
        self.run_id, self.worker_id, self.token = run_id, worker_id, token
        super().__init__(
            f"worker {worker_id!r} was fenced off run {run_id!r} (token {token}): {reason}"
        )


class MemoryConflictError(ConcurrencyConflict):
    """Another run committed the same version of a memory key first (both
    numbered their write past the same newest version)."""

    def __init__(self, memory_ids: list[str]) -> None:
        self.memory_ids = memory_ids
        super().__init__(
            f"memory {', '.join(map(repr, memory_ids))} was written by another run first; "
            "reload and number the write past it"
        )


class IllegalTransitionError(RuntimeFault):
    """The state machine has no edge between the two statuses."""

    def __init__(self, run_id: str, src: str, dst: str, allowed: tuple[str, ...]) -> None:
        self.run_id, self.src, self.dst = run_id, src, dst
        super().__init__(
            f"illegal transition for run {run_id!r}: {src} -> {dst}; "
            f"from {src} the state machine allows only: {', '.join(allowed) or 'nothing'}"
        )


class DuplicateRunError(RuntimeFault):
    """A run with this id already exists."""


class FutureSchemaError(RuntimeFault):
    """A payload carries a schema version newer than this code understands."""

    def __init__(self, what: str, found: int, known: int) -> None:
        self.what, self.found, self.known = what, found, known
        super().__init__(
            f"{what} has schema_version {found}, but this code knows versions up to {known}; "
            "it was written by newer code. The run is parked untouched: deploy the newer "
            "worker version to continue it."
        )


class StorageUnavailable(RuntimeFault):
    """A connection to the store (Postgres) or the lease server (Redis) broke.

    The server ended the session (``pg_terminate_backend``, ``CLIENT KILL``, a
    restart) or could not be reached. The transaction in flight died with the
    connection and was rolled back by the server; only when the break hit the
    ``COMMIT`` itself is its outcome unknown, like any lost reply. Either way the
    worker must stop working on the run and re-read durable state before it
    decides again; the broken connection is discarded and the next use opens a
    fresh one.
    """

    def __init__(self, what: str, cause: BaseException) -> None:
        self.what, self.cause = what, cause
        super().__init__(
            f"lost the connection to {what} ({type(cause).__name__}: {str(cause).strip()}); "
            "the transaction in flight was not committed. This is the storage server's "
            "doing (terminated session, restart, network): the worker drops the run and "
            "retries on a fresh connection; if it persists, check that the server is up"
        )


class StoreUnreachable(StorageUnavailable):
    """No connection to the store or lease server could be made within the
    connect timeout: a wrong URL, or a server that is down. ``what`` names the
    server by its URL, without the password."""

    def __init__(self, what: str, cause: BaseException, timeout: float) -> None:
        RuntimeFault.__init__(
            self,
            f"cannot connect to {what} within {timeout:g} s "
            f"({type(cause).__name__}: {' '.join(str(cause).split())}); check the URL and that the "
            "server is up and reachable from here",
        )
        self.what, self.cause, self.timeout = what, cause, timeout


class ServiceError(RuntimeFault):
    """An external service answered with an error."""


class ServiceRejected(ServiceError):
    """The service refused the request before applying it. Safe to retry later."""


class OutcomeUnknown(ServiceError):
    """The call timed out or the connection was lost: it may have been applied."""
