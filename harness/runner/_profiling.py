"""The fault-free runs a search is aimed from, run by the runner.

The runner is the only part of the harness that opens environments, starts
workers and owns their order. Before a search, ``harness.scenarios`` asks
it for what it aims from: an environment's declared facts
(:func:`environment_facts`), and per workflow the crash-point trace of one
fault-free run (:func:`fault_free_trace`) and of one stopped by the world at
each effect (:func:`effect_trace`). What those traces mean (rounds, commits,
the site right before an effect) is read in ``harness.scenarios._profile``,
which touches no environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._janitor import scratch
from ..adapters import Adapter, WorkflowSpec
from ..adapters._contract import offered_storage_kinds
from ..adapters._guard import call
from ..model import RunSpec, RunState, StorageKind
from ..nemesis import wait_worker
from ..world import FaultRule

#: worker rounds a profile runs at most (a workflow with one approval needs 2)
ROUNDS = 6

#: per worker round, the (site, hit) pairs its worker passed, in order
Rounds = list[list[tuple[str, int]]]


@dataclass(frozen=True)
class EnvironmentFacts:
    """What one throwaway environment of an adapter declares."""

    crash_points: tuple[str, ...]
    pause_points: tuple[str, ...]
    storage_kinds: tuple[StorageKind, ...] | None
    #: effect kind -> the delivery the runtime promises for it
    delivery: Mapping[str, str]


@dataclass(frozen=True)
class FaultFreeTrace:
    """One fault-free run of a workflow, round by round."""

    rounds: Rounds
    #: the round after the first decision was delivered (None: no decision)
    resume: int | None
    #: the contexts the runtime reported (``Observation.contexts``)
    contexts: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class EffectTrace:
    """One run of a workflow that the world stopped at its first call of an effect."""

    rounds: Rounds
    #: the runtime's ledger status of the stopped call (None: no ledger entry)
    status: object


def environment_facts(adapter: Adapter) -> EnvironmentFacts:
    """The crash points, pause points, storage fault kinds and delivery
    promises of one throwaway environment of ``adapter``."""
    with scratch("probe") as tmp:
        env = adapter.open(Path(tmp) / "env", seed=0)
        try:
            return EnvironmentFacts(
                crash_points=tuple(env.crash_points()),
                pause_points=tuple(env.pause_points()),
                storage_kinds=offered_storage_kinds(env, frozenset(adapter.capabilities)),
                delivery=dict(env.declarations().delivery),
            )
        finally:
            env.close()


def _traceable(env: Any) -> bool:
    return hasattr(env, "crash_point_trace") and bool(env.crash_points())


def _drive(
    env: Any,
    workflow: WorkflowSpec,
    timeout: float,
    contexts: list[Mapping[str, Any]] | None = None,
) -> tuple[Rounds, int | None]:
    """Submit one run, run worker rounds delivering its decision after each.
    Returns the trace per round and the round after the first decision
    (and adds the contexts observed to ``contexts``). A worker still
    running after ``timeout`` seconds is an adapter error."""
    env.trace_crash_points = True
    # Nothing is faulted here: a runtime that refuses the workflow's own
    # first input, or its approver's valid decision, is broken (or its
    # adapter is), and the search could not aim anywhere.
    where = f"the fault-free profile run of workflow {workflow.name!r}: submit"
    call(
        where,
        env.submit,
        RunSpec(run_id="p1", tenant="acme", workflow=workflow.name, input=dict(workflow.inputs[0])),
    )
    rounds: Rounds = []
    resume: int | None = None
    seen = 0
    for i in range(ROUNDS):
        wait_worker(env.start_worker(f"profile-{i}"), timeout)
        trace = env.crash_point_trace()
        rounds.append([(site, n) for _worker, site, n in trace[seen:]])
        seen = len(trace)
        obs = env.observe()
        if contexts is not None:
            contexts.extend(obs.contexts)
        waiting = [r for r in obs.runs if r.state is RunState.WAITING_APPROVAL]
        for r in waiting:
            msg = env.approval_message(r.run_id, "approved", "valid", f"profile:{i}")
            if msg is not None:
                call(
                    f"the fault-free profile run of workflow {workflow.name!r}: deliver of "
                    "the approver's valid decision",
                    env.deliver,
                    msg,
                )
                if resume is None:
                    resume = i + 1
        if not waiting:
            break
    return rounds, resume


def profile_traces(
    adapter: Adapter, workflow: WorkflowSpec, effects: tuple[str, ...], timeout: float
) -> tuple[FaultFreeTrace | None, dict[str, EffectTrace]]:
    """The fault-free trace of ``workflow`` (None when its environment cannot
    trace crash points) and, if there is one, the trace of a run stopped at
    each of ``effects`` that was called, each in an environment of its own."""
    with scratch("profile") as tmp:
        free = fault_free_trace(adapter, workflow, Path(tmp) / "free", timeout)
        stopped: dict[str, EffectTrace] = {}
        for i, effect in enumerate(effects if free is not None else ()):
            found = effect_trace(adapter, workflow, effect, Path(tmp) / f"effect-{i}", timeout)
            if found is not None:
                stopped[effect] = found
    return free, stopped


def fault_free_trace(
    adapter: Adapter, workflow: WorkflowSpec, workdir: Path, timeout: float
) -> FaultFreeTrace | None:
    """One fault-free run of ``workflow`` with crash points traced (None when
    the environment cannot trace them)."""
    env: Any = adapter.open(workdir, seed=0)
    try:
        if not _traceable(env):
            return None
        contexts: list[Mapping[str, Any]] = []
        rounds, resume = _drive(env, workflow, timeout, contexts)
        return FaultFreeTrace(rounds, resume, tuple(contexts))
    finally:
        env.close()


def effect_trace(
    adapter: Adapter, workflow: WorkflowSpec, effect: str, workdir: Path, timeout: float
) -> EffectTrace | None:
    """A run of ``workflow`` whose worker the world kills right before its
    first call of ``effect`` (None when no call of it was made)."""
    service, _, action = effect.partition(".")
    env: Any = adapter.open(workdir, seed=0)
    try:
        env.world.arm(FaultRule(service, nth=1, mode="kill_before_apply", action=action or None))
        rounds, _ = _drive(env, workflow, timeout)
        if not env.world.fired():
            return None
        # What the ledger says of the call the world stopped.
        ops = [
            o
            for o in env.observe().operations
            if o.get("run_id") == "p1" and o.get("kind") == effect
        ]
        return EffectTrace(rounds, ops[-1].get("status") if ops else None)
    finally:
        env.close()
