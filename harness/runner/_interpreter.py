"""Executing a scenario against an environment and recording its history.

The interpreter is the single place that owns ordering: it performs one step
at a time, and after each step pulls what happened -- effects from the world,
transitions and contexts from the runtime -- into the history. Workers run
one at a time to idle unless a step pauses one (a crash point used as a
barrier); nothing depends on thread timing, so the same scenario gives the
same history.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..adapters._contract import (
    Adapter,
    Capability,
    Environment,
    Observation,
    WorkerExit,
    WorkerHandle,
    offered_storage_kinds,
)
from ..history import HistoryWriter
from ..model import (
    AdvanceClock,
    Approve,
    ArmWorldFault,
    Cancel,
    ContinueWorker,
    EventF,
    InjectMemory,
    KillAfter,
    KillWorker,
    Quiesce,
    RaceWorkers,
    RunState,
    RunWorker,
    Scenario,
    StorageFault,
    Submit,
)
from ..world import FaultRule

#: Longest a single worker may run before the harness calls it stuck.
WORKER_TIMEOUT = 120.0
MAX_QUIESCE_ROUNDS = 24


class ScenarioError(Exception):
    """The scenario cannot be executed as written (a bug in the scenario or
    the harness, not a finding about the runtime)."""


@dataclass
class Coverage:
    """Which faults were armed and which actually fired, by kind and, for
    crash points, by site (the report's coverage matrix)."""

    armed: dict[str, int] = field(default_factory=dict)
    fired: dict[str, int] = field(default_factory=dict)
    sites_armed: dict[str, int] = field(default_factory=dict)
    sites_fired: dict[str, int] = field(default_factory=dict)

    def note(self, kind: str, fired: bool, *, armed: bool = True, site: str | None = None) -> None:
        """Count one fault of ``kind`` (and of crash point ``site``, if given);
        ``armed=False`` for the firing of a fault already counted when it was
        armed (a world rule)."""
        if armed:
            self.armed[kind] = self.armed.get(kind, 0) + 1
        if fired:
            self.fired[kind] = self.fired.get(kind, 0) + 1
        if site is not None:
            if armed:
                self.sites_armed[site] = self.sites_armed.get(site, 0) + 1
            if fired:
                self.sites_fired[site] = self.sites_fired.get(site, 0) + 1


@dataclass
class RunResult:
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
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        self.adapter = adapter
        self.scenario = scenario
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.history_path = workdir / history_name
        self.history_path.unlink(missing_ok=True)
        self.writer = HistoryWriter(self.history_path)
        self.coverage = Coverage()
        self.env: Environment | None = None
        self._paused: dict[str, WorkerHandle] = {}
        self._world_seen = 0
        self._fired_seen = 0
        self._decided: set[str] = set()
        self._message_seq = 0
        self._transitions = 0
        self._on_event = on_event
        self._caps = adapter.capabilities
        self._runs = {r.run_id: r for r in scenario.runs}

    # -- recording ------------------------------------------------------------

    def _now(self) -> float:
        return self.env.now() if self.env is not None else 0.0

    def _rec(self, type_: str, f: EventF, process: str, value: dict[str, Any]) -> None:
        self.writer.append(type_, f, process, value, self._now())

    def _fault(self, kind: str, fired: bool, *, armed: bool = True, **value: Any) -> None:
        site = value.get("site") if kind == "crash_point" else None
        self.coverage.note(kind, fired, armed=armed, site=site)
        self._rec("info", EventF.FAULT, "nemesis", {"kind": kind, "fired": fired, **value})

    def _sync(self) -> None:
        """Pull new effects, fired world faults, transitions and contexts."""
        env = self.env
        assert env is not None
        requests = env.world.requests()
        for r in requests[self._world_seen :]:
            if r.action == "lookup":
                continue
            self._rec(
                "info",
                EventF.EFFECT,
                "world",
                {
                    "seq": r.seq,
                    "service": r.service,
                    "action": r.action,
                    "kind": f"{r.service}.{r.action}",
                    "tenant": r.tenant,
                    "run_id": r.run_id,
                    "op_id": r.op_id,
                    "worker_id": r.worker_id,
                    "fencing_token": r.fencing_token,
                    "idempotency_key": r.idempotency_key,
                    "business_key": r.business_key,
                    "request": r.request,
                    "request_hash": r.request_hash,
                    "outcome": r.outcome,
                    "applied": r.applied,
                    "deduplicated": r.outcome == "deduplicated",
                    "side_effect": env.world.client().capabilities(r.service).side_effect,
                    "external_ref": r.external_ref,
                    "at": r.at,
                },
            )
        self._world_seen = len(requests)
        fired = env.world.fired()
        for f in fired[self._fired_seen :]:
            # Counted as armed by _arm_world: a rule that never fires shows
            # as armed > fired in the coverage.
            self._fault(
                _world_kind(f.mode),
                True,
                armed=False,
                mode=f.mode,
                service=f.service,
                run_id=f.run_id,
            )
        self._fired_seen = len(fired)
        self._observe()

    def _observe(self) -> Observation:
        """Observe the runtime, recording what is new. Every observation goes
        through here: an adapter's observe() hands out each transition once."""
        assert self.env is not None
        obs = self.env.observe()
        for t in obs.transitions:
            self._rec("info", EventF.TRANSITION, str(t.get("actor") or "runtime"), dict(t))
        self._transitions += len(obs.transitions)
        for c in obs.contexts:
            self._rec("info", EventF.CONTEXT, str(c.get("worker_id") or "worker"), dict(c))
        return obs

    # -- the run ---------------------------------------------------------------

    def run(self) -> RunResult:
        started = time.monotonic()
        env = self.adapter.open(self.workdir / "env", seed=self.scenario.seed)
        self.env = env
        try:
            decl = env.declarations()
            self._rec(
                "info",
                EventF.DECLARATION,
                "runner",
                {
                    **decl.model_dump(),
                    "capabilities": sorted(c.value for c in self._caps),
                    "adapter": self.adapter.name,
                },
            )
            for step in self.scenario.steps:
                self._step(step)
                self._sync()
            self._finish()
        finally:
            for handle in self._paused.values():
                handle.kill()
            env.close()
            self.env = None
        return RunResult(self.history_path, self.coverage, time.monotonic() - started)

    def _finish(self) -> None:
        self._sync()
        obs = self._observe()
        for a in obs.approvals:
            self._rec("info", EventF.APPROVAL, "runtime", dict(a))
        for r in obs.runs:
            self._rec(
                "info",
                EventF.FINAL,
                "runner",
                {
                    "run_id": r.run_id,
                    "tenant": r.tenant,
                    "state": r.state.value,
                    "raw_status": r.raw_status,
                    "output": r.output,
                    "error": r.error,
                    "waiting_on": r.waiting_on,
                },
            )
        if Capability.DURABLE_STATE in self._caps:
            assert self.env is not None
            durable = self.env.durable_state()
            for run_id, snapshot in sorted(durable.runs.items()):
                self._rec(
                    "info",
                    EventF.STATE,
                    "runner",
                    {"run_id": run_id, "state": snapshot, "volatile": list(durable.volatile)},
                )

    # -- steps -------------------------------------------------------------------

    def _step(self, step: Any) -> None:
        if isinstance(step, Submit):
            self._submit(step)
        elif isinstance(step, RunWorker):
            self._run_worker(step)
        elif isinstance(step, ContinueWorker):
            self._continue(step.worker_id)
        elif isinstance(step, KillWorker):
            self._kill(step.worker_id)
        elif isinstance(step, KillAfter):
            self._kill_after(step)
        elif isinstance(step, RaceWorkers):
            self._race(step)
        elif isinstance(step, Approve):
            self._approve(step)
        elif isinstance(step, AdvanceClock):
            self._advance(step.seconds)
        elif isinstance(step, ArmWorldFault):
            self._arm_world(step)
        elif isinstance(step, InjectMemory):
            self._inject(step)
        elif isinstance(step, StorageFault):
            self._storage(step)
        elif isinstance(step, Cancel):
            self._cancel(step)
        elif isinstance(step, Quiesce):
            self._quiesce(step)
        else:  # pragma: no cover - the Step union is closed
            raise ScenarioError(f"unknown step {step!r}")

    def _submit(self, step: Submit) -> None:
        assert self.env is not None
        value = step.run.model_dump()
        self._rec("invoke", EventF.SUBMIT, "runner", value)
        try:
            self.env.submit(step.run)
        except Exception as exc:  # refused, or timed out: a finding, not a crash
            # ``info``, not ``fail``: an exception does not prove the run was
            # not created (a timeout after the commit), as in Jepsen.
            self._rec("info", EventF.SUBMIT, "runner", {**value, "error": str(exc)})
        else:
            self._rec("ok", EventF.SUBMIT, "runner", value)
            if step.run.code_version is not None:
                # Accepted by an older release, run by this one: the oracle
                # runs it on today's code from the start (Scenario.fault_free),
                # so its contexts and path may differ; migration_safety judges
                # how it ends.
                self._fault(
                    "migration",
                    True,
                    code_version=step.run.code_version,
                    runs=[step.run.run_id],
                    at="submit",
                )

    def _run_worker(self, step: RunWorker) -> None:
        env = self.env
        assert env is not None
        if step.worker_id in self._paused:
            raise ScenarioError(f"worker {step.worker_id} is paused; continue or kill it first")
        crash = step.crash
        if crash is not None and Capability.CRASH_POINTS not in self._caps:
            raise ScenarioError("crash points need the crash_points capability")
        value = {
            "worker_id": step.worker_id,
            "crash": None if crash is None else crash.model_dump(),
            "code_version": step.code_version,
        }
        self._rec("invoke", EventF.WORKER, step.worker_id, value)
        if step.code_version is not None:
            # Any run this worker touches is read by other code than the
            # oracle's: runs written by newer code may be parked, older ones
            # build contexts in the older shape. Name them all.
            touched = sorted(self._runs)
            self._fault("migration", True, code_version=step.code_version, runs=touched)
        handle = env.start_worker(step.worker_id, crash=crash, code_version=step.code_version)
        self._await(handle, crash_kind=None if crash is None else crash.action, crash=crash)

    def _await(self, handle: WorkerHandle, *, crash_kind: str | None, crash: Any) -> WorkerExit:
        exit_ = handle.wait(WORKER_TIMEOUT)
        # What the worker did (effects, transitions) happened before it ended,
        # and before a supervisor waits out its lease: record it first, so
        # that history order and virtual times say so.
        self._sync()
        value = {
            "worker_id": handle.worker_id,
            "exit": exit_.describe(),
            "code": exit_.code,
            "signal": exit_.signal,
            "stopped": exit_.stopped,
        }
        if exit_.stopped:
            self._paused[handle.worker_id] = handle
            self._rec("info", EventF.WORKER, handle.worker_id, value)
        elif exit_.killed:
            self._rec("info", EventF.WORKER, handle.worker_id, value)
        else:
            self._rec("ok" if exit_.code == 0 else "fail", EventF.WORKER, handle.worker_id, value)
        if crash is not None:
            fired = (crash.action == "kill" and exit_.killed) or (
                crash.action == "pause" and exit_.stopped
            )
            self._fault(
                "crash_point",
                fired,
                site=crash.site,
                nth=crash.nth,
                action=crash.action,
                worker_id=handle.worker_id,
            )
        if exit_.killed:
            self._lease_wait()
        return exit_

    def _lease_wait(self) -> None:
        """A killed worker's lease is still held: a supervisor waits it out."""
        lease = getattr(self.adapter, "lease_seconds", None)
        if lease is not None and Capability.CLOCK in self._caps:
            self._advance(float(lease) + 1.0, kind="lease_wait")

    def _continue(self, worker_id: str) -> None:
        handle = self._paused.pop(worker_id, None)
        if handle is None:  # its pause never fired (the site was not reached)
            self._rec("info", EventF.NOTE, "runner", {"text": f"{worker_id} is not paused"})
            return
        self._fault("continue", True, worker_id=worker_id)
        handle.cont()
        self._await(handle, crash_kind=None, crash=None)

    def _kill(self, worker_id: str) -> None:
        handle = self._paused.pop(worker_id, None)
        if handle is None:
            self._rec("info", EventF.NOTE, "runner", {"text": f"{worker_id} is not paused"})
            return
        handle.kill()
        self._fault("kill", True, worker_id=worker_id)
        self._await(handle, crash_kind=None, crash=None)

    def _kill_after(self, step: KillAfter) -> None:
        """Random-moment kill: the one step timed by the wall clock (see KillAfter)."""
        env = self.env
        assert env is not None
        value = {"worker_id": step.worker_id, "crash": None, "code_version": None}
        self._rec("invoke", EventF.WORKER, step.worker_id, value)
        handle = env.start_worker(step.worker_id)
        time.sleep(step.delay)
        handle.kill()  # a no-op for a worker that already exited
        exit_ = handle.wait(WORKER_TIMEOUT)
        self._fault("random_kill", exit_.killed, worker_id=step.worker_id, delay=step.delay)
        # _await records the exit (and waits out the lease after a kill); the
        # handle has already been reaped, so it returns at once.
        self._await(handle, crash_kind=None, crash=None)

    def _race(self, step: RaceWorkers) -> None:
        """Start every worker before waiting for any: they work at once."""
        env = self.env
        assert env is not None
        if Capability.CONCURRENT_WORKERS not in self._caps:
            raise ScenarioError("racing workers need the concurrent_workers capability")
        busy = sorted(set(step.worker_ids) & set(self._paused))
        if busy:
            raise ScenarioError(f"workers {busy} are paused; continue or kill them first")
        handles = []
        for worker_id in step.worker_ids:
            value = {"worker_id": worker_id, "crash": None, "code_version": None}
            self._rec("invoke", EventF.WORKER, worker_id, value)
            handles.append(env.start_worker(worker_id))
        # No runs named: a race must change no outcome.
        self._fault("race", True, workers=list(step.worker_ids))
        for handle in handles:
            self._await(handle, crash_kind=None, crash=None)

    def _cancel(self, step: Cancel) -> None:
        """An operator's out-of-band write: the run is named, since its outcome
        changes; what must not change is the state machine (a worker that
        held the run must not write over the cancellation)."""
        env = self.env
        assert env is not None
        if Capability.CANCEL not in self._caps:
            raise ScenarioError("cancelling a run needs the cancel capability")
        done = bool(env.cancel(step.run_id))
        self._fault("operator_cancel", done, runs=[step.run_id], paused=sorted(self._paused))

    def _storage(self, step: StorageFault) -> None:
        env = self.env
        assert env is not None
        if Capability.STORAGE_FAULTS not in self._caps:
            raise ScenarioError("storage faults need the storage_faults capability")
        # Whose sessions are at stake: the paused workers (an idle one holds
        # pooled connections too). No runs are named: a cut connection must
        # change no outcome, so every run stays under every comparison.
        value: dict[str, Any] = {"storage": step.kind, "paused": sorted(self._paused)}
        if step.kind not in offered_storage_kinds(env, self._caps):
            # This deployment has no such server (say, Redis without the Redis
            # queue): armed, and visibly never fired.
            self._fault("storage", False, **value, offered=False)
            return
        self._fault("storage", env.storage_fault(step.kind), **value)

    def _message_id(self, run_id: str, tag: str) -> str:
        self._message_seq += 1
        return f"{tag}:{run_id}:{self._message_seq}"

    def _approve(self, step: Approve) -> None:
        env = self.env
        assert env is not None
        spec = self._runs.get(step.run_id)
        decision = spec.decision if spec is not None else "approved"
        for copy in range(1 + step.fresh_copies):
            mid = self._message_id(step.run_id, "decision")
            msg = env.approval_message(step.run_id, decision, step.variant, mid)
            if msg is None:
                self._rec(
                    "info",
                    EventF.NOTE,
                    "runner",
                    {"text": f"{step.run_id} waits for no approval; nothing delivered"},
                )
                return
            if step.variant != "valid":
                self._fault(f"{step.variant}_message", True, run_id=step.run_id)
            if copy > 0:
                self._fault("duplicate_message", True, run_id=step.run_id, fresh=True)
            for n in range(step.copies):
                self._deliver(msg, "duplicate" if n else step.variant, decision)
                if n:
                    self._fault("duplicate_message", True, run_id=step.run_id, fresh=False)
            if step.variant == "valid":
                self._decided.add(str(msg["payload"].get("approval_id")))

    def _deliver(self, msg: dict[str, Any], variant: str, decision: str) -> None:
        assert self.env is not None
        base = {"message_id": msg["message_id"], "run_id": msg["run_id"]}
        self._rec(
            "invoke",
            EventF.DELIVER,
            "runner",
            {**base, "kind": msg["kind"], "variant": variant, "decision": decision},
        )
        try:
            accepted = self.env.deliver(msg)
        except Exception as exc:  # refused at the door, or lost on the way
            # ``info``: the message may have been taken before the error.
            self._rec("info", EventF.DELIVER, "runner", {**base, "error": str(exc)})
        else:
            self._rec("ok", EventF.DELIVER, "runner", {**base, "accepted": accepted})

    def _advance(self, seconds: float, kind: str = "clock") -> None:
        """Move virtual time; ``kind`` is ``clock`` for a scenario's clock jump,
        ``lease_wait`` for the wait a supervisor makes after a kill. Either may
        let an approval expire, so the runs that may change are named."""
        env = self.env
        assert env is not None
        if Capability.CLOCK not in self._caps:
            raise ScenarioError("advancing the clock needs the clock capability")
        before = self._observe()
        then = env.now()
        env.advance_clock(seconds)
        now = env.now()
        # expires_at is the first instant an approval no longer counts
        expiring = {
            r.run_id
            for r in before.runs
            if r.approval is not None and float(r.approval.get("expires_at", 0)) <= now
        }
        # A decision already taken expires too: a run that has not yet done
        # what it was approved for must now be refused it (a long outage).
        unfinished = {r.run_id for r in before.runs if not r.state.terminal}
        expiring |= {
            str(a.get("run_id"))
            for a in before.approvals
            if a.get("decision") == "approved"
            and a.get("expires_at") is not None
            and then < float(a["expires_at"]) <= now
            and a.get("run_id") in unfinished
        }
        self._fault(kind, True, seconds=seconds, runs=sorted(expiring))

    def _arm_world(self, step: ArmWorldFault) -> None:
        assert self.env is not None
        # ``nth`` counts from now: the world numbers calls from its creation.
        done = self.env.world.calls(step.service, step.action)
        self.env.world.arm(
            FaultRule(
                step.service,
                nth=done + step.nth,
                mode=step.mode,  # type: ignore[arg-type]
                action=step.action,
                delay=step.delay,
            )
        )
        self.coverage.armed[_world_kind(step.mode)] = (
            self.coverage.armed.get(_world_kind(step.mode), 0) + 1
        )
        self._rec(
            "info", EventF.NOTE, "nemesis", {"text": "world fault armed", **step.model_dump()}
        )

    def _inject(self, step: InjectMemory) -> None:
        env = self.env
        assert env is not None
        if Capability.MEMORY_INJECTION not in self._caps:
            raise ScenarioError("planting memory needs the memory_injection capability")
        now = env.now()
        owner = step.tenant
        tenant = step.tenant
        version = 1
        expires_at = None
        if step.kind == "cross_tenant":
            owner = f"{step.tenant}-other"
            tenant = owner
        elif step.kind == "expired":
            expires_at = now - 1.0
        elif step.kind == "stale":
            version = 1
        memory_id = f"planted:{step.kind}:{tenant}:{step.namespace}:{step.key}:v{version}"
        record = {
            "tenant": tenant,
            "namespace": step.namespace,
            "key": step.key,
            "value": step.value,
            "provenance": step.provenance,
            "memory_id": memory_id,
            "version": version,
            "expires_at": expires_at,
        }
        env.inject_memory(record)
        if step.kind == "stale":
            newer = {
                **record,
                "version": 2,
                "memory_id": memory_id[:-1] + "2",
                "value": {"superseded": step.value},
            }
            env.inject_memory(newer)
        self._rec(
            "info", EventF.MEMORY, "nemesis", {**record, "kind": step.kind, "owner_tenant": owner}
        )
        # Records a run may legitimately read (its own tenant's, live) change
        # its context and maybe its outcome; cross-tenant and expired ones must
        # change nothing, so their runs stay under every comparison.
        visible = step.kind in ("poisoned", "stale", "trusted")
        runs = sorted(r.run_id for r in self._runs.values() if visible and r.tenant == step.tenant)
        self._fault("memory", True, memory_kind=step.kind, tenant=step.tenant, runs=runs)

    def _tick(self, obs: Observation) -> bool:
        """Play the scheduler: when nothing moves but a run waits out a retry
        backoff, move the clock to its timer. Approval and event waits are
        left alone: they wait for the world, not for time."""
        env = self.env
        assert env is not None
        if Capability.CLOCK not in self._caps:
            return False
        wake = _next_timer(obs, env.now())
        if wake is None:
            return False
        seconds = wake - env.now() + 0.001
        env.advance_clock(seconds)
        # Not a fault: what any scheduler does. Kept as a note, out of coverage.
        self._rec("info", EventF.NOTE, "runner", {"text": "scheduler tick", "seconds": seconds})
        return True

    def _quiesce(self, step: Quiesce) -> None:
        env = self.env
        assert env is not None
        for worker_id in list(self._paused):
            self._continue(worker_id)
        last: tuple[Any, ...] | None = None
        for rnd in range(MAX_QUIESCE_ROUNDS):
            handle = env.start_worker(f"q{rnd}")
            self._rec(
                "invoke",
                EventF.WORKER,
                f"q{rnd}",
                {"worker_id": f"q{rnd}", "crash": None, "code_version": None},
            )
            exit_ = self._await(handle, crash_kind=None, crash=None)
            self._sync()
            obs = self._observe()
            delivered = False
            if step.approve_waits:
                for r in obs.runs:
                    approval_id = str((r.approval or {}).get("approval_id"))
                    if r.state is RunState.WAITING_APPROVAL and approval_id not in self._decided:
                        self._approve(Approve(run_id=r.run_id))
                        delivered = True
            # Progress is any new checkpoint, not a change of status: a run
            # can advance many steps and still be Running.
            state = (self._transitions, tuple((r.run_id, r.raw_status, r.error) for r in obs.runs))
            idle = not delivered and not exit_.killed and state == last
            if idle and not self._tick(obs):
                return
            last = state
        self._rec(
            "info",
            EventF.NOTE,
            "runner",
            {"text": f"quiesce gave up after {MAX_QUIESCE_ROUNDS} rounds"},
        )


def _world_kind(mode: str) -> str:
    """The coverage kind of a world fault rule's mode."""
    return "effect_boundary" if mode.startswith("kill_") else "world_fault"


def _next_timer(obs: Observation, now: float) -> float | None:
    timers = [
        r.wake_at
        for r in obs.runs
        if r.state is RunState.RUNNING and r.wake_at is not None and r.wake_at > now
    ]
    return min(timers) if timers else None


def run_scenario(
    adapter: Adapter, scenario: Scenario, workdir: Path, *, history_name: str = "history.jsonl"
) -> RunResult:
    """Execute ``scenario`` in a fresh environment under ``workdir``."""
    return Interpreter(adapter, scenario, workdir, history_name=history_name).run()
