"""Postgres schemas the harness owns (:class:`SchemaLease`): an advisory
lock its session holds, and a row of the registry table recorded by the
transaction that creates the schema; and the sweep that drops the recorded
schemas whose lock is free (:func:`sweep_postgres`)."""

from __future__ import annotations

import contextlib
import hashlib
import re
from typing import Any

from ._servers import _OWNED_SCHEMA, CONNECT_TIMEOUT, _sweep_first

#: seconds a drop waits for a table lock before leaving the schema to a later
#: sweep (a dying owner's session may still hold one for a moment)
LOCK_TIMEOUT_MS = 10_000

#: the Postgres schema, and its table, where the schemas the harness made
#: are recorded (:class:`SchemaLease`)
REGISTRY_SCHEMA = "harness_owned"
REGISTRY = f"{REGISTRY_SCHEMA}.schemas"


def _advisory_key(schema: str) -> int:
    """The advisory lock (a signed 64-bit key) that stands for ``schema``."""
    digest = hashlib.blake2b(f"harness-owner:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _try_lock(conn: Any, key: int) -> bool:
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    return bool(row and row[0])


def _registry_exists(conn: Any) -> bool:
    row = conn.execute("SELECT to_regclass(%s)", (REGISTRY,)).fetchone()
    return bool(row and row[0])


#: the transaction-level advisory lock under which the registry is made
_REGISTRY_LOCK = _advisory_key(REGISTRY)


def _ensure_registry(conn: Any) -> None:
    """Make the registry table if it is not there (concurrent makers wait
    for one another: ``IF NOT EXISTS`` alone races on the catalog)."""
    if _registry_exists(conn):
        return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_REGISTRY_LOCK,))
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{REGISTRY_SCHEMA}"')
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {REGISTRY} (name text PRIMARY KEY, "
            "created timestamptz NOT NULL DEFAULT now())"
        )


def _drop_recorded(conn: Any, name: str) -> bool:
    """Drop the recorded schema ``name`` and its row, in one transaction;
    whether it did (False: a lock it waited for past :data:`LOCK_TIMEOUT_MS`,
    or the server refused; the row stays for a later sweep)."""
    import psycopg

    try:
        with conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            conn.execute(f"DELETE FROM {REGISTRY} WHERE name = %s", (name,))
    except psycopg.Error:
        return False
    return True


