"""Opening a SQLite store must never drop this process's locks on the file.

Closing *any* descriptor of a file releases every POSIX lock the process
holds on it, including those of a live SQLite connection (SQLite's "how to
corrupt a database", section 2.2). A store check that read the header with
``open()`` did exactly that while the harness held the deployment's runtime
open: another process then took the database for unused, checkpointed and
dropped the WAL under it, and the next commit found "database disk image is
malformed". The kernel's view of the lock is checked here from another
process, as SQLite itself would see it.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from reference_runtime._errors import ForeignStoreError
from reference_runtime.store.sqlite import SqliteStore

#: SQLite's unix VFS: a reader holds a read lock on these bytes of the file
SHARED_FIRST, SHARED_SIZE = 0x40000000 + 2, 510

PROBE = f"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, {SHARED_SIZE}, {SHARED_FIRST})
    print("free")
except OSError:
    print("held")
"""


def _seen_from_another_process(path: Path) -> str:
    return subprocess.run(
        [sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_setting_up_a_second_store_keeps_a_live_connections_lock(tmp_path: Path) -> None:
    path = tmp_path / "runtime.db"
    SqliteStore(path).setup()
    live = sqlite3.connect(path, isolation_level=None)
    try:
        live.execute("SELECT count(*) FROM runs").fetchall()
        assert _seen_from_another_process(path) == "held"
        for store in (SqliteStore(path), SqliteStore(path, read_only=True)):
            store.setup(create=False)
            store.close()
            assert _seen_from_another_process(path) == "held", (
                "checking the store dropped the live connection's lock"
            )
    finally:
        live.close()


def test_a_file_that_is_not_a_database_is_still_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 10)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ForeignStoreError, match="not a SQLite database"):
        SqliteStore(path).setup()
    assert path.read_text() == "not a database\n" * 10
    assert sorted(p.name for p in tmp_path.iterdir()) == before
