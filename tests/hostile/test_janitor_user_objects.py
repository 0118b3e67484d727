"""The janitor sweeps only what the harness recorded as its own (issue 27,
defects 3 and 6).

A database or a Redis the harness is given is not dedicated to it. Its
sweep dropped a user's schema ``rr_2024_sales`` (and its tables) and the key
``rr:rr_2024_sales:config`` because the name looked like an older harness's
and "pid 2024" was not alive; ``rr_lk_<16 hex>`` schemas no lock held, and
``harness-<pid>_*`` folders an hour old, likewise. Now only what a run
recorded (``harness_owned.schemas``, the set ``harness:owned-prefixes``, a
scratch folder's lock file) before making it is ever swept; and the keys a
run writes expire on their own (a TTL), however the run dies.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from harness import _janitor

ROOT = Path(__file__).resolve().parents[2]
#: user schemas whose names an older janitor took for the harness's: a pid
#: tag (2024, and one above any pid_max, so surely dead) and this version's
#: own shape, which no lock holds
USER_SCHEMAS = ("rr_2024_sales", "rr_4194321_sales", "rr_lk_0123456789abcdef")
USER_KEYS = tuple(f"rr:{name}:config" for name in USER_SCHEMAS)

#: A real harness run (the engine on one scenario, as ``harness run`` does
#: it) on Postgres and the Redis queue: its adapter sweeps at start.
RUN = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from harness import Engine, Settings
    from harness.adapters.reference import ReferenceAdapter
    from harness.model import Quiesce, RunSpec, RunWorker, Scenario, Submit
    adapter = ReferenceAdapter("postgres", "redis", postgres_url=sys.argv[1],
                               redis_url=sys.argv[2])
    scenario = Scenario(steps=(
        Submit(run=RunSpec(run_id="r1", tenant="acme", workflow="procurement",
                           input={"item": "bolts", "quantity": 3})),
        RunWorker(worker_id="w1"),
        Quiesce(),
    ))
    example = Engine(adapter, Settings(), workdir=Path(sys.argv[3])).execute(scenario)
    print(sorted({r.verdict.value for r in example.results}), flush=True)
    """
)

#: A run SIGKILLed while a worker holds a lease: one deployment on Postgres
#: and Redis, one run driven to its end (a ``fence`` key), a second worker
#: stopped holding the next run's lease (a ``lease`` key).
KILLED = textwrap.dedent(
    """
    import json, os, sys
    from harness._janitor import _redis
    _redis.ALIVE_TTL = 1.0  # the sweep need not wait 30 s for the alive key
    from harness.adapters.reference._deployment import Deployment
    d = Deployment(sys.argv[3], backend="postgres", queue="redis",
                   postgres_url=sys.argv[1], redis_url=sys.argv[2])
    d.submit("research", {"topic": "tides", "sources": 2, "requester": "u-1"},
             tenant="acme", run_id="done")
    assert d.drive("done") == "Completed"
    d.submit("research", {"topic": "tides", "sources": 2, "requester": "u-1"},
             tenant="acme", run_id="held")
    w = d.start_worker("w-held", crash="before_external_call=pause")
    _, status = os.waitpid(w.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), status
    print(json.dumps({"tag": d.tag}), flush=True)
    sys.stdin.readline()
    """
)


def _schemas(url: str) -> set[str]:
    with psycopg.connect(url) as c:
        return {name for (name,) in c.execute("SELECT nspname FROM pg_namespace").fetchall()}


def _recorded(url: str) -> set[str]:
    with psycopg.connect(url) as c:
        if c.execute("SELECT to_regclass(%s)", (_janitor.REGISTRY,)).fetchone() == (None,):
            return set()
        rows = c.execute(f"SELECT name FROM {_janitor.REGISTRY}").fetchall()
    return {name for (name,) in rows}


def _keys(client: redis.Redis, tag: str) -> list[str]:
    return sorted(k.decode() for k in client.scan_iter(match=f"rr:{tag}:*"))


@pytest.fixture
def user_objects(postgres_url: str, redis_url: str) -> Iterator[redis.Redis]:
    """The user's schemas (a table and a row each) and keys, made as a user
    makes them, beside the harness's; dropped afterwards."""
    client = redis.Redis.from_url(redis_url)
    with psycopg.connect(postgres_url, autocommit=True) as c:
        for name in USER_SCHEMAS:
            c.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            c.execute(f'CREATE SCHEMA "{name}"')
            c.execute(f'CREATE TABLE "{name}".orders (id int PRIMARY KEY, total numeric)')
            c.execute(f"INSERT INTO \"{name}\".orders VALUES (1, 2024.50)")
    for key in USER_KEYS:
        client.set(key, "region=emea")
    try:
        yield client
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as c:
            for name in USER_SCHEMAS:
                c.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        client.delete(*USER_KEYS)
        client.close()