class SchemaLease:
    """This process owns the Postgres schema ``name`` while the lease is held.

    Making the lease makes the schema: the advisory lock first (on a
    connection of its own), then one transaction that records ``name`` in
    :data:`REGISTRY` and creates it. A schema of that name that already
    exists is someone else's: the transaction fails, nothing is recorded,
    and :class:`RuntimeError` says so. Code that then runs ``CREATE SCHEMA
    IF NOT EXISTS`` finds it made. :meth:`release` drops it and its record.
    A sweeper drops only recorded schemas whose lock it can take; the server
    frees the lock when this connection ends, even by SIGKILL.
    """

    def __init__(self, url: str, name: str) -> None:
        import psycopg

        if not _OWNED_SCHEMA.match(name):
            raise ValueError(f"schema {name!r} is not a name the harness makes (see tag())")
        _sweep_first("postgres", url, sweep_postgres)
        self.name = name
        #: the harness's own sessions on this schema (anything with a
        #: ``close()``), kept with the lease while it waits in the pool for
        #: its next user, who takes them; closed when the lease is released
        self.kept: dict[str, Any] = {}
        self._conn: Any = psycopg.connect(
            url,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT,
            application_name=f"harness-owner:{name}"[:63],
        )
        try:
            if not _try_lock(self._conn, _advisory_key(name)):
                raise RuntimeError(f"schema {name!r} is already owned by another harness process")
            _ensure_registry(self._conn)
            try:
                with self._conn.transaction():
                    self._conn.execute(f"INSERT INTO {REGISTRY} (name) VALUES (%s)", (name,))
                    self._conn.execute(f'CREATE SCHEMA "{name}"')
            except (psycopg.errors.DuplicateSchema, psycopg.errors.UniqueViolation) as exc:
                raise RuntimeError(
                    f"schema {name!r} already exists: it is not the harness's to use"
                ) from exc
            except psycopg.ProgrammingError as exc:
                raise RuntimeError(
                    f"could not record schema {name!r} in {REGISTRY} "
                    f"({' '.join(str(exc).split())}); the harness "
                    f"records the schemas it makes there: if {REGISTRY_SCHEMA!r} is a schema "
                    "of yours, rename it"
                ) from exc
        except BaseException:
            self._conn.close()
            raise

    def reset(self, *, keep: tuple[str, ...] = (), sessions: str | None = None) -> bool:
        """Empty the schema for its next user, as if it were new; whether it did.

        First ends the server sessions called ``sessions`` (the former user's
        workers: a statement one of them sent just before it died, held up
        in a proxy, must not land in the next user's data), then, in one
        transaction, deletes every row of the schema's tables but those of
        ``keep`` (a migrations table: the next user's setup then finds the
        tables made) and restarts its sequences. Rows are deleted, not
        truncated: on this machine a ``TRUNCATE`` of the reference store's
        ten tables took 400 ms (a new file per table and index), the
        ``DELETE`` of a scenario's rows 11 ms. False (a lock waited for past
        two seconds, a server error): :meth:`release` it instead."""
        import psycopg

        if self._conn.closed or not all(re.fullmatch(r"[a-z_][a-z0-9_]*", k) for k in keep):
            return False
        skip = "ARRAY[" + ",".join(f"'{k}'" for k in keep) + "]::text[]"
        # One round trip; the name is of the harness's shape (checked when
        # the lease was made), so quoting it with %I/%L is enough.
        block = f"""DO $reset$ DECLARE r record; BEGIN
            SET LOCAL lock_timeout = 2000;
            FOR r IN SELECT tablename FROM pg_tables
                     WHERE schemaname = '{self.name}' AND tablename <> ALL({skip}) LOOP
                EXECUTE format('DELETE FROM %I.%I', '{self.name}', r.tablename);
            END LOOP;
            FOR r IN SELECT sequencename, start_value FROM pg_sequences
                     WHERE schemaname = '{self.name}' LOOP
                PERFORM setval(format('%I.%I', '{self.name}', r.sequencename)::regclass,
                               r.start_value, false);
            END LOOP;
        END $reset$"""
        try:
            if sessions:
                self._conn.execute(
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                    " WHERE application_name = %s AND pid <> pg_backend_pid()",
                    (sessions,),
                )
            with self._conn.transaction():
                self._conn.execute(block.encode())
        except psycopg.Error:
            return False
        return True

    def release(self) -> None:
        """Drop the schema and its record, and give the lock up (ending the
        session frees it). What cannot be dropped now is the next sweep's."""
        while self.kept:
            with contextlib.suppress(Exception):  # a broken session: the server ends it
                self.kept.popitem()[1].close()
        try:
            if not self._conn.closed:
                _drop_recorded(self._conn, self.name)
        finally:
            self._conn.close()


def sweep_postgres(url: str) -> list[str]:
    """Drop the schemas recorded in :data:`REGISTRY` that no live run owns
    (and their records); returns their names. Nothing else is looked at."""
    import psycopg

    gone = []
    with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
        if not _registry_exists(conn):
            return []
        try:
            rows = conn.execute(f"SELECT name::text FROM {REGISTRY} ORDER BY 1").fetchall()
        except psycopg.Error:
            return []  # a table of that name the harness did not make: not a record
        for (name,) in rows:
            if not _OWNED_SCHEMA.match(name):
                continue  # not a name the harness makes: a record it did not write
            key = _advisory_key(name)
            if not _try_lock(conn, key):
                continue  # a live run holds it
            try:
                if _drop_recorded(conn, name):
                    gone.append(name)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    return gone
