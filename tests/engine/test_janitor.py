"""What a SIGKILLed harness leaves behind is swept by the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest
import redis

from harness import _janitor

CHILD = textwrap.dedent(
    """
    import os, sys, time, psycopg, redis
    from harness import _janitor
    tag = _janitor.SCHEMA_PREFIX + _janitor.tag()
    folder = _janitor.scratch_dir()
    with psycopg.connect(sys.argv[1], autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{tag}"')
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
            report = _janitor.sweep(postgres_url, redis_url)
            assert dead_tag in report["schemas"]  # type: ignore[operator]
            assert not _schema_exists(postgres_url, dead_tag)
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
            _janitor.sweep(postgres_url, redis_url)
    assert not _schema_exists(postgres_url, live_tag)


def test_names_without_a_pid_tag_are_never_swept() -> None:
    assert not _janitor.orphaned("rr_abcdef")
    assert not _janitor.orphaned("public")
    assert not _janitor.orphaned(f"rr_{os.getpid()}_ab")  # our own
