"""The runner's own steps, and the step context the nemesis works through.

:class:`RunContext` is one run in progress: the environment, the recorder,
the paused workers. It performs the client steps (submit, run a worker,
quiesce) and waits for workers; fault steps go to :mod:`harness.nemesis`,
which sees this object as a :class:`~harness.nemesis.StepContext`.
:data:`STEPS` says who performs each kind of step (the nemesis's handlers
register themselves: :data:`harness.nemesis.HANDLERS`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import nemesis
from .._errors import AdapterError
from ..adapters import Adapter, Capability, Environment, Observation, WorkerExit, WorkerHandle
from ..model import (
    Approve,
    ContinueWorker,
    CrashSpec,
    EventF,
    Quiesce,
    RunSpec,
    RunState,
    RunWorker,
    Submit,
)
from ..nemesis import WORKER_TIMEOUT, ScenarioError, wait_worker
from ._recorder import HistoryRecorder

MAX_QUIESCE_ROUNDS = 24


@dataclass
class RunContext:
    """One run in progress (implements :class:`harness.nemesis.StepContext`)."""

    adapter: Adapter
    env: Environment
    recorder: HistoryRecorder
    runs: dict[str, RunSpec]
    worker_timeout: float = WORKER_TIMEOUT
    paused: dict[str, WorkerHandle] = field(default_factory=dict)
    serialized: dict[str, list[str]] = field(default_factory=dict)
    decided: set[str] = field(default_factory=set)
    #: (run, wait, world requests seen) an operator's answer was given for
    answered: set[tuple[str, str, int]] = field(default_factory=set)
    _message_seq: int = 0

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.adapter.capabilities

    def message_id(self, run_id: str, tag: str) -> str:
        self._message_seq += 1
        return f"{tag}:{run_id}:{self._message_seq}"

    def start(self, worker_id: str) -> WorkerHandle:
        value = {"worker_id": worker_id, "crash": None, "code_version": None}
        self.recorder.record("invoke", EventF.WORKER, worker_id, value)
        return self.env.start_worker(worker_id)

    # -- client steps ------------------------------------------------------------

    def submit(self, step: Submit) -> None:
        rec = self.recorder
        value = step.run.model_dump()
        rec.record("invoke", EventF.SUBMIT, "runner", value)
        try:
            self.env.submit(step.run)
        except AdapterError:  # the guard's: the adapter broke, the runtime did not refuse
            raise
        except Exception as exc:  # refused, or timed out: a finding, not a crash
            # ``info``, not ``fail``: an exception does not prove the run was
            # not created (a timeout after the commit), as in Jepsen.
            rec.record("info", EventF.SUBMIT, "runner", {**value, "error": str(exc)})
        else:
            rec.record("ok", EventF.SUBMIT, "runner", value)
            if step.run.code_version is not None:
                # Accepted by an older release, run by this one: the oracle
                # runs it on today's code from the start, or accepted by that
                # release when the adapter keeps definitions
                # (Scenario.fault_free), so its contexts and path may differ;
                # migration_safety judges how it ends.
                rec.fault(
                    "migration",
                    True,
                    code_version=step.run.code_version,
                    runs=[step.run.run_id],
                    at="submit",
                )

    def run_worker(self, step: RunWorker) -> None:
        if step.worker_id in self.paused:
            raise ScenarioError(f"worker {step.worker_id} is paused; continue or kill it first")
        crash = step.crash
        value = {
            "worker_id": step.worker_id,
            "crash": None if crash is None else crash.model_dump(),
            "code_version": step.code_version,
        }
        self.recorder.record("invoke", EventF.WORKER, step.worker_id, value)
        if step.code_version is not None:
            # Any run this worker touches is read by other code than the
            # oracle's: runs written by newer code may be parked, older ones
            # build contexts in the older shape. Name them all.
            touched = sorted(self.runs)
            self.recorder.fault("migration", True, code_version=step.code_version, runs=touched)
        handle = self.env.start_worker(step.worker_id, crash=crash, code_version=step.code_version)
        self.await_worker(handle, crash)

    def await_worker(self, handle: WorkerHandle, crash: CrashSpec | None = None) -> WorkerExit:
        rec = self.recorder
        exit_ = wait_worker(handle, self.worker_timeout)
        # What the worker did (effects, transitions) happened before it ended,
        # and before a supervisor waits out its lease: record it first, so
        # that history order and virtual times say so.
        rec.sync()
        value = {
            "worker_id": handle.worker_id,
            "exit": exit_.describe(),
            "code": exit_.code,
            "signal": exit_.signal,
            "stopped": exit_.stopped,
        }
        if exit_.stopped:
            self.paused[handle.worker_id] = handle
            rec.record("info", EventF.WORKER, handle.worker_id, value)
        elif exit_.killed:
            rec.record("info", EventF.WORKER, handle.worker_id, value)
        else:
            rec.record("ok" if exit_.code == 0 else "fail", EventF.WORKER, handle.worker_id, value)
        if crash is not None:
            fired = (crash.action == "kill" and exit_.killed) or (
                crash.action == "pause" and exit_.stopped
            )
            held = sorted(w for w in self.paused if w != handle.worker_id)
            why: dict[str, Any] = {}
            if not fired and crash.action == "pause" and held:
                # it ended while another worker was held at a crash point:
                # the runtime made it wait for (or skip) what that one holds
                self.serialized[handle.worker_id] = held
                why["reason"] = (
                    f"the worker ended without reaching the site while {', '.join(held)} "
                    "was held at a crash point: the runtime serialized it"
                )
            rec.fault(
                "crash_point",
                fired,
                site=crash.site,
                nth=crash.nth,
                action=crash.action,
                worker_id=handle.worker_id,
                **why,
            )
        if exit_.killed:
            self._lease_wait()
        return exit_

    def _lease_wait(self) -> None:
        """A killed worker's lease is still held: a supervisor waits it out."""
        lease = getattr(self.adapter, "lease_seconds", None)
        if lease is not None and Capability.CLOCK in self.capabilities:
            nemesis.advance(self, float(lease) + 1.0, kind="lease_wait")

    def quiesce(self, step: Quiesce) -> None:
        """Faults stop: continue what is paused, then run workers (approving
        what waits, answering for an operator what waits for one) until a
        round changes nothing -- or until a round's worker exits 0 with
        nothing delivered and no fault fired, when the adapter declares
        ``drains`` (the worker ran all there was to run) or its environment
        says nothing is ``runnable()`` now (see the contract). A round
        that begins with nothing runnable starts no worker at all: it
        observes, delivers and ticks as the others do. With
        ``step.code_version``, the workers are the older release's (a
        ``migration`` fault naming every run, as an older ``RunWorker``),
        started every round."""
        for worker_id in list(self.paused):
            nemesis.continue_worker(self, ContinueWorker(worker_id=worker_id))
        last: tuple[Any, ...] | None = None
        version = step.code_version
        prefix = "q" if version is None else f"v{version}q"
        if version is not None:
            # the older release's workers read every run (as RunWorker's do)
            self.recorder.fault("migration", True, code_version=version, runs=sorted(self.runs))
        # An adapter whose workers drain (see ``Adapter.drains`` in the
        # contract) needs no extra worker to confirm that nothing moves.
        drains = getattr(self.adapter, "drains", False) is True
        started = 0
        for _ in range(MAX_QUIESCE_ROUNDS):
            fired_before = len(self.env.world.fired())
            exit_: WorkerExit | None = None
            # A round whose worker would find nothing runnable (the
            # environment's word) starts none: it observes, delivers and
            # ticks the clock as any round does. Not for an older release's
            # workers: the promise is about today's.
            if version is not None or not self._nothing_runnable():
                worker_id = f"{prefix}{started}"
                started += 1
                handle = (
                    self.env.start_worker(worker_id)
                    if version is None
                    else self.env.start_worker(worker_id, code_version=version)
                )
                self.recorder.record(
                    "invoke",
                    EventF.WORKER,
                    worker_id,
                    {"worker_id": worker_id, "crash": None, "code_version": version},
                )
                exit_ = self.await_worker(handle)
            self.recorder.sync()
            obs = self.recorder.observe()
            delivered = False
            if step.approve_waits:
                for r in obs.runs:
                    approval_id = str((r.approval or {}).get("approval_id"))
                    if r.state is RunState.WAITING_APPROVAL and approval_id not in self.decided:
                        nemesis.approve(self, Approve(run_id=r.run_id))
                        delivered = True
            # Play the operator too: answer a run stopped on a call of
            # unknown outcome with what the world knows of it.
            for r in obs.runs:
                if nemesis.answer_operator(self, r, obs.operations, self.answered):
                    delivered = True
            # Progress is any new checkpoint, not a change of status: a run
            # can advance many steps and still be Running.
            runs = tuple((r.run_id, r.raw_status, r.error) for r in obs.runs)
            # A world fault that fired this round is movement too: a run
            # turned away by an outage stays as it was until the outage heals
            # (a worker that simply fails and leaves the run for the next one
            # is a fair way to retry).
            fired = len(self.env.world.fired())
            state = (self.recorder.transitions, runs, fired)
            # Nothing changed since the last round; or this round's worker
            # drained what was runnable (it exited 0, and the adapter says its
            # workers drain or its environment that nothing is runnable now)
            # and nothing new came: no delivery, no fault.
            # (no worker started: nothing was runnable, a drained round)
            quiet = (exit_ is None or exit_.code == 0) and fired == fired_before and not delivered
            drained = quiet and (exit_ is None or drains or self._nothing_runnable())
            killed = exit_ is not None and exit_.killed
            idle = not delivered and not killed and (state == last or drained)
            if idle and not self._tick(obs):
                return
            last = state
        self.recorder.record(
            "info",
            EventF.NOTE,
            "runner",
            {"text": f"quiesce gave up after {MAX_QUIESCE_ROUNDS} rounds"},
        )

    def _nothing_runnable(self) -> bool:
        """The environment's word (``runnable()``, optional in the contract)
        that a worker started now would find nothing to run."""
        runnable = getattr(self.env, "runnable", None)
        return runnable is not None and runnable() is False

    def _tick(self, obs: Observation) -> bool:
        """Play the scheduler: when nothing moves but a run waits out a retry
        backoff, move the clock to its timer. Approval and event waits are
        left alone: they wait for the world, not for time."""
        if Capability.CLOCK not in self.capabilities:
            return False
        now = self.env.now()
        timers = [
            r.wake_at
            for r in obs.runs
            if r.state is RunState.RUNNING and r.wake_at is not None and r.wake_at > now
        ]
        if not timers:
            return False
        seconds = min(timers) - self.env.now() + 0.001
        self.env.advance_clock(seconds)
        # Not a fault: what any scheduler does. Kept as a note, out of coverage.
        self.recorder.record(
            "info", EventF.NOTE, "runner", {"text": "scheduler tick", "seconds": seconds}
        )
        return True


#: Who performs each kind of step: the runner (client steps) or the
#: nemesis (every fault step, registered by its family's handler module).
STEPS: dict[type, Callable[[RunContext, Any], None]] = {
    Submit: RunContext.submit,
    RunWorker: RunContext.run_worker,
    Quiesce: RunContext.quiesce,
    **nemesis.HANDLERS,
}
