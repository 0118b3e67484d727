"""A toy runtime without crash points whose new release reorders its steps.

A run is a JSON file with a step counter; a worker performs the steps of its
code version's order from that counter on, then marks the run completed.
Release 1 charges, then notifies; the current release notifies, then
charges. ``keyed="step"`` (the bug) keys each call by its step number, so a
run release 1 left after its charge is resumed by the current release at
step 0 (notify), then step 1 (charge again, under a new key): a double
charge seen only when old code stops mid-run and new code resumes it.
``keyed="action"`` keys each call by what it does, and the world absorbs
the repeat. Imported by the harness's fork server (this folder is on
``sys.path`` under pytest, and the fork server inherits it).
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

NOW = EPOCH
TABLE = transitions_from_sequence(["pending", "completed"])
#: the steps' order per code version (None: the current release)
ORDERS: dict[int | None, tuple[str, ...]] = {
    1: ("payments.charge", "email.send"),
    None: ("email.send", "payments.charge"),
}


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def worker_main(args: dict[str, Any]) -> int:
    world = WorldClient(args["world"], clock=lambda: NOW)
    order = ORDERS[args["code_version"]]
    for path in sorted(Path(args["runs"]).glob("*.json")):
        run = json.loads(path.read_text())
        if run["status"] != "pending":
            continue
        run_id = run["run_id"]
        while run["step"] < len(order):
            effect = order[run["step"]]
            service, _, action = effect.partition(".")
            key = f"{run_id}:{run['step'] if args['keyed'] == 'step' else effect}"
            caller = Caller(tenant=run["tenant"], run_id=run_id, op_id=effect)
            world.call(service, action, run["input"], idempotency_key=key, caller=caller)
            if args["keyed"] == "twice" and effect == "payments.charge":  # always a bug
                world.call(service, action, run["input"], idempotency_key=f"{key}+", caller=caller)
            run = {**run, "step": run["step"] + 1}
            _write(path, run)
        _write(path, {**run, "status": "completed", "output": {"steps": run["step"]}})
    return 0


class UpgradeEnvironment(BaseEnvironment):
    def __init__(self, workdir: Path, keyed: str) -> None:
        self.runs = workdir / "runs"
        self.runs.mkdir(parents=True)
        self.world = World(workdir / "world.db", clock=lambda: NOW).create()
        self.args = {"runs": str(self.runs), "world": self.world.path, "keyed": keyed}
        self.workers = WorkerSet(workdir, [__name__])
        self.registry = RunRegistry(workdir / "registry.db", clock=lambda: NOW)

    def declarations(self) -> Declarations:
        return Declarations(
            delivery={"payments.charge": "exactly_once", "email.send": "exactly_once"},
            transitions=TABLE,
        )

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        args = {**self.args, "worker_id": worker_id, "code_version": code_version}
        return self.workers.spawn(worker_id, f"{__name__}:worker_main", args)

    def submit(self, run: RunSpec) -> None:
        record = {"run_id": run.run_id, "tenant": run.tenant, "input": run.input}
        _write(self.runs / f"{run.run_id}.json", {**record, "status": "pending", "step": 0})

    def observe(self) -> Observation:
        views = []
        for path in sorted(self.runs.glob("*.json")):
            run = json.loads(path.read_text())
            state = RunState.COMPLETED if run["status"] == "completed" else RunState.PENDING
            fields = {"run_id": run["run_id"], "tenant": run["tenant"], "output": run.get("output")}
            views.append(RunView(**fields, state=state, raw_status=run["status"]))
        return self.registry.observation(views)

    def now(self) -> float:
        return NOW

    def close(self) -> None:
        self.workers.close()
        self.registry.close()
        self.world.close()


class UpgradeToy:
    """Option ``keyed``: ``step`` (the bug), ``action`` (correct) or
    ``twice`` (every run charges twice: every scenario fails)."""

    name = "upgrade-toy"
    capabilities: frozenset[Capability] = frozenset({Capability.VERSION_SWITCH})

    def __init__(self, keyed: str = "step", scenario_seconds: str = "") -> None:
        self.keyed = keyed
        if scenario_seconds:
            self.scenario_seconds = float(scenario_seconds)

    def workflows(self) -> list[WorkflowSpec]:
        order = {"customer_id": "c-1", "amount_cents": 500}
        return [
            WorkflowSpec(name="order", inputs=(order,), effects=("payments.charge", "email.send"))
        ]

    def open(self, workdir: Path, *, seed: int) -> UpgradeEnvironment:
        return UpgradeEnvironment(workdir, self.keyed)

    def describe(self) -> dict[str, Any]:
        return {"keyed": self.keyed}
