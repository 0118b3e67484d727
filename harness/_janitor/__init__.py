"""Cleaning up after harness processes that died without cleaning up.

A harness run removes what it creates -- scratch folders, Postgres schemas,
Redis keys -- in ``finally`` blocks. A SIGKILL of the harness itself (an
impatient CI job, the OOM killer) leaves no chance for that, so each new run
first sweeps what no live run owns (:func:`sweep`).

What the harness may sweep is what it recorded as its own *before* making it,
never what merely looks like its names: a database or a Redis it is given is
not dedicated to it, and a user's schema ``rr_2024_sales`` or key
``rr:rr_2024_sales:config`` is never the harness's, whatever its name says.
Whether the owner still lives is a lock it holds, never a pid: two CI
containers that share one database service or one ``$TMPDIR`` live in
different PID namespaces, where each other's pids look dead (or belong to
someone else). Every lock below is released by the kernel or the server when
its holder dies, however it dies:

- a scratch folder (:func:`scratch_dir`) holds a lock file, ``flock``-ed for
  as long as the folder is in use and recording the folder it was made for
  (device and inode: a copy of the folder, an unpacked artifact, is not it);
  the sweeper removes the folder only if it can take that lock itself and
  the record names this very folder -- and first kills the processes recorded
  in it (:func:`record_process`: pid, start time and PID namespace, so a
  reused pid is never killed), whose owner is dead since the lock was free.
  A folder without that lock file is never removed, whatever its name or age.
  Database files (SQLite stores, world and template files) live in such
  folders and go with them;
- a Postgres schema (:class:`SchemaLease`): a session-level advisory lock is
  taken first, on a connection of its own, then one transaction records the
  schema in the registry table ``harness_owned.schemas`` and creates it (so a
  row exists only for a schema the harness made; an existing schema of that
  name makes the transaction fail and nothing is recorded). The sweeper drops
  only schemas of that table whose lock it can take, and their rows with them;
- a Redis key prefix (:class:`RedisLease`): one script sets the prefix's
  ``alive`` key (a short TTL a daemon thread renews) and adds the prefix to
  the set ``harness:owned-prefixes``, before any key under it is written; the
  sweeper deletes the keys of a prefix of that set whose ``alive`` key has
  expired. Every key expires on its own too, so that nothing is left for
  ever if no sweep comes: the runtime's keys an hour past their last write,
  the set an hour past the last renewal of any lease;
- a netfilter rule (:mod:`harness._netfilter`) carries its owner's token in
  its comment and dies with its owner: a reaper process removes it when the
  owner's pipe closes; the sweep is the backstop.

What can and cannot make the sweep drop a user's object: a name collision
cannot (a schema is recorded only by the transaction that creates it, a
prefix only by the script that claims its unused ``alive`` key, a folder's
record names its inode), nor a copied folder, nor a record naming anything
but a name of the harness's own shape (``rr_``/``lg_``/``dbos_`` + ``lk_`` +
16 hex digits; ``public`` or ``*`` are ignored). A user who writes a row
into ``harness_owned.schemas`` naming a schema of that shape has chosen to.

A schema or key-prefix lease may serve several deployments of one process
in turn (:func:`give_pooled`, :func:`take_pooled`): emptied between them
(:meth:`SchemaLease.reset`, :meth:`RedisLease.reset`) instead of dropped and
made again, it stays recorded and locked all along, and is released at the
process's exit -- or swept, like any other, once the process is gone.

The first schema or key-prefix lease a process takes on a server sweeps
that server first, whatever the adapter. Schemas and keys of earlier
versions recorded nowhere are left alone (drop them by hand if you know they
are the harness's): the sweep cannot tell them from a user's.

One module a part: scratch folders and the templates built in them
(``_folders``), the processes a folder owns (``_processes``), Postgres
schemas (``_postgres``), Redis key prefixes (``_redis``), what those two
share (``_servers``) and leases serving one deployment after another
(``_pool``). :func:`sweep`, here, runs every sweep.
"""

from __future__ import annotations

from .._netfilter import sweep_rules

# The public names of the module this package was, from where they live now,
# and the private ones tests and benchmarks reach (imported "as" themselves).
from ._folders import (
    FOLDER_PREFIX,
    LOCK_NAME,
    copy_template,
    remove_scratch,
    scratch,
    scratch_dir,
    sweep_folders,
)
from ._folders import _held as _held
from ._pool import POOL_SIZE, give_pooled, take_pooled
from ._postgres import (
    LOCK_TIMEOUT_MS,
    REGISTRY,
    REGISTRY_SCHEMA,
    SchemaLease,
    sweep_postgres,
)
from ._postgres import _advisory_key as _advisory_key
from ._postgres import _ensure_registry as _ensure_registry
from ._processes import KILL_WAIT, PROCS_NAME, kill_recorded, process_start, record_process
from ._redis import (
    ALIVE,
    ALIVE_TTL,
    OWNED_PREFIXES,
    OWNED_PREFIXES_TTL_MS,
    RedisLease,
    sweep_redis,
)
from ._servers import CONNECT_TIMEOUT, SCHEMA_PREFIX, tag

__all__ = [
    "ALIVE",
    "ALIVE_TTL",
    "CONNECT_TIMEOUT",
    "FOLDER_PREFIX",
    "KILL_WAIT",
    "LOCK_NAME",
    "LOCK_TIMEOUT_MS",
    "OWNED_PREFIXES",
    "OWNED_PREFIXES_TTL_MS",
    "POOL_SIZE",
    "PROCS_NAME",
    "REGISTRY",
    "REGISTRY_SCHEMA",
    "SCHEMA_PREFIX",
    "RedisLease",
    "SchemaLease",
    "copy_template",
    "give_pooled",
    "kill_recorded",
    "process_start",
    "record_process",
    "remove_scratch",
    "scratch",
    "scratch_dir",
    "sweep",
    "sweep_folders",
    "sweep_postgres",
    "sweep_redis",
    "tag",
    "take_pooled",
]


def sweep(postgres_url: str | None = None, redis_url: str | None = None) -> dict[str, object]:
    """Sweep everything that harness processes killed before left behind."""
    report: dict[str, object] = {"folders": sweep_folders()}
    # After the folders: a dead run's processes are killed first. Rules
    # carry their owner's lock (harness._netfilter), not a server's.
    report["netfilter"] = sweep_rules()
    if postgres_url:
        report["schemas"] = sweep_postgres(postgres_url)
    if redis_url:
        report["redis_keys"] = sweep_redis(redis_url)
    return report
