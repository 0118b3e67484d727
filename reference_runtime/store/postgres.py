"""The PostgreSQL backend: one schema per deployment (or per test).

Connections come from a :class:`psycopg_pool.ConnectionPool` opened lazily in
the process that uses it; each connection gets ``search_path`` set to the
store's schema when the pool creates it, so every query names bare tables.
Claims use ``SELECT ... FOR UPDATE SKIP LOCKED``: competing workers never wait
on each other's candidate rows, and re-check the lease on the row they lock.

Connection names: ``application_name`` (a parameter, or ``?application_name=``
in the URL, which libpq reads itself; the parameter wins) names every session
in ``pg_stat_activity``, so an operator -- or a harness -- can find and end the
sessions of one deployment's workers.

Lost connections: when the server ends a session (``pg_terminate_backend``, a
restart) the transaction in flight dies with it. The store raises
:class:`~reference_runtime.StorageUnavailable`, the pool discards the broken
connection, and the idle ones are tested at once (the server may have ended
them all), so the next transaction runs on a live connection.

Lost packets: a connection whose server stops answering (a lost COMMIT
acknowledgement, a partition) fails within :data:`NETWORK_TIMEOUT` seconds
instead of the kernel's fifteen minutes: libpq's ``tcp_user_timeout`` and
keepalives on the worker's side, and the same two as session settings on
the server's side (``options=-c ...``), so that a server whose client is
gone -- reset by the network, say -- ends the session and rolls back its
transaction, freeing its row locks, within seconds instead of two hours.
Whether a COMMIT that failed this way committed is then unknown: the caller
reads back (``StepContext.commit``).

Fork safety: a pool (and its sockets) inherited by a forked child is never
used there. At fork, the child points each inherited socket at ``/dev/null``,
so that finalizing those connections in the child cannot send the server a
"terminate" message that would kill the *parent's* sessions.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow
from psycopg.types.string import TextLoader
from psycopg_pool import ConnectionPool, PoolTimeout

from .. import crashpoints
from .._errors import (
    ConfigError,
    ForeignStoreError,
    NoStoreError,
    StorageUnavailable,
    StoreUnreachable,
)
from .._records import Approval, ArtifactRef, InboxMessage, Operation, Run, WorkingState
from ._base import Snapshot
from ._sql import SqlStore
from ._sqlkit import Migration, OneStatement, Tx, end_autocommit
from ._urls import redact

#: Seconds to wait for a server before calling it unreachable.
CONNECT_TIMEOUT = 5.0
#: Seconds after which a connection whose peer stopped answering is broken:
#: unacknowledged data (``tcp_user_timeout``) or a silent idle connection
#: (keepalives: idle, then 3 probes a second apart), on both ends.
NETWORK_TIMEOUT = 5.0

#: Versioned DDL for PostgreSQL. Append new steps; never edit an applied one.
MIGRATIONS: tuple[Migration, ...] = (
    (
        1,
        "initial schema",
        (
            """CREATE TABLE runs (
                run_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, status TEXT NOT NULL,
                state_version BIGINT NOT NULL, wake_at DOUBLE PRECISION, parent_run_id TEXT,
                lease_owner TEXT, lease_expiry DOUBLE PRECISION, fencing_token BIGINT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
                doc JSONB NOT NULL)""",
            "CREATE INDEX runs_status_wake ON runs (status, wake_at)",
            "CREATE INDEX runs_created ON runs (created_at, run_id)",
            "CREATE INDEX runs_tenant ON runs (tenant, created_at)",
            "CREATE INDEX runs_lease ON runs (lease_owner, lease_expiry)",
            "CREATE INDEX runs_finished ON runs (status, updated_at)",
            """CREATE TABLE working_state (
                run_id TEXT PRIMARY KEY, updated_at DOUBLE PRECISION NOT NULL,
                compacted_at DOUBLE PRECISION, doc JSONB NOT NULL)""",
            """CREATE TABLE operations (
                seq BIGSERIAL PRIMARY KEY, op_id TEXT NOT NULL UNIQUE, run_id TEXT NOT NULL,
                status TEXT NOT NULL, idempotency_key TEXT NOT NULL, doc JSONB NOT NULL)""",
            "CREATE INDEX operations_run ON operations (run_id, seq)",
            "CREATE INDEX operations_key ON operations (idempotency_key)",
            """CREATE TABLE approvals (
                seq BIGSERIAL PRIMARY KEY, approval_id TEXT NOT NULL UNIQUE, run_id TEXT NOT NULL,
                decision TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL,
                doc JSONB NOT NULL)""",
            "CREATE INDEX approvals_run ON approvals (run_id, seq)",
            "CREATE INDEX approvals_expiry ON approvals (expires_at)",
            """CREATE TABLE memory (
                seq BIGSERIAL PRIMARY KEY, memory_id TEXT NOT NULL UNIQUE,
                tenant TEXT NOT NULL, namespace TEXT NOT NULL, key TEXT NOT NULL,
                version BIGINT NOT NULL, trust DOUBLE PRECISION NOT NULL, subject TEXT,
                expires_at DOUBLE PRECISION, deleted BOOLEAN NOT NULL, doc JSONB NOT NULL)""",
            "CREATE INDEX memory_lookup ON memory (tenant, namespace, key, version)",
            "CREATE INDEX memory_subject ON memory (tenant, subject)",
            "CREATE INDEX memory_namespace ON memory (namespace, seq)",
            "CREATE INDEX memory_expiry ON memory (expires_at)",
            """CREATE TABLE memory_sources (
                memory_id TEXT NOT NULL, source_id TEXT NOT NULL,
                PRIMARY KEY (memory_id, source_id))""",
            "CREATE INDEX memory_sources_source ON memory_sources (source_id)",
            """CREATE TABLE audit (
                seq BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,
                doc JSONB NOT NULL)""",
            "CREATE INDEX audit_run ON audit (run_id, seq)",
            """CREATE TABLE artifacts (
                seq BIGSERIAL PRIMARY KEY, uri TEXT NOT NULL UNIQUE, owner TEXT NOT NULL,
                subject TEXT, expires_at DOUBLE PRECISION, doc JSONB NOT NULL)""",
            "CREATE INDEX artifacts_owner ON artifacts (owner, seq)",
            "CREATE INDEX artifacts_expiry ON artifacts (expires_at)",
            """CREATE TABLE inbox (
                seq BIGSERIAL PRIMARY KEY, message_id TEXT NOT NULL UNIQUE, run_id TEXT NOT NULL,
                received_at DOUBLE PRECISION NOT NULL, processed_at DOUBLE PRECISION,
                doc JSONB NOT NULL)""",
            "CREATE INDEX inbox_pending ON inbox (run_id, processed_at, received_at)",
        ),
    ),
    (
        2,
        "parked runs are not runnable",
        ("ALTER TABLE runs ADD COLUMN parked INTEGER NOT NULL DEFAULT 0",),
    ),
    (
        3,
        "one artifact reference per (uri, owner run)",
        # See the SQLite migration 3: keyed by uri alone, a second run storing
        # equal bytes took the first run's artifact reference over.
        (
            "ALTER TABLE artifacts DROP CONSTRAINT artifacts_uri_key",
            "ALTER TABLE artifacts ADD CONSTRAINT artifacts_uri_owner_key UNIQUE (uri, owner)",
            "CREATE INDEX artifacts_uri ON artifacts (uri)",
        ),
    ),
)

#: A run's snapshot in one statement (see :meth:`PostgresStore.load`): the
#: same rows, in the same order, as the SQL backends' six reads. JSONB read
#: as text, as the connections' loader reads it (``jsonb_out`` both ways).
_LOAD = (
    "SELECT r.doc, (SELECT w.doc FROM working_state w WHERE w.run_id = ?),"
    " ARRAY(SELECT o.doc::text FROM operations o WHERE o.run_id = ? ORDER BY o.seq),"
    " ARRAY(SELECT a.doc::text FROM approvals a WHERE a.run_id = ? ORDER BY a.seq),"
    " ARRAY(SELECT i.doc::text FROM inbox i WHERE i.run_id = ? AND i.processed_at IS NULL"
    " ORDER BY i.received_at, i.seq),"
    " ARRAY(SELECT f.doc::text FROM artifacts f WHERE f.owner = ? ORDER BY f.seq)"
    " FROM runs r WHERE r.run_id = ?"
)

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

Conn = psycopg.Connection[TupleRow]

# Every connection any pool in this process created, so a forked child can
# disarm the ones it inherits (see module docstring), and keep them alive.
_OPENED: weakref.WeakSet[Conn] = weakref.WeakSet()
_INHERITED: list[Any] = []


def _disarm_inherited_connections() -> None:
    """Runs in a forked child: make inherited sockets harmless, keep them alive."""
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        for conn in list(_OPENED):
            with contextlib.suppress(Exception):
                os.dup2(devnull, conn.pgconn.socket)
            _INHERITED.append(conn)
    finally:
        os.close(devnull)


os.register_at_fork(after_in_child=_disarm_inherited_connections)


def _network_settings(url: str, timeout: float) -> dict[str, Any]:
    """libpq parameters that break a connection whose peer went silent
    within ``timeout`` seconds, on the client's side and the server's."""
    ms = max(1000, round(timeout * 1000))
    idle = max(1, round(timeout) - 3)
    server = (
        f"-c tcp_keepalives_idle={idle} -c tcp_keepalives_interval=1"
        f" -c tcp_keepalives_count=3 -c tcp_user_timeout={ms}"
    )
    given = psycopg.conninfo.conninfo_to_dict(url).get("options")
    return {
        "tcp_user_timeout": ms,
        "keepalives": 1,
        "keepalives_idle": idle,
        "keepalives_interval": 1,
        "keepalives_count": 3,
        "options": f"{given} {server}" if given else server,
    }


def _endpoint(conn: Conn) -> str:
    """The TCP connection ``conn`` uses, as crash point detail words
    (``tcp=postgres,LOCAL_HOST,LOCAL_PORT,SERVER_HOST,SERVER_PORT``);
    empty over a Unix socket."""
    sock = socket.socket(fileno=conn.pgconn.socket)
    try:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return ""
        local, peer = sock.getsockname(), sock.getpeername()
    finally:
        sock.detach()  # the fd is libpq's: never close it here
    return f"tcp=postgres,{local[0]},{local[1]},{peer[0]},{peer[1]}"


def _handing_over(first: Conn) -> type[Conn]:
    """A connection class for a pool whose first connection is ``first``,
    already open: each later one connects as usual."""
    handed: list[Conn] = [first]

    class HandingOver(psycopg.Connection[TupleRow]):
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Conn:  # type: ignore[override]
            try:
                return handed.pop()
            except IndexError:
                return psycopg.Connection.connect(conninfo, **kwargs)

    return HandingOver


class PostgresStore(SqlStore):
    """The store contract over one PostgreSQL schema (see :mod:`._base`).

    ``schema`` is created by :meth:`setup` if missing; ``pool_size`` bounds
    the connections one process opens; ``application_name``, when given, names
    every connection (it overrides one in the URL). Thread-safe (a connection
    per call from the pool) and fork-safe (a child builds its own pool). A
    broken connection raises :class:`StorageUnavailable` (see module docstring).
    """

    name = "postgres"
    placeholder = "%s"
    claim_lock = " FOR UPDATE OF runs SKIP LOCKED"

    def __init__(
        self,
        url: str,
        *,
        schema: str = "public",
        pool_size: int = 4,
        application_name: str | None = None,
        read_only: bool = False,
        connect_timeout: float = CONNECT_TIMEOUT,
        network_timeout: float = NETWORK_TIMEOUT,
    ) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ConfigError(
                f"bad Postgres schema name {schema!r}: use 1-63 letters, digits or '_', "
                "not starting with a digit (for example 'harness_runs')"
            )
        try:
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise ConfigError(
                f"bad Postgres URL {redact(url)!r} ({str(exc).strip()}); expected e.g. "
                "postgresql://user@localhost:5432/dbname"
            ) from exc
        if pool_size < 1:
            raise ConfigError(f"pool_size must be at least 1, got {pool_size}")
        #: Connection URL (may hold a password: do not log it).
        self.url = url
        self.schema = schema
        self.pool_size = pool_size
        self.application_name = application_name
        #: Every session refuses writes (``default_transaction_read_only``).
        self.read_only = read_only
        #: Seconds to wait for the server before saying it is unreachable.
        self.connect_timeout = connect_timeout
        #: Seconds before a connection whose peer went silent is broken
        #: (see module docstring).
        self.network_timeout = network_timeout
        self._pool: ConnectionPool[Conn] | None = None
        self._pid = 0
        self._lock = threading.Lock()
        self._lock_pid = os.getpid()
        self._closed = False

    def _fork_safe_lock(self) -> threading.Lock:
        # A lock held by another thread at fork time would stay held forever in
        # the child: a new process gets a new lock.
        if self._lock_pid != os.getpid():
            self._lock, self._lock_pid = threading.Lock(), os.getpid()
        return self._lock

    def _row_lock(self, of: str = "") -> str:
        return f" FOR UPDATE OF {of}" if of else " FOR UPDATE"

    # -- connections -----------------------------------------------------
    def _configure(self, conn: Conn) -> None:
        # Read JSONB as its text: pydantic parses JSON text faster than it
        # validates a Python dict, and the round trip stays exact.
        # (search_path and read-only come with the startup packet: see
        # _session_options; no SET, no transaction, no round trip here)
        conn.adapters.register_loader("jsonb", TextLoader)
        _OPENED.add(conn)

    def _session_options(self) -> str:
        """This store's session settings as ``-c`` options of the startup
        packet: every session starts in the schema (and, for a read-only
        store, refusing writes) without a SET and its COMMIT after connecting."""
        settings = f'-c search_path="{self.schema}"'  # a checked name: no space, no quote
        if self.read_only:
            settings += " -c default_transaction_read_only=on"
        return settings

    def _connections(self) -> ConnectionPool[Conn]:
        """This process's pool, opened on first use (and anew after a fork)."""
        if self._closed:
            raise RuntimeError(f"PostgresStore(schema={self.schema!r}) was closed")
        pool, pid = self._pool, os.getpid()
        if pool is not None and self._pid == pid:
            return pool
        with self._fork_safe_lock():
            if self._pool is not None and self._pid == pid:
                return self._pool
            if self._pool is not None:
                _INHERITED.append(self._pool)  # the parent's; never close it here
            kwargs: dict[str, Any] = {
                "connect_timeout": max(1, round(self.connect_timeout)),
                **_network_settings(self.url, self.network_timeout),
            }
            kwargs["options"] += " " + self._session_options()
            if self.application_name:
                kwargs["application_name"] = self.application_name
            try:
                # One direct attempt first: it fails within connect_timeout with
                # libpq's own reason, where the pool would retry (and log each
                # failure) until its open timeout. The connection it opens is
                # the pool's first: a worker opens one session, not two.
                first = psycopg.connect(self.url, **kwargs)
            except psycopg.Error as exc:
                raise StoreUnreachable(
                    f"PostgreSQL at {redact(self.url)}", exc, self.connect_timeout
                ) from exc
            pool = ConnectionPool(
                self.url,
                kwargs=kwargs,
                min_size=1,
                max_size=self.pool_size,
                # One thread to (re)connect in the background, not three: a
                # worker process uses one connection at a time, and every
                # thread costs it a start and a join (about 0.2 ms of CPU each).
                num_workers=1,
                open=False,
                configure=self._configure,
                name=f"store-{self.schema}",
                connection_class=_handing_over(first),
            )
            try:
                pool.open(wait=True, timeout=30.0)
            except PoolTimeout as exc:
                # The pool keeps retrying in the background: stop it, or the
                # process lingers.
                pool.close(timeout=0)
                first.close()  # if the pool never took it
                raise StoreUnreachable(f"PostgreSQL at {redact(self.url)}", exc, 30.0) from exc
            self._pool, self._pid = pool, pid
            return pool

    @contextlib.contextmanager
    def _transaction(self, first: str | None = None, *, single: bool = False) -> Iterator[Tx]:
        """``single``: one statement in autocommit (one round trip, not three)."""
        pool: ConnectionPool[Conn] | None = None
        broken = False
        try:
            pool = self._connections()
            with pool.connection() as conn, crashpoints.where(lambda: _endpoint(conn)):
                # (a connection already bad fails its statement as before)
                single = single and conn.pgconn.transaction_status == TransactionStatus.IDLE
                if single:
                    conn.autocommit = True
                try:
                    with conn.cursor() as cur:
                        if first:
                            cur.execute(first)
                        yield (OneStatement if single else Tx)(cur, self.placeholder)
                    try:
                        conn.commit()
                    except psycopg.OperationalError:
                        # SEEDED BUG commit-lost-as-applied: "the connection
                        # died after COMMIT was sent: it went through" -- never
                        # read back, so a COMMIT lost on its way is acted on.
                        if "commit-lost-as-applied" in self.bugs and (conn.broken or conn.closed):
                            return
                        raise
                except BaseException:
                    # BaseException too: a simulated crash must roll back before
                    # the connection goes back to the pool. A broken connection
                    # cannot roll back; the server aborts its transaction and the
                    # pool discards it.
                    with contextlib.suppress(psycopg.Error):
                        conn.rollback()
                    broken = conn.broken or conn.closed
                    raise
                finally:
                    if single:
                        end_autocommit(conn)
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            # Only a lost connection is translated: an error on a live one (a
            # cancelled statement, a constraint) is the caller's to see as is.
            if not (broken or isinstance(exc, PoolTimeout)):
                raise
            if pool is not None and broken:
                # The server may have ended every session of this process at
                # once (pg_terminate_backend by application_name): test the idle
                # ones now, so the next transaction does not pick a dead one.
                with contextlib.suppress(psycopg.Error):
                    pool.check()
            raise StorageUnavailable(f"PostgreSQL (schema {self.schema!r})", exc) from exc

    def _write(self) -> contextlib.AbstractContextManager[Tx]:
        return self._transaction()

    def _read(self) -> contextlib.AbstractContextManager[Tx]:
        # One statement sees one snapshot in autocommit too (OneStatement
        # refuses a second: several take _snapshot).
        return self._transaction(single=True)

    def load(self, run_id: str) -> Snapshot:
        """What :meth:`SqlRuns.load` reads, in one statement: a statement sees
        one snapshot, so it is as consistent as the six reads of a
        repeatable-read transaction, in one round trip instead of nine
        (BEGIN, SET TRANSACTION, six SELECTs, COMMIT)."""
        with self._read() as tx:
            row = tx.one(_LOAD, *([run_id] * 6))
        if row is None:
            raise KeyError(f"no run with id {run_id!r} in this store")
        run, state, ops, apps, inbox, arts = row
        if state is None:
            raise KeyError(f"run {run_id!r} has no working state (a corrupt store?)")
        return Snapshot(
            run=Run.model_validate_json(run),
            state=WorkingState.model_validate_json(state),
            operations=tuple(Operation.model_validate_json(d) for d in ops),
            approvals=tuple(Approval.model_validate_json(d) for d in apps),
            pending_inbox=tuple(InboxMessage.model_validate_json(d) for d in inbox),
            artifacts=tuple(ArtifactRef.model_validate_json(d) for d in arts),
        )

    def _snapshot(self) -> contextlib.AbstractContextManager[Tx]:
        # load() reads several tables: they must come from one snapshot.
        return self._transaction("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")

    # -- lifecycle -------------------------------------------------------
    def setup(self, *, create: bool = True) -> None:
        """Create the schema and apply missing migrations. Idempotent; several
        processes calling it at once take turns on a transaction-scoped
        advisory lock named after the schema.

        First checks, without writing, that the schema's tables are this
        store's (see :meth:`Store.setup`): the default schema, ``public``, may
        well hold another program's tables."""
        create = create and not self.read_only
        if self._up_to_date(MIGRATIONS):
            return  # the common case for a starting worker: no lock taken
        state = self._inspect()
        if state != "ours" and not create:
            raise NoStoreError(
                f"there is no store in schema {self.schema!r} of {redact(self.url)} ({state}); "
                "check --store / RR_STORE and --schema, or create it by submitting a run"
            )
        if self.read_only:
            raise ConfigError(
                f"the store in schema {self.schema!r} was written by older code and needs a "
                "schema migration, which a read-only command does not make; start a worker first"
            )
        with self._write() as tx:
            tx.run("SELECT pg_advisory_xact_lock(hashtext(?))", f"sah-store-setup:{self.schema}")
            tx.run(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            self._migrate(tx, MIGRATIONS, real="DOUBLE PRECISION")

    def _inspect(self) -> str:
        """``"ours"`` or why there is no store yet; raises ForeignStoreError
        for a schema whose tables belong to another program."""
        with self._snapshot() as tx:  # two statements: one snapshot
            tables = {
                r[0]
                for r in tx.all(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
                    self.schema,
                )
            }
            columns = {
                r[0]
                for r in tx.all(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_schema = ? AND table_name = 'schema_migrations'",
                    self.schema,
                )
            }
        if not tables:
            return "the schema has no tables"
        if "runs" in tables and {"version", "name", "applied_at"} <= columns:
            return "ours"
        raise ForeignStoreError(
            f"refusing to use schema {self.schema!r} of {redact(self.url)} as a store: it holds "
            f"another program's tables ({', '.join(sorted(tables)[:5])}"
            f"{', ...' if len(tables) > 5 else ''}; no runtime schema), left untouched; "
            "choose another schema with --schema / RR_SCHEMA"
        )

    def applied_migrations(self) -> list[int]:
        """Versions recorded in ``schema_migrations``, ascending."""
        with self._read() as tx:
            return [r[0] for r in tx.all("SELECT version FROM schema_migrations ORDER BY version")]

    def drop_schema(self) -> None:
        """Drop the store's schema and everything in it (for tests). Refuses
        ``public``, which other software may share."""
        if self.schema == "public":
            raise ConfigError("refusing to drop the 'public' schema; use a dedicated schema")
        with self._write() as tx:
            tx.run(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')

    def close(self) -> None:
        """Close this process's pool; an inherited one is left alone."""
        with self._fork_safe_lock():
            if self._pool is not None and self._pid == os.getpid():
                self._pool.close()
            elif self._pool is not None:
                _INHERITED.append(self._pool)
            self._pool = None
            self._closed = True

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r}, pool_size={self.pool_size})"
