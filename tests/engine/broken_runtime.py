"""A deliberately broken durable runtime, and its adapter: the engine's test subject.

One workflow, ``pay``: charge the customer (``payments.charge``), then notify
them (``email.notify``). Runs live in one SQLite file; workers are real OS
processes forked from a :class:`harness.procs.ForkServer`, and every effect
goes through the world (:class:`harness.world.WorldClient`).

The bug: the charge is recorded only *after* the call, and its idempotency key
names the *worker* (its attempt), not the run. A retry inside one worker (after
a timeout) is deduplicated by the world, but a worker killed after the world
applied the charge leaves the run at "not charged yet", and the worker that
resumes it charges again under a key of its own. Without a key at all, a plain
timeout-and-retry would double-charge too; scoping the key to the worker keeps
the kill as the *only* way to the bug, so the minimal counterexample is
"kill after apply" and nothing else. With ``fixed=true`` the key is derived
from the run id, so the world deduplicates the resumed worker's charge: the
same file is the positive control.

It declares only what it has: no crash points, no clock, no approvals, no
memory, one worker at a time. The harness reaches it through the world's
``kill_after_apply``/``kill_before_apply`` rules (the ``world`` fault family).

Importable as ``broken_runtime`` when ``tests/engine`` is on ``sys.path`` (the
folder's conftest adds it; subprocesses get it through ``PYTHONPATH``), so
``harness run --adapter broken_runtime:BrokenAdapter`` works.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.adapters import BaseEnvironment, ForkServerWorker, shared_fork_server
from harness.adapters._contract import (
    Capability,
    Declarations,
    Observation,
    RunView,
    WorkflowSpec,
)
from harness.model import CrashSpec, RunSpec, RunState
from harness.world import Caller, Rejected, Unknown, World, WorldClient

#: The (virtual, constant) time of this runtime: it has no clock, and a fixed
#: value keeps its histories reproducible.
EPOCH = 1_700_000_000.0
#: Attempts per effect inside one worker (a timeout or a reject is retried).
ATTEMPTS = 3

TRANSITIONS: dict[str, list[str]] = {
    "Created": ["Charged", "Failed"],
    "Charged": ["Completed", "Failed"],
    "Completed": [],
    "Failed": [],
}
_STATES = {
    "Created": RunState.PENDING,
    "Charged": RunState.RUNNING,
    "Completed": RunState.COMPLETED,
    "Failed": RunState.FAILED,
}

PAY = WorkflowSpec(
    name="pay",
    inputs=(
        {"customer_id": "c-1", "amount_cents": 500},
        {"customer_id": "c-2", "amount_cents": 12_00},
    ),
    effects=("payments.charge", "email.notify"),
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, input TEXT NOT NULL,
    status TEXT NOT NULL, version INTEGER NOT NULL,
    charge_ref TEXT, output TEXT, error TEXT
);
CREATE TABLE IF NOT EXISTS transitions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, tenant TEXT NOT NULL,
    src TEXT, dst TEXT NOT NULL, version INTEGER NOT NULL, actor TEXT NOT NULL,
    action TEXT NOT NULL
);
"""


# -- the runtime: store and worker -------------------------------------------------


@contextlib.contextmanager
def _store(path: str) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        yield conn
    finally:
        conn.close()


