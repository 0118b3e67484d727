"""A refund desk: a toy runtime whose seeded mistake only a user's invariant catches.

Each run is a refund request for an order (``order``, its ``total_cents``,
the ``amount_cents`` asked for). A worker takes the pending requests in
order and refunds each through the world's ``payments.refund``, keyed, so a
worker killed after the call and a retry refund once. The desk must refuse
a request that would take an order's refunds past its total: it adds up
what the order was already refunded.

The seeded mistake (``--adapter-opt mistake=true``): the desk checks each
request against the order's total alone, not against what was already
refunded. Two refunds of 600 on an order of 1000 both go through. Every
built-in property holds -- each refund happens exactly once, the faulted
runs end as the fault-free ones (which make the same mistake), transitions
are legal -- so only the invariant in ``test_refund_desk.py`` ("the refunds
of an order never exceed its total") sees it.

    PYTHONPATH=. harness run --adapter examples.invariants.refund_desk:RefundDesk \\
        --adapter-opt mistake=true \\
        --property examples.invariants.test_refund_desk:refunds_never_exceed_the_order_total
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness.adapters import (
    BaseEnvironment,
    Capability,
    Declarations,
    ForkServerWorker,
    Observation,
    RunView,
    WorkflowSpec,
)
from harness.adapters.kit import EPOCH, RunRegistry, WorkerSet
from harness.model import CrashSpec, RunSpec, RunState
from harness.world import Caller, World, WorldClient

NOW = EPOCH  # no clock: a constant time keeps histories reproducible
STATES = {"pending": RunState.PENDING, "refunded": RunState.COMPLETED, "refused": RunState.FAILED}
TABLE = {"pending": ["refunded", "refused"], "refunded": [], "refused": []}
#: the requests a workload draws from: any two of them on one order (of
#: one tenant) are more than its total, so the desk must refuse the second
REQUESTS = (
    {"order": "o-1", "total_cents": 1000, "amount_cents": 600},
    {"order": "o-1", "total_cents": 1000, "amount_cents": 700},
)


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)  # atomic: a kill leaves the old file or the new one


def worker_main(args: dict[str, Any]) -> int:
    """A worker process: decide every pending request in order, then exit 0."""
    world = WorldClient(args["world"], clock=lambda: NOW)
    paths = sorted(Path(args["runs"]).glob("*.json"))
    for path in paths:
        run = json.loads(path.read_text())
        if run["status"] != "pending":
            continue
        req, tenant = run["input"], run["tenant"]
        done = [json.loads(p.read_text()) for p in paths]
        refunded = sum(
            r["output"]["refunded_cents"]
            for r in done
            if r["status"] == "refunded"
            and r["tenant"] == tenant
            and r["input"]["order"] == req["order"]
        )
        # SEEDED MISTAKE: the request alone against the total, not what the
        # order was already refunded
        asked = req["amount_cents"] if args["mistake"] else refunded + req["amount_cents"]
        if asked > req["total_cents"]:
            _write(path, {**run, "status": "refused", "error": "more than the order's total"})
            continue
        caller = Caller(tenant=tenant, run_id=run["run_id"], op_id="refund", worker_id="w")
        ref = world.call(
            "payments",
            "refund",
            {"order": req["order"], "amount_cents": req["amount_cents"]},
            idempotency_key=f"{run['run_id']}:refund",
            caller=caller,
        )
        output = {"refunded_cents": req["amount_cents"], "ref": ref.external_ref}
        _write(path, {**run, "status": "refunded", "output": output})
    return 0


class DeskEnvironment(BaseEnvironment):
    """One deployment: a folder of requests, a world, its workers."""

    def __init__(self, workdir: Path, mistake: bool) -> None:
        self.runs = workdir / "runs"
        self.runs.mkdir(parents=True)
        self.world = World(workdir / "world.db", clock=lambda: NOW).create()
        self.args = {"runs": str(self.runs), "world": self.world.path, "mistake": mistake}
        self.workers = WorkerSet(workdir, [__name__])
        self.registry = RunRegistry(workdir / "registry.db", clock=lambda: NOW)

    def declarations(self) -> Declarations:
        return Declarations(delivery={"payments.refund": "exactly_once"}, transitions=TABLE)

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        return self.workers.spawn(worker_id, f"{__name__}:worker_main", self.args)

    def submit(self, run: RunSpec) -> None:
        record = {"run_id": run.run_id, "tenant": run.tenant, "input": run.input}
        _write(self.runs / f"{run.run_id}.json", {**record, "status": "pending"})

    def observe(self) -> Observation:
        views = []
        for path in sorted(self.runs.glob("*.json")):
            run = json.loads(path.read_text())
            views.append(
                RunView(
                    run_id=run["run_id"],
                    tenant=run["tenant"],
                    state=STATES[run["status"]],
                    raw_status=run["status"],
                    output=run.get("output"),
                    error=run.get("error"),
                )
            )
        return self.registry.observation(views)

    def now(self) -> float:
        return NOW

    def close(self) -> None:
        self.workers.close()
        self.registry.close()
        self.world.close()


class RefundDesk:
    """The refund desk. Option ``mistake`` (default false): the seeded mistake."""

    name = "refund_desk"
    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, mistake: str = "false") -> None:
        if mistake.lower() not in ("true", "false"):
            raise ValueError(f"mistake must be true or false; got {mistake!r}")
        self.mistake = mistake.lower() == "true"

    def workflows(self) -> list[WorkflowSpec]:
        return [WorkflowSpec(name="refund", inputs=REQUESTS, effects=("payments.refund",))]

    def open(self, workdir: Path, *, seed: int) -> DeskEnvironment:
        return DeskEnvironment(workdir, self.mistake)

    def describe(self) -> dict[str, Any]:
        return {"mistake": self.mistake}
