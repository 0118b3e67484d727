"""The history of one run: what the runner did, and what it pulled in.

:class:`HistoryRecorder` writes the events the runner and the nemesis make,
counts faults in the :class:`Coverage`, and pulls in what happened
elsewhere: effects and fired faults from the world, transitions and contexts
from the runtime (:meth:`HistoryRecorder.sync`), and at the end the runs'
final states (:meth:`HistoryRecorder.finish`).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..adapters import Adapter, Capability, Environment, Observation
from ..history import HistoryWriter
from ..model import EventF, RunState
from ..nemesis import fired_fault_event

#: the states whose deadline (``RunView.wake_at``) a ``wait`` event records
WAITS = frozenset({RunState.WAITING_APPROVAL, RunState.WAITING_EVENT})


@dataclass
class Coverage:
    """Which faults were armed and which actually fired, by kind and, for
    crash points, by site (the report's coverage matrix)."""

    armed: dict[str, int] = field(default_factory=dict)
    fired: dict[str, int] = field(default_factory=dict)
    sites_armed: dict[str, int] = field(default_factory=dict)
    sites_fired: dict[str, int] = field(default_factory=dict)
    #: per fault kind: why it did not fire, as the nemesis recorded it, with
    #: how often (a kind armed and never fired names its cause from these)
    unfired: dict[str, dict[str, int]] = field(default_factory=dict)
    #: per fault kind: why it was not tested where the runtime left it
    #: nothing to aim at (never armed there), with how often -- apart from
    #: ``unfired``, so that no armed fault's cause is taken from these
    untested: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the world's model: calls answered or faulted, and their token counts
    #: (``calls``, ``prompt_tokens``, ``completion_tokens``)
    model: dict[str, int] = field(default_factory=dict)

    def note_model_call(self, call: dict[str, Any]) -> None:
        """Count one call of the world's model and its tokens."""
        for key, n in (
            ("calls", 1),
            ("prompt_tokens", int(call.get("prompt_tokens") or 0)),
            ("completion_tokens", int(call.get("completion_tokens") or 0)),
        ):
            self.model[key] = self.model.get(key, 0) + n

    def note(
        self,
        kind: str,
        fired: bool,
        *,
        armed: bool = True,
        site: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Count one fault of ``kind`` (and of crash point ``site``, if given);
        ``armed=False`` for the firing of a fault already counted when it was
        armed (a world rule). ``reason``: why one that did not fire did not.
        Neither armed nor fired, with a ``reason``: a fault the runtime left
        nothing to aim at (a barrier race it serialized before the site):
        kept under its kind with 0 armed and its reason in ``untested``, so
        the report says it was not tested and why, and no verdict counts it
        as armed and never fired (nor names it as an armed fault's cause)."""
        if not fired and reason:
            why = (self.unfired if armed else self.untested).setdefault(kind, {})
            why[reason] = why.get(reason, 0) + 1
            if not armed:
                self.armed.setdefault(kind, 0)
        if armed:
            self.armed[kind] = self.armed.get(kind, 0) + 1
        if fired:
            self.fired[kind] = self.fired.get(kind, 0) + 1
        if site is not None:
            if armed:
                self.sites_armed[site] = self.sites_armed.get(site, 0) + 1
            if fired:
                self.sites_fired[site] = self.sites_fired.get(site, 0) + 1


class HistoryRecorder:
    """Writes one run's history to ``path`` (a fresh file) and its coverage.

    Events are stamped with the environment's virtual time once :attr:`env`
    is set (0 before). Implements :class:`harness.nemesis.Recorder`.
    """

    def __init__(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        self.path = path
        self.writer = HistoryWriter(path)
        self.coverage = Coverage()
        self.env: Environment | None = None
        #: transitions seen so far (progress, for quiesce)
        self.transitions = 0
        self._world_seen = 0
        #: the ``seq`` of the last model call recorded
        self._model_seen = 0
        #: the world rules whose firing is recorded (by rule id: the world
        #: lists fired rules by rule, and a rule armed earlier may fire later)
        self._fired_seen: set[int] = set()
        #: the environment's observation cursor when it was last observed,
        #: and what that observation said (its news already handed out)
        self._cursor: tuple[Environment, Hashable] | None = None
        self._last: Observation | None = None
        #: per run, the (state, deadline) of the last ``wait`` event recorded
        self._waited: dict[str, tuple[str, float]] = {}

    def _env(self) -> Environment:
        assert self.env is not None, "the environment is not open"
        return self.env

    def record(self, type_: str, f: EventF, process: str, value: dict[str, Any]) -> None:
        now = self.env.now() if self.env is not None else 0.0
        self.writer.append(type_, f, process, value, now)

    def fault(self, kind: str, fired: bool, *, armed: bool = True, **value: Any) -> None:
        site = value.get("site") if kind == "crash_point" else None
        reason = value.get("reason")
        self.coverage.note(
            kind, fired, armed=armed, site=site, reason=reason if isinstance(reason, str) else None
        )
        self.record("info", EventF.FAULT, "nemesis", {"kind": kind, "fired": fired, **value})

    def arm(self, kind: str) -> None:
        self.coverage.armed[kind] = self.coverage.armed.get(kind, 0) + 1

    def declaration(self, adapter: Adapter) -> None:
        """The first event: what the runtime declares, the adapter, and the
        trust floor each workflow reads memory at (``memory_safety``)."""
        decl = self._env().declarations()
        workflows = adapter.workflows()
        floors = {w.name: w.memory_floor for w in workflows if w.memory_floor is not None}
        waits = {w.name: w.max_wait_seconds for w in workflows if w.max_wait_seconds is not None}
        self.record(
            "info",
            EventF.DECLARATION,
            "runner",
            {
                **decl.model_dump(),
                "capabilities": sorted(c.value for c in adapter.capabilities),
                "adapter": adapter.name,
                "memory_floors": floors,
                "max_waits": waits,
            },
        )

    def sync(self) -> None:
        """Pull new effects, model calls, fired world faults, transitions and contexts."""
        env = self._env()
        requests = env.world.requests()
        for r in requests[self._world_seen :]:
            if r.action == "lookup":
                continue
            self.record(
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
        for call in env.world.model_calls(after=self._model_seen):
            # What the model was asked is the conversation so far (it grows
            # with every call): kept in the world's file, not repeated here.
            self.record(
                "info",
                EventF.MODEL,
                "world",
                {k: v for k, v in call.items() if k != "request"},
            )
            self.coverage.note_model_call(call)
            self._model_seen = int(call["seq"])
        fired = env.world.fired()
        for f in fired:
            if f.rule_id in self._fired_seen:
                continue
            self._fired_seen.add(f.rule_id)
            # Counted as armed by the nemesis (arm_world_fault,
            # arm_model_fault): a rule that never fires shows as armed >
            # fired in the coverage. What it reads as is the word of the
            # family that aims rules at its target (harness.nemesis.fires_at).
            read = fired_fault_event(f)
            if read is not None:
                kind, value = read
                self.fault(kind, True, armed=False, **value)
        self.observe()

    def observe(self) -> Observation:
        """Observe the runtime, recording what is new. Every observation goes
        through here: an adapter's observe() hands out each transition once.

        An environment with ``observation_cursor()`` (see the contract) is
        observed again only when its cursor moved: otherwise the last
        observation stands, with nothing new in it. The cursor is read
        before observing, so a change made meanwhile moves the next one."""
        env = self._env()
        cursor_of = getattr(env, "observation_cursor", None)
        cursor = None if cursor_of is None else (env, cursor_of())
        if cursor is not None and cursor[1] is not None and cursor == self._cursor:
            assert self._last is not None
            return self._last
        obs = env.observe()
        self._cursor = cursor
        self._last = obs.model_copy(update={"transitions": (), "contexts": ()})
        for t in obs.transitions:
            self.record("info", EventF.TRANSITION, str(t.get("actor") or "runtime"), dict(t))
        self.transitions += len(obs.transitions)
        for c in obs.contexts:
            self.record("info", EventF.CONTEXT, str(c.get("worker_id") or "worker"), dict(c))
        self._waits(obs)
        return obs

    def _waits(self, obs: Observation) -> None:
        """A ``wait`` event for each run seen waiting with a deadline it did
        not report before, stamped with the harness's clock (``progress``
        holds the deadline to the workflow's ``max_wait_seconds``)."""
        for r in obs.runs:
            if r.state not in WAITS or r.wake_at is None:
                continue
            seen = (r.state.value, r.wake_at)
            if self._waited.get(r.run_id) == seen:
                continue
            self._waited[r.run_id] = seen
            self.record(
                "info",
                EventF.WAIT,
                "runner",
                {"run_id": r.run_id, "state": r.state.value, "wake_at": r.wake_at},
            )

    def finish(self, capabilities: frozenset[Capability]) -> None:
        """The last events: approvals, every run's final state (with the
        ``operations`` capability, its ledger entries in ``operations``) and,
        with the ``durable_state`` capability, what each run left in storage."""
        self.sync()
        obs = self.observe()
        for a in obs.approvals:
            self.record("info", EventF.APPROVAL, "runtime", dict(a))
        ledger: dict[str, list[dict[str, Any]]] = {}
        for op in obs.operations:
            ledger.setdefault(str(op.get("run_id")), []).append(dict(op))
        for r in obs.runs:
            final: dict[str, Any] = {
                "run_id": r.run_id,
                "tenant": r.tenant,
                "state": r.state.value,
                "raw_status": r.raw_status,
                "output": r.output,
                "error": r.error,
                "waiting_on": r.waiting_on,
            }
            if r.wake_at is not None:
                # when a timer (a lease, a backoff) would make it runnable
                final["wake_at"] = r.wake_at
            if Capability.OPERATIONS in capabilities:
                # Absent without the capability: "no view" is not "no entries".
                final["operations"] = ledger.get(r.run_id, [])
            self.record("info", EventF.FINAL, "runner", final)
        if Capability.DURABLE_STATE in capabilities:
            durable = self._env().durable_state()
            for run_id, snapshot in sorted(durable.runs.items()):
                self.record(
                    "info",
                    EventF.STATE,
                    "runner",
                    {"run_id": run_id, "state": snapshot, "volatile": list(durable.volatile)},
                )

    def close(self) -> None:
        self.writer.close()
