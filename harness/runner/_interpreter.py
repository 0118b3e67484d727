"""Executing a scenario against an environment and recording its history.

The interpreter is the single place that owns ordering: it performs one step
at a time, and after each step pulls what happened -- effects from the world,
transitions and contexts from the runtime -- into the history. Workers run
one at a time to idle unless a step pauses one (a crash point used as a
barrier); nothing depends on thread timing, so the same scenario gives the
same history.

Client steps (submit, run a worker, quiesce) are the runner's own; every
fault step goes to its handler in :mod:`harness.nemesis` (the step table,
``STEPS``, is in ``_steps``).
The history and coverage are written by the recorder (``_recorder``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .. import nemesis
from .._signals import check_interrupted, shielded
from ..adapters import Adapter
from ..model import Scenario
from ..nemesis import WORKER_TIMEOUT, ScenarioError
from ._recorder import Coverage, HistoryRecorder
from ._steps import STEPS, RunContext


@dataclass
class RunResult:
    """Where a run's history was written, its fault coverage, how long it took."""

    history_path: Path
    coverage: Coverage
    seconds: float


class Interpreter:
    """Runs one scenario in one fresh environment."""

    def __init__(
        self,
        adapter: Adapter,
        scenario: Scenario,
        workdir: Path,
        *,
        history_name: str = "history.jsonl",
        worker_timeout: float = WORKER_TIMEOUT,
    ) -> None:
        self.worker_timeout = worker_timeout
        self.adapter = adapter
        self.scenario = scenario
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.history_path = workdir / history_name
        self.recorder = HistoryRecorder(self.history_path)
        self.coverage = self.recorder.coverage

    def run(self) -> RunResult:
        # Only the workers a network fault acts on go through proxies.
        with nemesis.routing_for(self.scenario.steps):
            return self._run()

    def _run(self) -> RunResult:
        started = time.monotonic()
        rec = self.recorder
        try:
            with shielded():  # an interruption never leaves a half-made deployment
                env = self.adapter.open(self.workdir / "env", seed=self.scenario.seed)
        except BaseException:
            rec.close()  # no deployment: the history ends here
            raise
        rec.env = env
        ctx = RunContext(
            self.adapter,
            env,
            rec,
            {r.run_id: r for r in self.scenario.runs},
            worker_timeout=self.worker_timeout,
        )
        try:
            rec.declaration(self.adapter)
            for step in self.scenario.steps:
                check_interrupted()
                handler = STEPS.get(type(step))
                if handler is None:  # pragma: no cover - the Step union is closed
                    raise ScenarioError(f"unknown step {step!r}")
                handler(ctx, step)
                rec.sync()
            nemesis.name_outage_runs(ctx)
            rec.finish(self.adapter.capabilities)
        finally:
            with shielded():  # workers killed, deployment closed, even if interrupted
                try:
                    for handle in ctx.paused.values():
                        handle.kill()
                    env.close()
                finally:  # the history is closed even when the adapter's close() raises
                    rec.env = None
                    rec.close()
        return RunResult(self.history_path, self.coverage, time.monotonic() - started)


def run_scenario(
    adapter: Adapter,
    scenario: Scenario,
    workdir: Path,
    *,
    history_name: str = "history.jsonl",
    worker_timeout: float = WORKER_TIMEOUT,
) -> RunResult:
    """Execute ``scenario`` in a fresh environment under ``workdir``; a worker
    still running after ``worker_timeout`` seconds is an adapter error.

    Raises :class:`ScenarioError`, before anything runs, if a step needs a
    capability ``adapter`` does not declare (:func:`harness.nemesis.validate`).
    """
    nemesis.validate(scenario, adapter)
    return Interpreter(
        adapter, scenario, workdir, history_name=history_name, worker_timeout=worker_timeout
    ).run()