def _assert_user_objects_intact(postgres_url: str, client: redis.Redis) -> None:
    with psycopg.connect(postgres_url) as c:
        for name in USER_SCHEMAS:
            rows = c.execute(f'SELECT id, total FROM "{name}".orders').fetchall()
            assert [(i, float(t)) for i, t in rows] == [(1, 2024.5)], name
    for key in USER_KEYS:
        assert client.get(key) == b"region=emea", key
        assert client.ttl(key) == -1, f"{key}: the harness set a TTL on a user's key"


def _sweep_until(done: Callable[[], bool], postgres_url: str, redis_url: str) -> None:
    """Sweep as the next run does until ``done()``: the server frees a dead
    client's lock, and the alive key expires, a moment after the kill."""
    deadline = time.monotonic() + 20
    while True:
        _janitor.sweep(postgres_url, redis_url)
        if done() or time.monotonic() > deadline:
            return
        time.sleep(0.2)


@pytest.mark.postgres
@pytest.mark.redis
def test_a_user_s_schemas_and_keys_survive_a_harness_run_and_its_sweeps(
    postgres_url: str, redis_url: str, user_objects: redis.Redis, tmp_path: Path
) -> None:
    got = subprocess.run(
        [sys.executable, "-c", RUN, postgres_url, redis_url, str(tmp_path / "engine")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)},
        timeout=240,
    )
    assert got.returncode == 0, got.stderr[-3000:]
    assert got.stdout.strip() == "['pass']", got.stdout + got.stderr[-3000:]
    _assert_user_objects_intact(postgres_url, user_objects)
    # And the next run's sweep, explicitly (the run's own came before its
    # deployment): still nothing of the user's goes.
    swept = _janitor.sweep(postgres_url, redis_url)["schemas"]
    assert isinstance(swept, list) and not set(USER_SCHEMAS) & set(swept), swept
    _assert_user_objects_intact(postgres_url, user_objects)


@pytest.mark.postgres
@pytest.mark.redis
def test_what_a_sigkilled_run_made_expires_or_is_swept_and_nothing_else_is(
    postgres_url: str, redis_url: str, user_objects: redis.Redis, tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, postgres_url, redis_url, str(tmp_path / "env")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)},
        start_new_session=True,
    )
    with proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line, "the run died before holding anything"
            tag = json.loads(line)["tag"]
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the run and its paused worker
            proc.wait(30)
    client = user_objects
    keys = _keys(client, tag)
    assert f"rr:{tag}:lease:held" in keys and f"rr:{tag}:fence:done" in keys, keys
    # Defect 6: the run's keys expire on their own, sweep or no sweep (an
    # hour past their last write: longer than any lease).
    for kind in ("lease:held", "fence:held", "fence:done"):
        ttl = client.ttl(f"rr:{tag}:{kind}")
        assert 0 < ttl <= 3600, (kind, ttl)
    # So do the alive key and the record of the prefixes (its TTL renewed
    # while any run lives): nothing the harness writes stays for ever.
    assert client.pttl(f"rr:{tag}:alive") != -1, "-1: no TTL (-2: expired already)"
    assert client.pttl(_janitor.OWNED_PREFIXES) > 0
    # Recorded as the harness's before it was made, and left behind -- unless
    # another harness run's sweep (another test's, on another xdist worker)
    # has taken it already: its maker is dead. Never a schema without its
    # record, though (nothing would ever sweep it). A sweep drops both in one
    # transaction, so the record read first is there if the schema is.
    recorded, schemas = _recorded(postgres_url), _schemas(postgres_url)  # in this order
    assert (tag in schemas) <= (tag in recorded), (tag, schemas, recorded)
    assert f"rr:{tag}:".encode() in client.smembers(_janitor.OWNED_PREFIXES)

    def gone() -> bool:
        return tag not in _schemas(postgres_url) and not _keys(client, tag)

    _sweep_until(gone, postgres_url, redis_url)
    assert tag not in _schemas(postgres_url), "the next run's sweep dropped the dead run's schema"
    assert tag not in _recorded(postgres_url)
    assert _keys(client, tag) == []
    assert f"rr:{tag}:".encode() not in client.smembers(_janitor.OWNED_PREFIXES)
    _assert_user_objects_intact(postgres_url, client)


@pytest.mark.postgres
def test_a_schema_that_exists_is_never_recorded_so_never_swept(postgres_url: str) -> None:
    """A name collision: the harness would make a schema whose name a user
    already has. The lease refuses it and records nothing; no sweep drops it."""
    # Made here, under a name of its own: the user_objects fixture's schemas
    # belong to the tests that use it (on another xdist worker, at once).
    name = "rr_lk_fedcba9876543210"
    with psycopg.connect(postgres_url, autocommit=True) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        c.execute(f'CREATE SCHEMA "{name}"')
    try:
        with pytest.raises(RuntimeError, match="already exists"):
            _janitor.SchemaLease(postgres_url, name)
        assert name not in _recorded(postgres_url)
        assert name not in _janitor.sweep_postgres(postgres_url)
        assert name in _schemas(postgres_url)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.mark.postgres
