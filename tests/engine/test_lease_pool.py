"""A Postgres schema and a Redis prefix serve one deployment after another.

A closed deployment hands its leases, emptied, to the next deployment of the
same process (``harness._janitor.give_pooled``): the next one must find the
store as if new, with nothing a former worker could still write into it, and
the process's exit must drop what it kept.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest
import redis

from harness import _janitor
from harness.adapters.reference._deployment import Deployment

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

ROOT = Path(__file__).resolve().parents[2]
RESEARCH = {"topic": "tides", "sources": 2, "requester": "u-1"}


def _deploy(tmp: Path, postgres_url: str, redis_url: str) -> Deployment:
    return Deployment(
        tmp, backend="postgres", queue="redis", postgres_url=postgres_url, redis_url=redis_url
    )


def _sequences(url: str, schema: str) -> set[tuple[str, bool]]:
    with psycopg.connect(url) as c:
        rows = c.execute(
            "SELECT sequencename::text, last_value IS NOT NULL FROM pg_sequences"
            " WHERE schemaname = %s",
            (schema,),
        ).fetchall()
    return {(name, used) for name, used in rows}


def test_the_next_deployment_gets_the_schema_and_prefix_emptied(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> None:
    first = _deploy(tmp_path / "a", postgres_url, redis_url)
    first.submit("research", RESEARCH, tenant="acme", run_id="r1")
    assert first.drive("r1") == "Completed"
    tag = first.tag
    assert any(used for _, used in _sequences(postgres_url, tag))
    client = redis.Redis.from_url(redis_url)
    try:
        assert [k for k in client.scan_iter(match=f"rr:{tag}:*") if not k.endswith(b"alive")]
        first.close()
        second = _deploy(tmp_path / "b", postgres_url, redis_url)
        try:
            assert second.tag == tag, "the closed deployment's schema was not reused"
            assert second.runtime.store.list_runs() == []
            assert not any(used for _, used in _sequences(postgres_url, tag))
            assert [k for k in client.scan_iter(match=f"rr:{tag}:*")] == [
                f"rr:{tag}:alive".encode()
            ]
            # the same run id again: nothing of the first deployment's is left
            second.submit("research", RESEARCH, tenant="acme", run_id="r1")
            assert second.drive("r1") == "Completed"
        finally:
            second.close()
    finally:
        client.close()


def test_a_former_worker_s_session_is_ended_before_the_schema_is_handed_on(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> None:
    d = _deploy(tmp_path / "a", postgres_url, redis_url)
    lingering = psycopg.connect(
        postgres_url, autocommit=True, application_name=d.worker_connection_name
    )
    try:
        lingering.execute(f'SET search_path TO "{d.tag}"')
        d.close()
        with pytest.raises(psycopg.OperationalError):
            lingering.execute("SELECT count(*) FROM runs")
    finally:
        lingering.close()


KEEP_ONE = textwrap.dedent(
    """
    import sys
    from harness.adapters.reference._deployment import Deployment
    d = Deployment(sys.argv[3], backend="postgres", queue="redis",
                   postgres_url=sys.argv[1], redis_url=sys.argv[2])
    d.submit("research", {"topic": "tides", "sources": 2, "requester": "u-1"},
             tenant="acme", run_id="r1")
    d.close()  # kept, emptied, in the pool
    print(d.tag, flush=True)
    """
)


def test_what_the_pool_kept_is_dropped_when_the_process_exits(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> None:
    got = subprocess.run(
        [sys.executable, "-c", KEEP_ONE, postgres_url, redis_url, str(tmp_path / "d")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert got.returncode == 0, got.stderr[-3000:]
    tag = got.stdout.strip()
    with psycopg.connect(postgres_url) as c:
        assert c.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (tag,)).fetchone() is None
        rows = c.execute(f"SELECT 1 FROM {_janitor.REGISTRY} WHERE name = %s", (tag,)).fetchall()
    assert rows == []
    client = redis.Redis.from_url(redis_url)
    try:
        assert list(client.scan_iter(match=f"rr:{tag}:*")) == []
    finally:
        client.close()


def _backend_pid(conn: psycopg.Connection) -> int:  # type: ignore[type-arg]
    return int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]


def test_the_next_deployment_keeps_the_harness_s_own_sessions(
    tmp_path: Path, postgres_url: str, redis_url: str
) -> None:
    # The harness's own store and observer connection go with the schema to
    # its next user (no new session, no setup check); released with it.
    first = _deploy(tmp_path / "a", postgres_url, redis_url)
    first.submit("research", RESEARCH, tenant="acme", run_id="r1")
    cursor = first.change_cursor()
    store, observer = first.runtime.store, first._observer
    observer_pid = _backend_pid(observer)
    first.close()
    second = _deploy(tmp_path / "b", postgres_url, redis_url)
    try:
        assert second.tag == first.tag
        assert second.runtime.store is store and second._observer is observer
        assert _backend_pid(second._observer) == observer_pid
        assert store.list_runs() == [] and second.change_cursor() != cursor
        second.submit("research", RESEARCH, tenant="acme", run_id="r1")
        assert second.drive("r1") == "Completed"
        assert second.change_cursor() != cursor
    finally:
        second.close()
    assert second._pool_kind is not None
    tag, leases = _janitor.take_pooled(second._pool_kind) or ("", ())
    assert tag == first.tag
    lease = next(x for x in leases if isinstance(x, _janitor.SchemaLease))
    assert set(lease.kept) == {"store", "observer"}
    for x in leases:
        x.release()
    assert observer.closed and lease.kept == {}
    with pytest.raises(RuntimeError, match="closed"):
        store.list_runs()
