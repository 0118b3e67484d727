"""A complete, minimal adapter: a toy runtime that charges a customer once.

The runtime keeps each run as a JSON file; a worker charges every pending
run through the harness's world and marks it completed. ``keyed=false``
drops the idempotency key, and the harness finds the double charge. The
adapter is written on the kit (``harness.adapters.kit``): workers, the
transitions log and the transition table come from there.

    PYTHONPATH=. harness run --adapter examples.minimal_adapter.adapter:ToyAdapter
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
from harness.adapters.kit import EPOCH, RunRegistry, WorkerSet, transitions_from_sequence
from harness.model import CrashSpec, RunSpec, RunState
from harness.world import Caller, World, WorldClient

NOW = EPOCH  # no clock: a constant time keeps histories reproducible
TABLE = transitions_from_sequence(["pending", "completed"])  # no state machine of its own


# -- the runtime under test (yours would live in its own package) -------------


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)  # atomic: a kill leaves the old file or the new one


def worker_main(args: dict[str, Any]) -> int:
    """A worker process: charge every pending run, then exit 0."""
    world = WorldClient(args["world"], clock=lambda: NOW)
    for path in sorted(Path(args["runs"]).glob("*.json")):
        run = json.loads(path.read_text())
        if run["status"] != "pending":
            continue
        run_id, worker_id = run["run_id"], args["worker_id"]
        key = f"{run_id}:charge" if args["keyed"] else None
        caller = Caller(tenant=run["tenant"], run_id=run_id, op_id="charge", worker_id=worker_id)
        ref = world.call("payments", "charge", run["input"], idempotency_key=key, caller=caller)
        _write(path, {**run, "status": "completed", "output": {"ref": ref.external_ref}})
    return 0


# -- the adapter -----------------------------------------------------------------


class ToyEnvironment(BaseEnvironment):
    """One isolated deployment: a folder of runs, a world, its workers."""

    def __init__(self, workdir: Path, keyed: bool) -> None:
        self.runs = workdir / "runs"
        self.runs.mkdir(parents=True)
        self.world = World(workdir / "world.db", clock=lambda: NOW).create()
        self.args = {"runs": str(self.runs), "world": self.world.path, "keyed": keyed}
        self.workers = WorkerSet(workdir, [__name__])  # output in workdir/workers.log
        self.registry = RunRegistry(workdir / "registry.db", clock=lambda: NOW)

    def declarations(self) -> Declarations:
        return Declarations(delivery={"payments.charge": "exactly_once"}, transitions=TABLE)

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        args = {**self.args, "worker_id": worker_id}
        return self.workers.spawn(worker_id, f"{__name__}:worker_main", args)

    def submit(self, run: RunSpec) -> None:
        record = {"run_id": run.run_id, "tenant": run.tenant, "input": run.input}
        _write(self.runs / f"{run.run_id}.json", {**record, "status": "pending"})

    def observe(self) -> Observation:
        views = []
        for path in sorted(self.runs.glob("*.json")):
            run = json.loads(path.read_text())
            state = RunState.COMPLETED if run["status"] == "completed" else RunState.PENDING
            fields = {"run_id": run["run_id"], "tenant": run["tenant"], "output": run.get("output")}
            views.append(RunView(**fields, state=state, raw_status=run["status"]))
        # Transitions derived from the statuses seen, each handed out once.
        return self.registry.observation(views)

    def now(self) -> float:
        return NOW

    def close(self) -> None:
        self.workers.close()  # no worker outlives its environment
        self.registry.close()
        self.world.close()


class ToyAdapter:
    """The toy runtime. Option ``keyed`` (default true): send an idempotency key."""

    name = "toy"
    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, keyed: str = "true") -> None:
        self.keyed = keyed.lower() == "true"

    def workflows(self) -> list[WorkflowSpec]:
        charge = {"customer_id": "c-1", "amount_cents": 500}
        return [WorkflowSpec(name="charge", inputs=(charge,), effects=("payments.charge",))]

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return ToyEnvironment(workdir, self.keyed)

    def describe(self) -> dict[str, Any]:
        return {"keyed": self.keyed}
