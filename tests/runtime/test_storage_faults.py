"""Storage connection faults: a lost session never commits half a checkpoint,
and never crash-loops a worker.

The server ends a worker's sessions -- Postgres ``pg_terminate_backend``, Redis
``CLIENT KILL`` -- found by the name the deployment gives its workers'
connections. Cut inside a checkpoint transaction, the transaction dies with
the session: nothing of it may be committed. Cut between steps, the worker's
pooled connections die while idle: the next use must notice. Either way the
worker exits 0 and the run ends as it would have without the fault.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from harness import Engine, Example, Settings
from harness.adapters.reference import ReferenceAdapter
from harness.adapters.reference._deployment import Deployment
from harness.history import History
from harness.model import (
    Approve,
    ContinueWorker,
    CrashSpec,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    StorageFault,
    Submit,
)
from harness.runner import run_scenario
from reference_runtime import (
    ConfigError,
    Runtime,
    RuntimeConfig,
    StorageUnavailable,
    crashpoints,
)
from reference_runtime.store.postgres import PostgresStore
from reference_runtime.store.redis_queue import RedisLeases

Factory = Callable[..., Deployment]

#: Spawns a child run and waits for it, then charges: ten checkpoints, one
#: with a child run, one with a message to the parent, one with an operation.
PROCUREMENT = {"item": "bolts", "quantity": 3}
PG = pytest.mark.postgres
RD = pytest.mark.redis


def durable(d: Deployment) -> list[tuple[Any, ...]]:
    """Everything checkpoints write, leases left out (releasing one is not state)."""
    store = d.runtime.store
    out: list[tuple[Any, ...]] = []
    for run in store.list_runs():
        snap = store.load(run.run_id)
        out.append(
            (
                run.run_id,
                run.status.value,
                run.state_version,
                run.current_step,
                snap.state.payload,
                tuple((o.op_id, o.status.value) for o in snap.operations),
                tuple(m.message_id for m in snap.pending_inbox),
            )
        )
    out.extend((e.run_id, e.state_version, e.action) for e in store.audit())
    return out


def assert_whole_checkpoints(d: Deployment) -> None:
    """Every checkpoint wrote its run row and its audit event together: per run,
    the audited state versions are 0..current, each exactly once. A half
    commit shows as a gap (row without audit) or a repeat (audit without row)."""
    store = d.runtime.store
    for run in store.list_runs():
        versions = sorted(
            e.state_version
            for e in store.audit()
            if e.run_id == run.run_id and e.state_version is not None
        )
        assert versions == list(range(run.state_version + 1)), (run.run_id, versions)


def effects(d: Deployment) -> Counter[str]:
    return Counter(f"{e.service}.{e.action}" for e in d.world.effects())


def fault_free_output(make: Factory, variant: str) -> Any:
    d = make(variant)
    d.submit("procurement", PROCUREMENT, tenant="acme", run_id="r1")
    assert d.run_worker("ff").code == 0
    snap = d.snapshot("r1")
    assert snap.run.status.value == "Completed"
    assert effects(d) == Counter({"payments.charge": 1})
    return snap.state.payload.get("_output")


def sessions(d: Deployment) -> list[str]:
    """States of the deployment's worker sessions in Postgres."""
    with psycopg.connect(d.config.store_url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT state FROM pg_stat_activity WHERE application_name = %s",
            (d.worker_connection_name,),
        ).fetchall()
    return [r[0] for r in rows]


# -- one process, the cut placed at every statement of a checkpoint ------------

#: (which commit of the worker, before which statement): the last statement of
#: every commit, and every statement of the commit that records an intent.
CUTS = [(k, 8) for k in range(1, 11)] + [(8, n) for n in range(1, 8)]