@pytest.mark.redis
def test_records_naming_what_the_harness_never_makes_are_ignored(
    postgres_url: str, redis_url: str, user_objects: redis.Redis
) -> None:
    """A record of a name the harness never makes (``public``, a user's
    schema, a glob) is not the harness's: the sweep leaves it and its object."""
    with psycopg.connect(postgres_url, autocommit=True) as c:
        _janitor._ensure_registry(c)
        c.execute(f"INSERT INTO {_janitor.REGISTRY} (name) VALUES ('rr_2024_sales')")
    user_objects.sadd(_janitor.OWNED_PREFIXES, "rr:rr_2024_sales:", "*", "rr:*")
    try:
        swept = _janitor.sweep(postgres_url, redis_url)["schemas"]
        assert isinstance(swept, list) and "rr_2024_sales" not in swept, swept
        _assert_user_objects_intact(postgres_url, user_objects)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as c:
            c.execute(f"DELETE FROM {_janitor.REGISTRY} WHERE name = 'rr_2024_sales'")
        user_objects.srem(_janitor.OWNED_PREFIXES, "rr:rr_2024_sales:", "*", "rr:*")


def test_a_folder_without_the_harness_s_lock_file_is_never_swept(tmp_path: Path) -> None:
    """Folders named as earlier versions named theirs, however old, are the
    user's unless a lock file the harness made says otherwise."""
    hours_ago = time.time() - 2 * 3600
    names = ("harness-2024_abcdefgh", "harness-probe-ijkl9012", "harness-profile-mnop3456")
    for name in names:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "notes.md").write_text("mine")
        os.utime(folder, (hours_ago, hours_ago))
    assert _janitor.sweep_folders(tmp_path) == []
    for name in names:
        assert (tmp_path / name / "notes.md").read_text() == "mine"


def test_a_copy_of_a_scratch_folder_is_not_the_harness_s_to_sweep(tmp_path: Path) -> None:
    """A scratch folder's lock file records the folder it was made for: a
    copy (an artifact unpacked under ``$TMPDIR``, a forged lock file and
    process record) is a user's folder, and what it records is not killed."""
    (tmp_path / "elsewhere").mkdir()
    original = _janitor.scratch_dir("run", root=tmp_path / "elsewhere")
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        _janitor.record_process(original, bystander.pid, ["sleep", "600"])
        copy = tmp_path / "harness-run-unpacked"
        shutil.copytree(original, copy)
        (copy / "notes.md").write_text("mine")
        assert (copy / _janitor.LOCK_NAME).is_file()
        assert _janitor.sweep_folders(tmp_path) == []
        assert (copy / "notes.md").read_text() == "mine"
        assert bystander.poll() is None, "a process a copied record named was killed"
        # The folder it was made for is swept once its owner is gone.
        os.close(_janitor._held.pop(original))
        assert _janitor.sweep_folders(tmp_path / "elsewhere") == [original.name]
        assert bystander.wait(10) == -signal.SIGKILL
    finally:
        bystander.kill()
        bystander.wait()


#: Takes one schema lease, as a LangGraph or DBOS environment on Postgres
#: does (their adapters call no sweep of their own), and says its name.
LEASE = textwrap.dedent(
    """
    import sys
    from harness import _janitor
    lease = _janitor.SchemaLease(sys.argv[1], "lg_" + _janitor.tag())
    print(lease.name, flush=True)
    if sys.argv[2] == "hold":
        sys.stdin.readline()
    lease.release()
    """
)


@pytest.mark.postgres
def test_any_adapter_s_first_lease_sweeps_what_a_killed_run_left(
    postgres_url: str, tmp_path: Path
) -> None:
    def lease(mode: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", LEASE, postgres_url, mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)},
        )

    with lease("hold") as killed:
        assert killed.stdout is not None
        name = killed.stdout.readline().strip()
        killed.kill()
    assert name in _schemas(postgres_url) and name in _recorded(postgres_url)
    deadline = time.monotonic() + 20
    while name in _schemas(postgres_url) and time.monotonic() < deadline:
        with lease("release") as nxt:  # the next run: its first lease sweeps
            nxt.communicate(timeout=60)
            assert nxt.returncode == 0
    assert name not in _schemas(postgres_url) and name not in _recorded(postgres_url)


@pytest.mark.redis
def test_a_user_key_where_the_harness_records_its_prefixes_is_left_alone(
    redis_url: str,
) -> None:
    """A user's own ``harness:owned-prefixes`` (not a set): the sweep ignores
    it, and a lease refuses with what to do, writing nothing."""
    from urllib.parse import urlsplit, urlunsplit

    # A database of its own: other runs on this server use the set for real.
    url = urlunsplit(urlsplit(redis_url)._replace(path="/15"))
    client = redis.Redis.from_url(url)
    client.set(_janitor.OWNED_PREFIXES, "mine")
    prefix = f"rr:rr_{_janitor.tag()}:"
    try:
        assert _janitor.sweep_redis(url) == 0
        with pytest.raises(RuntimeError, match="rename or delete that key"):
            _janitor.RedisLease(url, prefix)
        assert client.get(_janitor.OWNED_PREFIXES) == b"mine"
        assert not client.exists(f"{prefix}{_janitor.ALIVE}")
    finally:
        client.delete(_janitor.OWNED_PREFIXES)
        client.close()