def _move(conn: sqlite3.Connection, run_id: str, dst: str, actor: str, **cols: Any) -> None:
    """One checkpoint: the run's new status (and columns) plus its audit row."""
    conn.execute("BEGIN IMMEDIATE")
    tenant, src, version = conn.execute(
        "SELECT tenant, status, version FROM runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    sets = "".join(f", {k} = ?" for k in cols)
    conn.execute(
        f"UPDATE runs SET status = ?, version = ?{sets} WHERE run_id = ?",
        (dst, version + 1, *cols.values(), run_id),
    )
    conn.execute(
        "INSERT INTO transitions (run_id, tenant, src, dst, version, actor, action) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (run_id, tenant, src, dst, version + 1, actor, dst.lower()),
    )
    conn.execute("COMMIT")


def _call(
    world: WorldClient,
    kind: str,
    request: dict[str, Any],
    key: str | None,
    caller: Caller,
) -> str | None:
    """Call the world, retrying a timeout or a reject in this worker; the
    external ref, or None when every attempt failed."""
    service, _, action = kind.partition(".")
    for _ in range(ATTEMPTS):
        try:
            return world.call(
                service, action, request, idempotency_key=key, caller=caller
            ).external_ref
        except (Unknown, Rejected):
            continue
    return None


def worker_main(args: dict[str, Any]) -> int:
    """A worker: take each unfinished run in turn, work it to its end, exit 0."""
    worker_id, fixed = str(args["worker_id"]), bool(args["fixed"])
    world = WorldClient(args["world"], clock=lambda: EPOCH)
    with _store(args["store"]) as conn:
        pending = conn.execute(
            "SELECT run_id, tenant, input, status FROM runs "
            "WHERE status IN ('Created', 'Charged') ORDER BY run_id"
        ).fetchall()
        for run_id, tenant, raw_input, status in pending:
            payload = json.loads(raw_input)
            if status == "Created":
                caller = Caller(tenant=tenant, run_id=run_id, op_id="charge", worker_id=worker_id)
                # THE BUG: the key names this worker, so it dies with it.
                key = f"{run_id}:charge" if fixed else f"{worker_id}:{run_id}:charge"
                request = {"customer_id": payload["customer_id"], "amount": payload["amount_cents"]}
                ref = _call(world, "payments.charge", request, key, caller)
                if ref is None:
                    _move(conn, run_id, "Failed", worker_id, error="payments.charge kept failing")
                    continue
                # ...and the charge is recorded only now, after the call.
                _move(conn, run_id, "Charged", worker_id, charge_ref=ref)
            (charge_ref,) = conn.execute(
                "SELECT charge_ref FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            caller = Caller(tenant=tenant, run_id=run_id, op_id="notify", worker_id=worker_id)
            text = f"charged {payload['amount_cents']} cents"
            if (
                _call(
                    world,
                    "email.notify",
                    {"to": payload["customer_id"], "text": text},
                    None,
                    caller,
                )
                is None
            ):
                _move(conn, run_id, "Failed", worker_id, error="email.notify kept failing")
                continue
            output = {"charge_ref": charge_ref, "amount_cents": payload["amount_cents"]}
            _move(conn, run_id, "Completed", worker_id, output=json.dumps(output))
    world.close()
    return 0


# -- the adapter ---------------------------------------------------------------------


class BrokenEnvironment(BaseEnvironment):
    """One isolated deployment: a store file and a world under ``workdir``."""

    def __init__(self, adapter: BrokenAdapter, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.adapter = adapter
        self.workdir = workdir
        self.store_path = str(workdir / "runs.db")
        self.world = World(workdir / "world.db", clock=lambda: EPOCH).create()
        with _store(self.store_path) as conn:
            conn.executescript(_SCHEMA)
        self._workers: list[ForkServerWorker] = []
        self._seen = 0

    def declarations(self) -> Declarations:
        return Declarations(
            delivery={"payments.charge": "exactly_once", "email.notify": "at_least_once"},
            transitions={k: list(v) for k, v in TRANSITIONS.items()},
        )

    #: the module whose ``worker_main`` the workers run (the fork server
    #: preloads it); a runtime built on this one names its own
    worker_module = "broken_runtime"

    def worker_args(self) -> dict[str, Any]:
        """What a worker is told besides its id, store and world."""
        return {"fixed": self.adapter.fixed}

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        if crash is not None or code_version is not None:
            raise NotImplementedError(
                f"the {self.adapter.name} runtime has no crash points and one version"
            )
        args = {
            "worker_id": worker_id,
            **self.worker_args(),
            "store": self.store_path,
            "world": self.world.path,
        }
        server = shared_fork_server(["pydantic", "sqlite3", self.worker_module], spares=1)
        target = f"{self.worker_module}:worker_main"
        proc = server.spawn(target, args=args, log=self.workdir / "workers.log")
        handle = ForkServerWorker(worker_id, proc)
        self._workers.append(handle)
        return handle

    def submit(self, run: RunSpec) -> None:
        if run.workflow != PAY.name:
            raise ValueError(f"unknown workflow {run.workflow!r}; this runtime runs only 'pay'")
        with _store(self.store_path) as conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO runs (run_id, tenant, input, status, version) "
                "VALUES (?, ?, ?, 'Created', 1)",
                (run.run_id, run.tenant, json.dumps(run.input)),
            )
            conn.execute(
                "INSERT INTO transitions (run_id, tenant, src, dst, version, actor, action) "
                "VALUES (?, ?, NULL, 'Created', 1, 'api', 'submit')",
                (run.run_id, run.tenant),
            )
            conn.execute("COMMIT")

    def observe(self) -> Observation:
        with _store(self.store_path) as conn:
            rows = conn.execute(
                "SELECT run_id, tenant, status, output, error FROM runs ORDER BY run_id"
            ).fetchall()
            fresh = conn.execute(
                "SELECT run_id, tenant, src, dst, version, actor, action FROM transitions "
                "WHERE seq > ? ORDER BY seq",
                (self._seen,),
            ).fetchall()
            (self._seen,) = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM transitions").fetchone()
        runs = tuple(
            RunView(
                run_id=run_id,
                tenant=tenant,
                state=_STATES.get(status, RunState.UNKNOWN),
                raw_status=status,
                output=None if output is None else json.loads(output),
                error=error,
            )
            for run_id, tenant, status, output, error in rows
        )
        transitions = tuple(
            {
                "run_id": run_id,
                "tenant": tenant,
                "from": src,
                "to": dst,
                "state_version": version,
                "action": action,
                "actor": actor,
                "detail": None,
                "at": EPOCH,
            }
            for run_id, tenant, src, dst, version, actor, action in fresh
        )
        return Observation(runs=runs, transitions=transitions)

    def now(self) -> float:
        return EPOCH

    def close(self) -> None:
        for w in self._workers:
            if w.proc.exit is None:
                w.proc.kill()
                w.proc.wait(10.0)
        self.world.close()


class BrokenAdapter:
    """The broken runtime; ``fixed=true`` makes its charge idempotent per run."""

    name = "broken"
    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, fixed: str | bool = False) -> None:
        if isinstance(fixed, str):
            if fixed.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(f"fixed={fixed!r}: say true or false")
            fixed = fixed.lower() in ("true", "1", "yes")
        self.fixed = fixed

    def workflows(self) -> list[WorkflowSpec]:
        return [PAY]

    def open(self, workdir: Path, *, seed: int) -> BrokenEnvironment:
        return BrokenEnvironment(self, workdir)

    def describe(self) -> dict[str, Any]:
        return {"fixed": self.fixed}