@PG
@pytest.mark.parametrize(("commit", "stmt"), CUTS, ids=[f"commit{k}-stmt{n}" for k, n in CUTS])
def test_a_session_terminated_inside_a_checkpoint_commits_none_of_it_and_the_worker_goes_on(
    make_deployment: Factory, monkeypatch: pytest.MonkeyPatch, commit: int, stmt: int
) -> None:
    expected = fault_free_output(make_deployment, "postgres")
    d = make_deployment("postgres")
    d.submit("procurement", PROCUREMENT, tenant="acme", run_id="r1")
    runtime = Runtime(d.config.with_(connection_name=d.worker_connection_name), clock=d.clock)
    worker = runtime.worker("w-cut")
    seen: dict[str, Any] = {"commits": 0}
    real_hit = crashpoints.hit

    def hit(site: str) -> None:
        # Statement ``stmt`` of commit ``commit``: everything before it is
        # written inside the open transaction. Cut the session right there.
        seen["commits"] += site == "checkpoint_stmt_1"
        if "cut" not in seen and seen["commits"] == commit and site == f"checkpoint_stmt_{stmt}":
            seen["before"] = durable(d)
            assert "idle in transaction" in sessions(d)
            seen["cut"] = d.cut_worker_connections("pg_terminate")
        real_hit(site)

    monkeypatch.setattr(crashpoints, "hit", hit)
    try:
        while "cut" not in seen:
            claimed = worker.claim()
            assert claimed is not None, f"the cut never happened: {seen['commits']} commits"
            advanced = worker.executor.advance(claimed)
        # The executor dropped the run, as when it loses the lease: None.
        assert advanced is None
        assert seen["cut"] >= 1
        assert durable(d) == seen["before"], "a checkpoint was committed across the cut"
        # Same worker, same process: the pool replaced the dead sessions.
        worker.run_until_idle()
    finally:
        worker.close()
        runtime.close()
    snap = d.snapshot("r1")
    assert snap.run.status.value == "Completed"
    assert snap.state.payload.get("_output") == expected
    assert effects(d) == Counter({"payments.charge": 1})
    assert_whole_checkpoints(d)


# -- real worker processes, paused by crash points, cut by the adapter's means --

CASES = [
    pytest.param("postgres", "pg_terminate", "checkpoint_stmt_3=pause@2", marks=PG),
    pytest.param("postgres", "pg_terminate", "checkpoint_stmt_8=pause@8", marks=PG),
    pytest.param("postgres", "pg_terminate", "after_intent_commit=pause", marks=PG),
    pytest.param("postgres", "pg_terminate", "after_external_call=pause", marks=PG),
    pytest.param("postgres+redis", "pg_terminate", "checkpoint_stmt_5=pause@8", marks=[PG, RD]),
    pytest.param(
        "postgres+redis", "redis_client_kill", "checkpoint_stmt_3=pause@2", marks=[PG, RD]
    ),
    pytest.param(
        "postgres+redis", "redis_client_kill", "after_lease_acquire=pause", marks=[PG, RD]
    ),
    pytest.param("sqlite+redis", "redis_client_kill", "after_intent_commit=pause", marks=RD),
]


