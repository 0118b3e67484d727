"""Adapters of issue 18: run-level hooks (``setup()`` starts what a whole
harness run shares; what it leaves must reach ``open()`` and the workers),
and a runtime that retries a run forever (``RunState.RETRYING``)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from examples.minimal_adapter.adapter import ToyAdapter, ToyEnvironment, worker_main
from harness.adapters import Declarations, ForkServerWorker, Observation, RunView, WorkflowSpec
from harness.adapters.kit import transitions_from_sequence
from harness.model import CrashSpec, RunState


def _log(event: str, **data: Any) -> None:
    """Append one event to the file ``LIFECYCLE_LOG`` names (one JSON a line)."""
    with open(os.environ["LIFECYCLE_LOG"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"event": event, "pid": os.getpid(), **data}) + "\n")


def seeing_worker(args: dict[str, Any]) -> int:
    """The toy worker, after saying what it sees of the run's setup."""
    _log("worker", arg=args["token"], env=os.environ.get("LIFECYCLE_TOKEN"))
    return worker_main(args)


class _SeeingEnvironment(ToyEnvironment):
    def __init__(self, workdir: Path, keyed: bool, token: str) -> None:
        super().__init__(workdir, keyed)
        self.token = token

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        args = {**self.args, "worker_id": worker_id, "token": self.token}
        # The fork server may be older than this test's environment: what a
        # worker needs goes with each spawn (the log's path too).
        env = {"LIFECYCLE_TOKEN": self.token, "LIFECYCLE_LOG": os.environ["LIFECYCLE_LOG"]}
        return self.workers.spawn(worker_id, f"{__name__}:seeing_worker", args, env=env)


class SetupAdapter(ToyAdapter):
    """A fresh token per run, made in ``setup()`` (a server's URL, say)."""

    token: str | None = None

    def setup(self) -> None:
        assert self.token is None, "setup() is called once"
        self.token = uuid.uuid4().hex
        _log("setup", token=self.token)

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        _log("open", token=self.token)
        if self.token is None:
            raise RuntimeError("open() before setup()")
        return _SeeingEnvironment(workdir, self.keyed, self.token)

    def close(self) -> None:
        _log("close", token=self.token)


class SetupRaises(ToyAdapter):
    """``setup()`` fails halfway; ``close()`` must still run."""

    def setup(self) -> None:
        _log("setup")
        raise ConnectionRefusedError("the runtime's server did not start on port 7233")

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        _log("open")
        return super().open(workdir, seed=seed)

    def close(self) -> None:
        _log("close")


# -- a run the runtime keeps failing --------------------------------------------------

NONDETERMINISM = "nondeterminism: the history has activity 'notify' where the code has 'refund'"


def failing_worker(args: dict[str, Any]) -> int:
    """A worker whose every attempt at a run fails the same way (a replay
    that no longer matches the run's history), and which never gives up."""
    for path in sorted(Path(args["runs"]).glob("*.json")):
        run = json.loads(path.read_text())
        if run["status"] in ("pending", "failing"):
            path.write_text(json.dumps({**run, "status": "failing", "error": NONDETERMINISM}))
    return 0


class _RetryingEnvironment(ToyEnvironment):
    def declarations(self) -> Declarations:
        return Declarations(transitions=transitions_from_sequence(["pending", "failing"]))

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        args = {**self.args, "worker_id": worker_id}
        return self.workers.spawn(worker_id, f"{__name__}:failing_worker", args)

    def observe(self) -> Observation:
        views = []
        for path in sorted(self.runs.glob("*.json")):
            run = json.loads(path.read_text())
            state = RunState.RETRYING if run["status"] == "failing" else RunState.PENDING
            views.append(
                RunView(
                    run_id=run["run_id"],
                    tenant=run["tenant"],
                    state=state,
                    raw_status=run["status"],
                    error=run.get("error"),
                )
            )
        return self.registry.observation(views)


class RetryingForever(ToyAdapter):
    """Every run ends ``retrying``: the runtime keeps failing it."""

    def workflows(self) -> list[WorkflowSpec]:
        return [WorkflowSpec(name="charge", inputs=({"customer_id": "c-1"},))]

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _RetryingEnvironment(workdir, self.keyed)


# -- a worker that never exits ----------------------------------------------------------


class _Stuck(ToyEnvironment):
    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        return self.workers.spawn(worker_id, "harness.procs._selftest:sleep_forever", {})


class StuckDeclaring(ToyAdapter):
    """Its workers never exit; it declares how long one may run (a runtime
    on real time would declare more than the default, this one less)."""

    worker_timeout = 3.0

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _Stuck(workdir, self.keyed)


class BadWorkerTimeout(ToyAdapter):
    worker_timeout = float("nan")
