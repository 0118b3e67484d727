"""One isolated deployment of the reference runtime, wired to a world.

A :class:`Deployment` owns everything one scenario needs and nothing else: its
own SQLite file or Postgres schema, its own Redis key prefix, its own world
database, a virtual clock file shared with its workers, tenant approval keys and
an artifact directory. Workers are real OS processes started by a spawner (the
harness's fork server, or fresh interpreters); they get the configuration as
``RR_*`` environment variables and open their own connections.

How the workers start (the preloads, the spawners) is in ``_spawning``;
this module re-exports it.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
import subprocess
import sys
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reference_runtime import FileClock, Run, Runtime, RuntimeConfig
from reference_runtime import crashpoints as cp
from reference_runtime.store import Snapshot, Store
from reference_runtime.store.sqlite import MIGRATIONS, SqliteStore

from ..._janitor import (
    SCHEMA_PREFIX,
    RedisLease,
    SchemaLease,
    copy_template,
    give_pooled,
    tag,
    take_pooled,
)
from ...world import ApprovalAuthority, World
from ._services import SPEC, services_arg
from ._spawning import (
    EPOCH,
    MAX_CLAIMS,
    OPTIONAL_PRELOAD,
    PRELOAD,
    WORKER_TARGET,
    Exit,
    ForkServerSpawner,
    Spawner,
    fork_server,
)
from ._spawning import _preload as _preload

__all__ = [
    "EPOCH",
    "MAX_CLAIMS",
    "OPTIONAL_PRELOAD",
    "PRELOAD",
    "WORKER_TARGET",
    "Deployment",
    "Exit",
    "ForkServerSpawner",
    "Spawner",
    "fork_server",
]


#: names the SQLite store's template by the schema it holds
_SQLITE_TEMPLATE = "reference-sqlite-" + hashlib.sha256(repr(MIGRATIONS).encode()).hexdigest()[:16]


def _build_sqlite_store(path: Path) -> None:
    """An empty store file with every migration applied (closed, WAL folded in)."""
    store = SqliteStore(path, synchronous="NORMAL")
    try:
        store.setup()
    finally:
        store.close()


@dataclass(frozen=True)
class _KeptStore:
    """A deployment runtime's store kept with its schema's lease, and the
    configuration it was opened for (see ``Deployment._keep_sessions``)."""

    key: tuple[Any, ...]
    store: Store

    def close(self) -> None:
        self.store.close()


class Deployment:
    """The reference runtime plus a world, isolated under ``root``."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        backend: str = "sqlite",
        queue: str = "store",
        postgres_url: str | None = None,
        redis_url: str | None = None,
        code_version: int | None = None,
        tenants: tuple[str, ...] = ("acme", "globex"),
        lease_seconds: float = 30.0,
        spawner: Spawner | None = None,
        sqlite_synchronous: str = "NORMAL",
        bugs: frozenset[str] = frozenset(),
        network_timeout: float | None = None,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.backend, self.queue = backend, queue
        self.world = World(self.root / "world.db").create()
        self.clock = FileClock(self.root / "clock", start=EPOCH)
        self.keys = {t: secrets.token_bytes(16) for t in tenants}
        self.authority = ApprovalAuthority(self.keys)
        self.schema: str | None = None
        # Names the Postgres schema and the Redis key prefix; the leases taken
        # below record them as ours before they exist, so a later run sweeps
        # them only once this process is gone, whatever PID namespace it looks
        # from -- and never anything it did not record (_janitor).
        self.tag = f"{SCHEMA_PREFIX}{tag()}"
        self._leases: list[SchemaLease | RedisLease] = []
        #: the harness's own connection for change_cursor(), opened on first use
        #: (or kept from the schema's previous user: see _adopt_kept)
        self._observer: Any = None
        self._cursor_sql: str | None = None
        # A schema and a key prefix serve one deployment after another in
        # this process, emptied in between (close): making a schema with the
        # store's tables cost about 0.4 s and dropping it 0.15 s on this
        # machine, emptying it about 0.01 s. Kept apart by what they hold.
        self._pool_kind: tuple[str, str | None, str | None] | None = None
        if backend == "postgres" or queue == "redis":
            self._pool_kind = (
                "reference",
                postgres_url if backend == "postgres" else None,
                redis_url if queue == "redis" else None,
            )
            pooled = take_pooled(self._pool_kind)
            if pooled is not None:
                self.tag, leases = pooled
                self._leases = list(leases)
        if backend == "sqlite":
            # The schema is made once per process and copied (the store's own
            # setup then finds it up to date and writes nothing).
            copy_template(_SQLITE_TEMPLATE, _build_sqlite_store, self.root / "runtime.db")
            # The harness kills processes, not machines: with WAL, NORMAL loses
            # nothing on a process kill and saves an fsync per commit.
            store_url = (
                f"sqlite:///{(self.root / 'runtime.db').resolve()}?synchronous={sqlite_synchronous}"
            )
        elif backend == "postgres":
            if not postgres_url:
                raise ValueError("backend='postgres' needs postgres_url")
            store_url = postgres_url
            self.schema = self.tag
        else:
            raise ValueError(f"backend must be 'sqlite' or 'postgres', got {backend!r}")
        extra: dict[str, Any] = {}
        if code_version is not None:
            extra["code_version"] = code_version
        self.config = RuntimeConfig(
            store_url=store_url,
            # SQLite ignores the schema; the Redis key prefix is derived from it.
            schema=self.tag,
            services=SPEC,
            services_arg=services_arg(str(self.world.path), str(self.clock.path)),
            clock=f"file:{self.clock.path}",
            artifact_dir=str(self.root / "artifacts"),
            queue=queue,
            redis_url=redis_url if queue == "redis" else None,
            lease_seconds=lease_seconds,
            tenant_keys=self.keys,
            bugs=bugs,
            network_timeout=network_timeout,
            **extra,
        )
        try:
            # Before the runtime writes a key or a table: the schema lease
            # records and creates the schema (the store's CREATE SCHEMA IF
            # NOT EXISTS then finds it).
            if self.schema is not None and not self._leases:
                assert postgres_url is not None
                self._leases.append(SchemaLease(postgres_url, self.schema))
            if self.config.redis_url is not None and not self._pooled():
                from reference_runtime.store.redis_queue import prefix_for

                prefix = prefix_for(self.config.store_url, self.tag)
                self._leases.append(RedisLease(self.config.redis_url, prefix))
            self.runtime = Runtime(self.config, clock=self.clock)
            self._adopt_kept()
        except BaseException:
            self._release()
            self.world.close()
            raise
        #: what this deployment's *workers* call their storage sessions (the
        #: harness's own observer connections stay unnamed, out of reach of
        #: :meth:`cut_worker_connections`)
        self.worker_connection_name = f"rr-worker-{self.tag}"
        self.spawner: Spawner = spawner or ForkServerSpawner(backend, queue)
        self._crash_log = self.root / "crashpoints.log"

    # -- workers --------------------------------------------------------------

    def worker_env(
        self,
        *,
        crash: str | None = None,
        trace: bool = False,
        code_version: int | None = None,
    ) -> dict[str, str]:
        cfg = self.config.with_(connection_name=self.worker_connection_name)
        if code_version is not None:
            cfg = cfg.with_(code_version=code_version)
        env = cfg.to_env()
        env[cp.ENV_LOG] = str(self._crash_log)
        env[cp.ENV_SPEC] = crash or ""
        env[cp.ENV_TRACE] = "1" if trace else ""
        return env

    def run_worker(
        self,
        worker_id: str,
        *,
        crash: str | None = None,
        trace: bool = False,
        code_version: int | None = None,
        timeout: float = 120.0,
    ) -> Exit:
        """Run one worker process until it is idle (or dies at ``crash``)."""
        env = self.worker_env(crash=crash, trace=trace, code_version=code_version)
        return self.spawner.run({"worker_id": worker_id, "max_claims": MAX_CLAIMS}, env, timeout)

    def start_worker(
        self,
        worker_id: str,
        *,
        crash: str | None = None,
        code_version: int | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start one worker process (a fresh interpreter) and return at once.

        For barriers: arm ``crash`` with ``site=pause`` and wait for the worker
        to stop itself with ``os.waitpid(proc.pid, os.WUNTRACED)``; resume it
        with ``SIGCONT``. The caller owns the process: it must ``wait()`` for it
        (or kill it) before the deployment is closed.
        """
        import json

        env = self.worker_env(crash=crash, code_version=code_version)
        code = "import json, sys, reference_runtime._worker as w; w.main(json.loads(sys.argv[1]))"
        return subprocess.Popen(
            [
                sys.executable,
                "-c",
                code,
                json.dumps({"worker_id": worker_id, "max_claims": MAX_CLAIMS}),
            ],
            env={**os.environ, **env},
            stderr=subprocess.PIPE,
        )

    # -- storage faults ---------------------------------------------------------

    def storage_kinds(self) -> tuple[str, ...]:
        """The storage faults this deployment can take: ``pg_terminate`` on the
        Postgres backend, ``redis_client_kill`` with the Redis queue."""
        kinds = []
        if self.backend == "postgres":
            kinds.append("pg_terminate")
        if self.queue == "redis":
            kinds.append("redis_client_kill")
        return tuple(kinds)

    def cut_worker_connections(self, kind: str) -> int:
        """End the server side of every storage session of this deployment's
        workers (found by :attr:`worker_connection_name`); returns how many.

        ``pg_terminate``: ``pg_terminate_backend`` on each named backend,
        waiting until it is gone, so that its transaction is rolled back and
        its locks are free when this returns. ``redis_client_kill``:
        ``CLIENT KILL ID`` on each named Redis client. 0 when the deployment
        does not use that server, or no worker holds a session.
        """
        if kind not in ("pg_terminate", "redis_client_kill"):
            raise ValueError(f"unknown storage fault {kind!r}: pg_terminate or redis_client_kill")
        if kind not in self.storage_kinds():
            return 0
        if kind == "pg_terminate":
            import psycopg

            with psycopg.connect(self.config.store_url, autocommit=True) as admin:
                rows = admin.execute(
                    # The timeout form waits (up to 10 s) for the backend to exit.
                    "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
                    " WHERE application_name = %s AND pid <> pg_backend_pid()",
                    (self.worker_connection_name,),
                ).fetchall()
            return sum(1 for (cut,) in rows if cut)
        import redis

        assert self.config.redis_url is not None  # queue=redis requires it
        client: Any = redis.Redis.from_url(self.config.redis_url)
        try:
            ids = [
                c["id"]
                for c in client.client_list()
                if c.get("name") == self.worker_connection_name
            ]
            return sum(int(client.execute_command("CLIENT", "KILL", "ID", i)) for i in ids)
        finally:
            client.close()

    def crash_log(self) -> list[tuple[int, str, int, str]]:
        """(pid, site, hit, action) lines written by crash points so far."""
        if not self._crash_log.exists():
            return []
        out = []
        for line in self._crash_log.read_text().splitlines():
            pid, site, n, action = line.split()[:4]
            out.append((int(pid), site, int(n), action))
        return out

    def paused_at(self, pid: int) -> list[str]:
        """The detail words (``key=value``) of the last crash point that
        fired in worker ``pid`` (see ``crashpoints.where``): what it held
        there, such as the storage connection it was using."""
        if not self._crash_log.exists():
            return []
        last: list[str] = []
        for line in self._crash_log.read_text().splitlines():
            words = line.split()
            if len(words) >= 4 and words[0] == str(pid) and words[3] != "trace":
                last = words[4:]
        return last

    def reset_crash_log(self) -> None:
        self._crash_log.unlink(missing_ok=True)

    # -- ingress and observation ----------------------------------------------

    def submit(self, workflow: str, input: Mapping[str, Any], *, tenant: str, run_id: str) -> Run:
        return self.runtime.submit(workflow, input, tenant=tenant, run_id=run_id)

    def snapshot(self, run_id: str) -> Snapshot:
        return self.runtime.store.load(run_id)

    def approve(
        self,
        run_id: str,
        *,
        decision: str = "approved",
        role: str | None = None,
        approver: str = "alice",
        message_id: str | None = None,
    ) -> dict[str, Any]:
        """A signed decision for the approval ``run_id`` waits on (not delivered)."""
        snap = self.snapshot(run_id)
        waiting = (snap.run.waiting_on or "").removeprefix("approval:")
        approval = next(a for a in snap.approvals if a.approval_id == waiting)
        return self.authority.decision(
            tenant=snap.run.tenant,
            approval_id=approval.approval_id,
            run_id=run_id,
            decision=decision,
            approver=approver,
            role=role or approval.approver_role,
            params_hash=approval.params_hash,
            message_id=message_id or f"decision:{approval.approval_id}",
        )

    def drive(self, run_id: str, *, approve: bool = True, max_rounds: int = 10) -> str:
        """Run workers one after another, approving what waits for approval,
        until the run settles; returns its status. Raises if a worker fails."""
        for i in range(max_rounds):
            exit_ = self.run_worker(f"drive-{i}")
            if exit_.code != 0:
                raise RuntimeError(f"worker drive-{i} ended with {exit_}")
            run = self.snapshot(run_id).run
            if run.status.value == "WaitingForApproval" and approve:
                self.deliver(self.approve(run_id))
                continue
            if run.status.value in ("Completed", "Failed", "Cancelled", "WaitingForEvent"):
                break
        return self.snapshot(run_id).run.status.value

    def deliver(self, message: Mapping[str, Any]) -> bool:
        return self.runtime.deliver(message)

    def change_cursor(self) -> Hashable:
        """A value that changes whenever a commit to the store changes what
        it holds (every connection's: workers', the harness's own), cheap to
        read: a change counter of the store, not its contents.

        SQLite: ``PRAGMA data_version`` of a read-only connection of its own,
        which moves at every commit of any other connection. Postgres: per
        table of the schema, its row count and its newest row version's
        transaction id (an insert or an update writes a row version with a
        newer one; a delete lowers the count) -- one round trip, on a
        connection of its own outside the workers' reach."""
        if self._observer is None:
            self._observer = self._open_observer()
        if self.backend == "sqlite":
            row = self._observer.execute("PRAGMA data_version").fetchone()
            return int(row[0])
        if self._cursor_sql is None:
            tables = [
                name
                for (name,) in self._observer.execute(
                    "SELECT tablename::text FROM pg_tables WHERE schemaname = %s ORDER BY 1",
                    (self.schema,),
                ).fetchall()
            ]
            if not tables:
                return None  # no store yet (its setup comes with the first submit)
            self._cursor_sql = "SELECT " + ", ".join(
                f"(SELECT count(*) || ':' || coalesce(max(xmin::text::bigint), 0)"
                f' FROM "{self.schema}"."{t}")'
                for t in tables
            )
        return tuple(self._observer.execute(self._cursor_sql).fetchone())

    def _schema_lease(self) -> SchemaLease | None:
        return next((x for x in self._leases if isinstance(x, SchemaLease)), None)

    def _store_key(self) -> tuple[Any, ...]:
        """What a kept store must match to serve this deployment's runtime."""
        c = self.config
        return (c.store_url, c.schema, c.connection_name, c.network_timeout)

    def _adopt_kept(self) -> None:
        """Take the harness's own sessions the schema's previous user kept
        with its lease (see :meth:`_keep_sessions`): its runtime's store --
        connected, set up -- and its observer connection. Each deployment
        opened both anew: two connections, a server backend each, and the
        store's setup check, per scenario."""
        lease = self._schema_lease()
        if lease is None:
            return
        store, observer = lease.kept.pop("store", None), lease.kept.pop("observer", None)
        if store is not None:
            if store.key == self._store_key():
                self.runtime.adopt_store(store.store)
            else:
                store.close()
        if observer is not None:
            if observer.closed or observer.broken:
                observer.close()
            else:
                self._observer = observer

    def _keep_sessions(self) -> None:
        """Before the schema goes back to the pool: hand its next user this
        deployment's own sessions (the workers' are ended by the reset; these
        are no worker's, and a reset deletes rows under them, nothing more).
        Released with the lease if it is not pooled (SchemaLease.release)."""
        lease = self._schema_lease()
        if lease is None or self._pool_kind is None or not self._pooled():
            return
        store = self.runtime.detach_store()
        if store is not None:
            lease.kept["store"] = _KeptStore(self._store_key(), store)
        if self._observer is not None and not (self._observer.closed or self._observer.broken):
            lease.kept["observer"], self._observer = self._observer, None

    def _open_observer(self) -> Any:
        if self.backend == "sqlite":
            db = sqlite3.connect(
                f"file:{(self.root / 'runtime.db').resolve()}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
            return db
        import psycopg

        return psycopg.connect(self.config.store_url, autocommit=True)

    def close(self) -> None:
        try:
            self._keep_sessions()
            if self._observer is not None:
                self._observer.close()
                self._observer = None
            # A deployment is scratch: closing need not wait for the disk
            # (a process kill loses nothing either way; see Runtime.close).
            self.runtime.close(durable=False)
            self.world.close(durable=False)
        finally:
            # Last, once the harness's own sessions are closed: the schema
            # and the key prefix, emptied, go to the next deployment of this
            # process; what cannot be emptied is released, which drops what
            # it covers (what cannot be dropped now is the janitor's).
            if not self._give_back():
                self._release()

    def _pooled(self) -> bool:
        """Whether this deployment's leases came from the pool (all of them)."""
        return bool(self._leases) and len(self._leases) == (self.schema is not None) + (
            self.config.redis_url is not None
        )

    def _give_back(self) -> bool:
        if self._pool_kind is None or not self._pooled():
            return False
        for lease in self._leases:
            ok = (
                lease.reset(keep=("schema_migrations",), sessions=self.worker_connection_name)
                if isinstance(lease, SchemaLease)
                else lease.reset(sessions=self.worker_connection_name)
            )
            if not ok:
                return False
        give_pooled(self._pool_kind, self.tag, tuple(self._leases))
        self._leases = []
        return True

    def _release(self) -> None:
        while self._leases:
            self._leases.pop().release()

    def __enter__(self) -> Deployment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