@pytest.mark.parametrize(("variant", "kind", "pause"), CASES)
def test_a_worker_whose_connection_is_cut_while_paused_exits_0_and_the_run_ends_as_without_it(
    make_deployment: Factory, variant: str, kind: str, pause: str
) -> None:
    expected = fault_free_output(make_deployment, variant)
    d = make_deployment(variant)
    d.submit("procurement", PROCUREMENT, tenant="acme", run_id="r1")
    proc = d.start_worker("s1", crash=pause)
    try:
        _, status = os.waitpid(proc.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), f"worker did not stop at {pause}: status {status}"
        before = durable(d)
        assert d.cut_worker_connections(kind) >= 1
        if kind == "pg_terminate":
            assert sessions(d) == []  # gone, and its transaction with it
        assert durable(d) == before
        os.kill(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode(errors="replace")
    assert_whole_checkpoints(d)
    assert d.run_worker("later").code == 0
    snap = d.snapshot("r1")
    assert snap.run.status.value == "Completed"
    assert snap.state.payload.get("_output") == expected
    assert effects(d) == Counter({"payments.charge": 1})
    assert_whole_checkpoints(d)


@pytest.mark.parametrize(
    ("variant", "kinds"),
    [
        ("sqlite", ()),
        pytest.param("postgres", ("pg_terminate",), marks=PG),
        pytest.param("sqlite+redis", ("redis_client_kill",), marks=RD),
        pytest.param("postgres+redis", ("pg_terminate", "redis_client_kill"), marks=[PG, RD]),
    ],
)
def test_a_deployment_offers_the_storage_faults_of_the_servers_it_uses(
    make_deployment: Factory, variant: str, kinds: tuple[str, ...]
) -> None:
    d = make_deployment(variant)
    assert d.storage_kinds() == kinds
    # Nobody to cut: no worker is running.
    assert d.cut_worker_connections("pg_terminate") == 0
    assert d.cut_worker_connections("redis_client_kill") == 0
    with pytest.raises(ValueError, match="unknown storage fault"):
        d.cut_worker_connections("disk_full")


# -- the store and the lease client on their own ---------------------------------


@PG
def test_store_sessions_carry_the_application_name_given_or_the_one_in_the_url(
    postgres_url: str,
) -> None:
    sep = "&" if "?" in postgres_url else "?"
    for url, name, expected in [
        (postgres_url, "rr-test-param", "rr-test-param"),
        (f"{postgres_url}{sep}application_name=rr-test-url", None, "rr-test-url"),
        (f"{postgres_url}{sep}application_name=rr-test-url", "rr-test-wins", "rr-test-wins"),
    ]:
        store = PostgresStore(url, application_name=name)
        try:
            with store._read() as tx:
                row = tx.one("SELECT current_setting('application_name')")
            assert row is not None and row[0] == expected
        finally:
            store.close()


@PG
def test_a_store_opens_one_session_to_start(
    postgres_store: PostgresStore, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its reachability check is its pool's first connection, not one more
    # session for the server to start and end (real connections, counted).
    opened: list[object] = []
    real = psycopg.Connection.connect

    def counted(*args: Any, **kwargs: Any) -> Any:
        opened.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(psycopg, "connect", counted)
    monkeypatch.setattr(psycopg.Connection, "connect", staticmethod(counted))
    store = PostgresStore(postgres_url, schema=postgres_store.schema)
    try:
        assert store.list_runs() == []
        assert len(opened) == 1
    finally:
        store.close()


@PG
def test_a_terminated_session_raises_storage_unavailable_and_the_next_transaction_works(
    postgres_store: PostgresStore, postgres_url: str
) -> None:
    store = PostgresStore(postgres_url, schema=postgres_store.schema, application_name="rr-cut-me")
    try:
        lost = pytest.raises(StorageUnavailable, match="lost the connection to PostgreSQL")
        with lost, store._write() as tx:
            tx.run("SELECT 1")
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
                    " WHERE application_name = 'rr-cut-me'"
                )
            tx.run("SELECT 2")
        assert store.list_runs() == []  # a fresh session
    finally:
        store.close()


@PG
def test_an_error_on_a_live_session_is_not_mistaken_for_a_lost_connection(
    postgres_store: PostgresStore,
) -> None:
    with pytest.raises(psycopg.errors.QueryCanceled), postgres_store._write() as tx:
        tx.run("SET LOCAL statement_timeout = 10")
        tx.run("SELECT pg_sleep(1)")
    assert postgres_store.list_runs() == []


def test_a_redis_lease_server_out_of_reach_raises_storage_unavailable() -> None:
    # Port 1: nothing listens there, the connection is refused at once.
    leases = RedisLeases("redis://127.0.0.1:1/0", "rr:test:", client_name="rr-test")
    try:
        with pytest.raises(StorageUnavailable, match="lost the connection to Redis"):
            leases.acquire("r1", "w1", now=0.0, ttl=10.0)
        with pytest.raises(StorageUnavailable):
            leases.release("r1", "w1", 1)
    finally:
        leases.close()


def test_a_connection_name_must_be_usable_by_postgres_and_redis() -> None:
    cfg = RuntimeConfig(store_url="sqlite:///x.db", connection_name="rr-worker-rr_0a1b")
    assert RuntimeConfig.from_env(cfg.to_env()).connection_name == "rr-worker-rr_0a1b"
    for bad in ("has space", "", "x" * 64):
        with pytest.raises(ConfigError, match="connection_name"):
            RuntimeConfig(store_url="sqlite:///x.db", connection_name=bad)


@PG
@RD
def test_the_network_timeout_reaches_every_connection_of_a_worker(make_deployment: Factory) -> None:
    """A lost acknowledgement costs one network timeout: the harness's
    deployments set theirs (2 s) and each Postgres session (both ends) and
    Redis client a worker opens must carry it, not the 5 s default."""
    d = make_deployment("postgres+redis", network_timeout=1.5)
    cfg = RuntimeConfig.from_env(d.config.to_env())  # as a worker reads it
    assert cfg.network_timeout == 1.5
    rt = Runtime(cfg)
    try:
        store = rt.store
        assert isinstance(store, PostgresStore)
        with store._read() as tx:
            (server,) = tx.one("SHOW tcp_user_timeout")
            client = tx._cur.connection.info.get_parameters()
        assert server in ("1500", "1500ms")  # the unit depends on the server version
        assert client.get("tcp_user_timeout") == "1500"
        leases = RedisLeases(
            cfg.redis_url or "", "rr:test:", network_timeout=cfg.network_timeout or 0
        )
        try:
            kwargs = leases.client.connection_pool.connection_kwargs
            assert kwargs["socket_timeout"] == 1.5
        finally:
            leases.close()
    finally:
        rt.close()
    assert RuntimeConfig.from_env(make_deployment().config.to_env()).network_timeout is None
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="network_timeout must be a positive number"):
            RuntimeConfig(store_url="sqlite:///x.db", network_timeout=bad)


