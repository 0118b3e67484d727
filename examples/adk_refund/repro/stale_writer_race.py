"""ADK 3, without the harness: two processes append to one session at once.

``DatabaseSessionService.append_event`` rejects a writer whose session is
stale (``StaleSessionError``: "The session has been modified in storage
since it was loaded"). It reads the stored session's revision marker, compares
it with the one the writer loaded, then writes the event and a new marker.
Locking the row for that read is what makes the check atomic: ADK does it
(``SELECT ... FOR UPDATE``) only on MySQL, MariaDB and Postgres. On SQLite in
google-adk 2.13.0 nothing holds the read: Python's driver begins a
transaction only at the first write, so the read runs on its own and two
writers can both pass the check before either commits; the second's write
then waits for the first's COMMIT and succeeds too. google-adk 2.15.0 begins
every SQLite read-write transaction with ``BEGIN IMMEDIATE`` (the database's
write lock, taken before the read), which closes the window.

Each trial: a fresh database (a SQLite file in a temporary folder, or a
Postgres schema of its own, dropped afterwards), its tables made once
(``prepare_tables()``) and one session created; two worker processes each
load the session (``get_session``), meet at a barrier, and append one event
of their own. The session is then read back: if it holds both events, both
appends were accepted and the stale-writer check did not fire.

    python examples/adk_refund/repro/stale_writer_race.py [--trials 20] [--database postgres]

Exit 1 when some trial stored both events (reproduced), 0 when none did,
2 on bad arguments. Imports nothing from the harness.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import secrets
import sys
import tempfile
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

APP, USER, SESSION = "refund", "t1", "r1"
WRITERS = ("w1", "w2")
BARRIER_SECONDS = 60.0


def sessions_for(url: str, schema: str | None) -> Any:
    from google.adk.sessions import DatabaseSessionService

    if schema is None:
        return DatabaseSessionService(db_url=url)
    # asyncpg: every connection of this service works in the trial's schema
    return DatabaseSessionService(
        db_url=url, connect_args={"server_settings": {"search_path": schema}}
    )


async def append_once(name: str, url: str, schema: str | None, barrier: Any) -> str:
    """Load the session, wait for the other writer, append one event."""
    from google.adk.events import Event
    from google.genai import types

    sessions = sessions_for(url, schema)
    try:
        await sessions.prepare_tables()  # a read of the schema version, done before the race
        session = await sessions.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None, "the session the parent created is missing"
        said = types.Content(role="user", parts=[types.Part(text=f"from {name}")])
        event = Event(author="user", invocation_id=f"e-{name}", content=said)
        barrier.wait(BARRIER_SECONDS)  # both writers hold a session loaded before either appends
        try:
            await sessions.append_event(session, event)
        except Exception as exc:  # the outcome is what we report
            if type(exc).__name__ == "StaleSessionError":
                return "stale"  # the check fired: this writer must reload the session
            return f"{type(exc).__name__}: {exc}".splitlines()[0][:120]
        return "accepted"
    finally:
        await sessions.close()


def writer(name: str, barrier: Any, conn: Connection) -> None:
    """A worker process: one append per trial it is sent, until it is sent None."""
    while (trial := conn.recv()) is not None:
        url, schema = trial
        conn.send(asyncio.run(append_once(name, url, schema, barrier)))


async def prepare(url: str, schema: str | None) -> None:
    """The deployment's part: the tables, then the session both writers load."""
    sessions = sessions_for(url, schema)
    await sessions.prepare_tables()
    await sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    await sessions.close()


async def stored(url: str, schema: str | None) -> list[str]:
    """The texts of the session's events, as a fresh reader sees them."""
    sessions = sessions_for(url, schema)
    session = await sessions.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    await sessions.close()
    assert session is not None
    return [p.text or "" for e in session.events if e.content for p in e.content.parts or []]


def postgres_schema(dsn: str, schema: str, *, create: bool) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        sql = f'CREATE SCHEMA "{schema}"' if create else f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'
        conn.execute(sql.encode())


def trial_database(
    database: str, postgres_url: str, folder: Path, i: int
) -> tuple[str, str | None]:
    if database == "sqlite":
        return f"sqlite+aiosqlite:///{folder / f'sessions-{i}.db'}", None
    schema = f"adk3_repro_{os.getpid()}_{secrets.token_hex(4)}"
    postgres_schema(postgres_url, schema, create=True)
    return "postgresql+asyncpg://" + postgres_url.split("://", 1)[1], schema


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="races to run (default 20)")
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("HARNESS_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
        help="with --database postgres: a server and database to make a schema per trial in",
    )
    args = parser.parse_args(argv)
    if args.trials < 1:
        parser.error(f"--trials must be at least 1, not {args.trials}")
    if args.database == "postgres":
        import psycopg

        try:
            psycopg.connect(args.postgres_url, connect_timeout=10).close()
        except psycopg.Error as exc:
            parser.error(f"--postgres-url {args.postgres_url!r}: {exc}".strip())
    import google.adk

    spawn = multiprocessing.get_context("spawn")  # no asyncio loop or connection inherited
    barrier = spawn.Barrier(len(WRITERS))
    pipes = [spawn.Pipe() for _ in WRITERS]
    procs = [
        spawn.Process(target=writer, args=(name, barrier, child), daemon=True)
        for name, (_, child) in zip(WRITERS, pipes, strict=True)
    ]
    for proc in procs:
        proc.start()
    for _, child in pipes:
        child.close()  # a writer that dies is then an EOFError here, not a hang
    outcomes: Counter[str] = Counter()
    both = 0
    try:
        with tempfile.TemporaryDirectory(prefix="adk3-") as folder:
            for i in range(1, args.trials + 1):
                url, schema = trial_database(args.database, args.postgres_url, Path(folder), i)
                try:
                    asyncio.run(prepare(url, schema))
                    for parent, _ in pipes:
                        parent.send((url, schema))
                    results = [parent.recv() for parent, _ in pipes]
                    texts = asyncio.run(stored(url, schema))
                finally:
                    if schema is not None:
                        postgres_schema(args.postgres_url, schema, create=False)
                accepted = results.count("accepted")
                both += accepted == 2 and len(texts) == 2
                outcomes.update(r for r in results if r != "accepted")
                said = ", ".join(f"{w} {r}" for w, r in zip(WRITERS, results, strict=True))
                print(f"trial {i}: {said}; the session holds {texts}", flush=True)
    finally:
        for parent, _ in pipes:
            with contextlib.suppress(OSError):  # a writer that died has closed its end
                parent.send(None)
        for proc in procs:
            proc.join(30)
    where = f"google-adk {google.adk.__version__}, {args.database}"
    rejected = ", ".join(f"{n} x {o}" for o, n in outcomes.most_common()) or "none"
    print(f"both appends accepted in {both} of {args.trials} trials ({where})")
    print(f"rejected appends: {rejected}")
    print("ADK 3 reproduced" if both else "ADK 3 not reproduced: the check held every time")
    return 1 if both else 0


if __name__ == "__main__":
    sys.exit(main())
