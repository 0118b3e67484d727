"""A complete, minimal adapter: a toy runtime that charges a customer once.

The runtime keeps each run as a JSON file; a worker charges every pending
run through the harness's world and marks it completed. ``keyed=false``
drops the idempotency key, and the harness finds the double charge.

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
    shared_fork_server,
)
from harness.model import CrashSpec, RunSpec, RunState
from harness.world import Caller, World, WorldClient

NOW = 1_700_000_000.0  # no clock: a constant time keeps histories reproducible


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
        key = f"{run['run_id']}:charge" if args["keyed"] else None
        caller = Caller(
            tenant=run["tenant"], run_id=run["run_id"], op_id="charge", worker_id=args["worker_id"]
        )
        ref = world.call("payments", "charge", run["input"], idempotency_key=key, caller=caller)
        _write(path, {**run, "status": "completed", "output": {"ref": ref.external_ref}})
        with open(Path(args["runs"]) / "transitions.log", "a") as log:
            log.write(json.dumps([run["run_id"], run["tenant"], args["worker_id"]]) + "\n")
    return 0


# -- the adapter -----------------------------------------------------------------


class ToyEnvironment(BaseEnvironment):
    """One isolated deployment: a folder of runs and a world."""

    def __init__(self, workdir: Path, keyed: bool) -> None:
        self.runs = workdir / "runs"
        self.runs.mkdir(parents=True)
        self.workdir, self.keyed = workdir, keyed
        self.world = World(workdir / "world.db", clock=lambda: NOW).create()
        self.workers: list[ForkServerWorker] = []
        self.seen = 0

    def declarations(self) -> Declarations:
        return Declarations(
            delivery={"payments.charge": "exactly_once"},
            transitions={"pending": ["completed"], "completed": []},
        )

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        args = {
            "worker_id": worker_id,
            "runs": str(self.runs),
            "world": self.world.path,
            "keyed": self.keyed,
        }
        proc = shared_fork_server(["examples.minimal_adapter.adapter"]).spawn(
            "examples.minimal_adapter.adapter:worker_main",
            args=args,
            log=self.workdir / "workers.log",
        )
        self.workers.append(ForkServerWorker(worker_id, proc))
        return self.workers[-1]

    def submit(self, run: RunSpec) -> None:
        record = {"run_id": run.run_id, "tenant": run.tenant, "input": run.input}
        _write(self.runs / f"{run.run_id}.json", {**record, "status": "pending"})

    def observe(self) -> Observation:
        views, transitions = [], []
        for path in sorted(self.runs.glob("*.json")):
            run = json.loads(path.read_text())
            state = RunState.COMPLETED if run["status"] == "completed" else RunState.PENDING
            views.append(
                RunView(
                    run_id=run["run_id"],
                    tenant=run["tenant"],
                    state=state,
                    raw_status=run["status"],
                    output=run.get("output"),
                )
            )
        log = self.runs / "transitions.log"
        lines = log.read_text().splitlines() if log.exists() else []
        for line in lines[self.seen :]:
            run_id, tenant, worker = json.loads(line)
            transitions.append(
                {
                    "run_id": run_id,
                    "tenant": tenant,
                    "from": "pending",
                    "to": "completed",
                    "state_version": 2,
                    "actor": worker,
                    "action": "charge",
                    "detail": None,
                    "at": NOW,
                }
            )
        self.seen = len(lines)
        return Observation(runs=tuple(views), transitions=tuple(transitions))

    def now(self) -> float:
        return NOW

    def close(self) -> None:
        for w in self.workers:
            if w.proc.exit is None:  # no worker outlives its environment
                w.proc.kill()
                w.proc.wait(10.0)
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
