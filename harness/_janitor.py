"""Cleaning up after harness processes that died without cleaning up.

A harness run removes what it creates -- scratch folders, Postgres schemas,
Redis keys -- in ``finally`` blocks. A SIGKILL of the harness itself (an
impatient CI job, the OOM killer) leaves no chance for that. So every such
resource carries the creating process's pid in its name (:func:`tag`), and
each new run first sweeps resources whose creator is gone (:func:`sweep`).
A pid is only meaningful on this host, which is where these resources live.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path

#: scratch folders, Postgres schemas and Redis key prefixes start with these
FOLDER_PREFIX = "harness-"
SCHEMA_PREFIX = "rr_"
_TAGGED = re.compile(r"^(?:harness-|rr_|lg_)(\d+)_")


def tag() -> str:
    """``<pid>_<random>``: unique, and tells the sweeper who owns it."""
    return f"{os.getpid()}_{uuid.uuid4().hex[:8]}"


def scratch_dir() -> Path:
    """A fresh scratch folder owned by this process."""
    return Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}_"))


def _owner(name: str) -> int | None:
    m = _TAGGED.match(name)
    return int(m.group(1)) if m else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def orphaned(name: str) -> bool:
    """Whether ``name`` was tagged by a process that no longer exists."""
    pid = _owner(name)
    return pid is not None and pid != os.getpid() and not _alive(pid)


def sweep_folders(root: Path | None = None) -> list[str]:
    root = root or Path(tempfile.gettempdir())
    gone = []
    for child in root.glob(f"{FOLDER_PREFIX}*"):
        if child.is_dir() and orphaned(child.name):
            shutil.rmtree(child, ignore_errors=True)
            gone.append(child.name)
    return gone


def sweep_postgres(url: str) -> list[str]:
    """Drop ``rr_<pid>_*`` / ``lg_<pid>_*`` schemas whose creator is gone."""
    import psycopg

    gone = []
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'rr\\_%' OR nspname LIKE 'lg\\_%'"
        ).fetchall()
        for (name,) in rows:
            if orphaned(name):
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
                gone.append(name)
    return gone


def sweep_redis(url: str) -> int:
    """Delete ``rr:rr_<pid>_*`` keys whose creator is gone."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        doomed = [
            key
            for key in client.scan_iter(match=f"rr:{SCHEMA_PREFIX}*")
            if orphaned(key.decode().split(":", 2)[1])
        ]
        return int(client.delete(*doomed)) if doomed else 0
    finally:
        client.close()


def sweep(postgres_url: str | None = None, redis_url: str | None = None) -> dict[str, object]:
    """Sweep everything this host's dead harness processes left behind."""
    report: dict[str, object] = {"folders": sweep_folders()}
    if postgres_url:
        report["schemas"] = sweep_postgres(postgres_url)
    if redis_url:
        report["redis_keys"] = sweep_redis(redis_url)
    return report
