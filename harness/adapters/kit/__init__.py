"""The adapter kit: the parts every adapter writes, written once.

An adapter is mostly a mapping from a runtime to the contract. What is left
is the same in every adapter, and easy to get subtly wrong; this module holds
it, so that an adapter keeps only the mapping:

- :class:`WorkerSet`: spawn workers from a shared fork server, keep them,
  kill and reap what is left on close; objects every worker would build
  alike built once in the fork server (``prebuild``, :func:`prebuilt`);
  with ``services``, each worker reaches its stores through proxies of
  its own on the network faults' Toxiproxy backend (the contract's
  ``route_worker``);
- :class:`ConstantClock`, :class:`FileClock`: a virtual time workers read,
  constant (no ``clock`` capability) or in a file the harness advances
  (``advance_clock``);
- :class:`RunRegistry`: the runs, their status and a transitions log with a
  cursor, so that ``Observation.transitions`` gets each transition once,
  chained and versioned;
- :func:`transitions_from_sequence`: a legal-transition table for a runtime
  without a state machine of its own;
- :class:`IdlePolicy`, :func:`work_until_idle`: when a worker of a runtime
  that recovers in the background may exit (quiet for N polls in a row,
  and no run with a task pending, by an adapter's ``busy`` predicate);
- :func:`signed_decision`: the approval message ``approval_message()``
  returns, signed by the world's approver, with each refused variant made
  as the harness asks (forged, wrong role on either side of the expected
  one: :func:`wrong_roles`, wrong parameters);
- :class:`UnsyncedSQLite`: a ``sqlite3`` connection for a runtime's own
  SQLite files that commits without a disk flush (safe against the process
  kills the harness makes);
- :class:`CompiledCache`: a SQLAlchemy compiled cache that every worker's
  new engine shares with the one a fork server's warm call filled;
- :class:`DedupInbox`: inbound messages by id, durable across worker
  processes, so ``deliver()`` can say False for a duplicate the runtime
  would drop silently;
- :func:`owned_folder`, :func:`spawn_owned`: a folder and processes (a
  runtime's server) owned like the harness's own, so that a SIGKILL of the
  harness leaves nothing the next run does not sweep;
- :class:`AsyncBridge`, :func:`run_async`: an asyncio runtime's client
  called from the synchronous contract, on one background event loop per
  process (a forked worker gets a fresh one);
- :class:`CrashPoints`, :func:`crash_point_trace`, :func:`read_crash_log`
  (from :mod:`harness.adapters._crashpoints`, light enough for workers):
  a worker's crash points -- hits counted per site, a kill or a stop at the
  ``CrashSpec``'s nth, every hit traced for ``crash_point_trace()``.

Everything durable is a file in the environment's workdir (SQLite for the
registry and the inbox, a text file for the clock), so a worker process
opens the same object by path, and a SIGKILL leaves either the old state or
the new one. SQLite connections are opened per process (never inherited
across a fork). See ``docs/adapters.md`` ("The kit").

The package's modules, each one part: ``_workers``, ``_clocks``, ``_shared``
(the SQLite files, the inbox), ``_runs``, ``_idle``, ``_approvals``,
``_owned``, ``_async``, ``_sqlcache``.
"""

from __future__ import annotations

from .._crashpoints import CrashPoints, crash_point_trace, read_crash_log
from ._approvals import WRONG_PARAMS, other_tenant, signed_decision, wrong_roles
from ._async import AsyncBridge, run_async
from ._clocks import EPOCH, ConstantClock, FileClock
from ._idle import GAVE_UP, IdlePolicy, work_until_idle
from ._owned import OwnedFolder, owned_folder, spawn_owned
from ._runs import RunRecord, RunRegistry, transitions_from_sequence
from ._shared import DedupInbox, UnsyncedSQLite
from ._sqlcache import CompiledCache
from ._workers import WorkerSet, prebuilt

__all__ = [
    "EPOCH",
    "GAVE_UP",
    "WRONG_PARAMS",
    "AsyncBridge",
    "CompiledCache",
    "ConstantClock",
    "CrashPoints",
    "DedupInbox",
    "FileClock",
    "IdlePolicy",
    "OwnedFolder",
    "RunRecord",
    "RunRegistry",
    "UnsyncedSQLite",
    "WorkerSet",
    "crash_point_trace",
    "other_tenant",
    "owned_folder",
    "prebuilt",
    "read_crash_log",
    "run_async",
    "signed_decision",
    "spawn_owned",
    "transitions_from_sequence",
    "work_until_idle",
    "wrong_roles",
]
