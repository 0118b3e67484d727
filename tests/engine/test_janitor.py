"""What a SIGKILLed harness leaves behind is swept by the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest
import redis

from harness import _janitor

CHILD = textwrap.dedent(
    """
    import sys, time, psycopg, redis
    from harness import _janitor
    tag = _janitor.SCHEMA_PREFIX + _janitor.tag()
    folder = _janitor.scratch_dir()
    # What a deployment does: lease the schema (which records and makes it)
    # and the key prefix, then fill them.
    schema = _janitor.SchemaLease(sys.argv[1], tag)
    alive = _janitor.RedisLease(sys.argv[2], f"rr:{tag}:", ttl=1)
    with psycopg.connect(sys.argv[1], autocommit=True) as c:
        c.execute(f'CREATE TABLE "{tag}".runs (id text)')
    redis.Redis.from_url(sys.argv[2]).set(f"rr:{tag}:lease:r1", "w1")
    print(tag, folder, flush=True)
    time.sleep(600)
    """
)


def _spawn(postgres_url: str, redis_url: str) -> tuple[subprocess.Popen[str], str, Path]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, postgres_url, redis_url], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    tag, folder = proc.stdout.readline().split()
    return proc, tag, Path(folder)


def _schema_exists(url: str, name: str) -> bool:
    with psycopg.connect(url) as c:
        row = c.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (name,)).fetchone()
    return row is not None


@pytest.mark.postgres
@pytest.mark.redis
def test_resources_of_a_killed_harness_are_swept_and_a_live_one_s_are_kept(
    postgres_url: str, redis_url: str
) -> None:
    dead, dead_tag, dead_folder = _spawn(postgres_url, redis_url)
    live, live_tag, live_folder = _spawn(postgres_url, redis_url)
    with dead, live:  # leaving closes their stdout pipes (unclosed: ResourceWarning)
        try:
            os.kill(dead.pid, signal.SIGKILL)
            dead.wait(10)
            time.sleep(1.5)  # the dead one's alive key expires; the live one's is renewed
            deadline = time.monotonic() + 10
            # the server frees a dead client's lock a moment after the kill;
            # under xdist another worker's harness may sweep it first
            while _schema_exists(postgres_url, dead_tag) and time.monotonic() < deadline:
                _janitor.sweep(postgres_url, redis_url)
            assert not _schema_exists(postgres_url, dead_tag)
            # Another worker's sweep may have dropped the schema first; the
            # folder goes once the dead run's fork server, which exits a
            # moment after its parent, lets go of its lock.
            deadline = time.monotonic() + 45
            while dead_folder.exists() and time.monotonic() < deadline:
                _janitor.sweep(postgres_url, redis_url)
                time.sleep(0.2)
            assert not dead_folder.exists()
            r = redis.Redis.from_url(redis_url)
            assert r.get(f"rr:{dead_tag}:lease:r1") is None
            # The living process keeps everything.
            assert _schema_exists(postgres_url, live_tag)
            assert live_folder.exists()
            assert r.get(f"rr:{live_tag}:lease:r1") == b"w1"
            r.close()
        finally:
            live.kill()
            live.wait(10)
            time.sleep(1.5)
            deadline = time.monotonic() + 10
            while _schema_exists(postgres_url, live_tag) and time.monotonic() < deadline:
                _janitor.sweep(postgres_url, redis_url)
    assert not _schema_exists(postgres_url, live_tag)


@pytest.mark.postgres
def test_a_dbos_adapter_schema_whose_owner_is_gone_is_swept_and_a_leased_one_kept(
    postgres_url: str,
) -> None:
    """The DBOS adapter's system schemas (``dbos_lk_*``) are recorded like
    the reference runtime's: left by a dead owner, the next run drops them."""
    orphan, held = "dbos_" + _janitor.tag(), "dbos_" + _janitor.tag()
    dead = _janitor.SchemaLease(postgres_url, orphan)
    dead._conn.close()  # as a SIGKILL ends it: lock freed, schema and record left
    lease = _janitor.SchemaLease(postgres_url, held)
    try:
        assert _schema_exists(postgres_url, orphan) and _schema_exists(postgres_url, held)
        gone = _janitor.sweep_postgres(postgres_url)
        assert orphan in gone and not _schema_exists(postgres_url, orphan)
        assert held not in gone and _schema_exists(postgres_url, held)
    finally:
        lease.release()
    assert not _schema_exists(postgres_url, held), "release drops what the lease made"


@pytest.mark.postgres
def test_a_schema_lease_excludes_a_second_owner_and_is_free_after_release(
    postgres_url: str,
) -> None:
    name = _janitor.SCHEMA_PREFIX + _janitor.tag()
    lease = _janitor.SchemaLease(postgres_url, name)
    try:
        with pytest.raises(RuntimeError, match="already owned"):
            _janitor.SchemaLease(postgres_url, name)
    finally:
        lease.release()
    _janitor.SchemaLease(postgres_url, name).release()


def test_a_signal_during_scratch_removal_waits_until_the_folder_is_gone(tmp_path: Path) -> None:
    """A SIGTERM while a profile's scratch folder was being removed cut the
    ``rmtree`` after it had deleted the lock file: the rest of the folder was
    left lock-less, swept only an hour later (issue 13). Now the removal
    finishes first (and the lock file goes last), then the run stops."""
    import threading

    from harness._errors import Interrupted
    from harness._signals import handling_signals

    with handling_signals():
        path = _janitor.scratch_dir("profile", root=tmp_path)
        for i in range(200):
            sub = path / f"d{i}"
            sub.mkdir()
            for j in range(100):
                (sub / f"f{j}").touch()
        threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGTERM)).start()
        started = time.monotonic()
        with pytest.raises(Interrupted):
            _janitor.remove_scratch(path)
            time.sleep(5)  # the signal came after the removal: still raised
        took = time.monotonic() - started
    assert not path.exists(), sorted(p.name for p in path.iterdir())[:5]
    assert took < 5, "the signal arrived during the removal, as intended"
    # The signal ended that block; the next harness run in this process (the
    # rest of a pytest session) must not be stopped by it.
    from harness._signals import check_interrupted

    check_interrupted()
