"""ADK 4, without the harness: a process killed during the session database's
first setup leaves a database ADK refuses for good.

``DatabaseSessionService`` makes its tables (on SQLite, committed as they
are made: Python's driver runs DDL outside a transaction), then records the
schema version in a transaction of its own. A child process is SIGKILLed
right before that second COMMIT; every later service on the same file then
raises "Schema version not found in adk_internal_metadata".

    python examples/adk_refund/repro/schema_setup_kill.py   # prints the error, exit 0
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
from pathlib import Path

from google.adk.sessions import DatabaseSessionService
from sqlalchemy import event


def first_setup_killed(url: str) -> None:
    """In a child: set up the database, SIGKILLed at its first COMMIT."""
    sessions = DatabaseSessionService(db_url=url)
    event.listen(sessions.db_engine.sync_engine, "commit", lambda _: os.kill(os.getpid(), 9))
    asyncio.run(sessions.prepare_tables())


async def next_process(url: str) -> None:
    sessions = DatabaseSessionService(db_url=url)
    await sessions.get_session(app_name="refund", user_id="t1", session_id="r1")


def main() -> int:
    url = f"sqlite+aiosqlite:///{Path(tempfile.mkdtemp()) / 'sessions.db'}"
    pid = os.fork()
    if pid == 0:
        first_setup_killed(url)
        os._exit(0)  # not reached
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
    try:
        asyncio.run(next_process(url))
    except ValueError as exc:
        print(f"reproduced: {exc}")
        return 0
    print("not reproduced: the next process used the database")
    return 1


if __name__ == "__main__":
    sys.exit(main())