# -- through the harness: the interpreter, the oracle and every checker ------------


def _engine_example(adapter: ReferenceAdapter, scenario: Scenario, tmp_path: Path) -> Example:

    engine = Engine(adapter, Settings(), workdir=tmp_path / "engine")
    return engine.execute(scenario)


@PG
@RD
def test_storage_faults_through_the_harness_fire_and_every_property_passes(
    postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    adapter = ReferenceAdapter("postgres", "redis", postgres_url=postgres_url, redis_url=redis_url)
    scenario = Scenario(
        name="storage-by-hand",
        steps=(
            Submit(
                run=RunSpec(run_id="r1", tenant="acme", workflow="procurement", input=PROCUREMENT)
            ),
            Submit(
                run=RunSpec(
                    run_id="r2",
                    tenant="globex",
                    workflow="refund",
                    input={"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
                )
            ),
            # Inside a checkpoint transaction: both servers cut.
            RunWorker(
                worker_id="s0", crash=CrashSpec(site="checkpoint_stmt_3", nth=2, action="pause")
            ),
            StorageFault(kind="pg_terminate"),
            StorageFault(kind="redis_client_kill"),
            ContinueWorker(worker_id="s0"),
            Approve(run_id="r2"),
            # Between steps: the pooled sessions die while the worker is idle.
            RunWorker(
                worker_id="s1", crash=CrashSpec(site="after_intent_commit", nth=1, action="pause")
            ),
            StorageFault(kind="pg_terminate"),
            ContinueWorker(worker_id="s1"),
            Quiesce(),
        ),
    )
    example = _engine_example(adapter, scenario, tmp_path)
    verdicts = {r.name: r.verdict.value for r in example.results}
    assert set(verdicts.values()) == {"pass"}, [
        (r.name, r.verdict.value, r.message) for r in example.results
    ]
    assert example.coverage.fired.get("storage", 0) == 3, example.coverage
    assert example.coverage.fired.get("crash_point", 0) == 2, example.coverage


@RD
def test_a_storage_fault_the_deployment_cannot_take_is_recorded_armed_and_not_fired(
    redis_url: str, tmp_path: Path
) -> None:
    adapter = ReferenceAdapter("sqlite", "redis", redis_url=redis_url)
    scenario = Scenario(
        steps=(
            Submit(
                run=RunSpec(run_id="r1", tenant="acme", workflow="procurement", input=PROCUREMENT)
            ),
            StorageFault(kind="pg_terminate"),  # SQLite: no session to end
            Quiesce(),
        )
    )
    result = run_scenario(adapter, scenario, tmp_path / "run")
    assert result.coverage.armed["storage"] == 1
    assert "storage" not in result.coverage.fired
    (fault,) = History.load(result.history_path).faults("storage")
    assert fault.value["fired"] is False and fault.value["offered"] is False
