"""World faults: a rule armed at a simulated service (reject, time out,
slow down, be unavailable, or kill the caller at the effect boundary), or
at its lookups (refuse the lookup a runtime reconciles with, or lose its
answer)."""

from __future__ import annotations

from typing import Any

from ..model import ArmWorldFault, EventF
from ..vocabulary import TOOL_REPLY_MODES, model_kind
from ..world import LOOKUP, FaultRule, FiredFault
from ._context import StepContext
from ._registry import ANY_TARGET, fires_at, handles

#: The world rule that holds the caller once its request is applied, for a
#: step that acts on it meanwhile (the network family's ``partition_after_apply``).
STOP_MODE = "stop_after_apply"
#: The mode of a persistent outage's rules (see :func:`name_outage_runs`).
OUTAGE_MODE = "unavailable"


def world_kind(mode: str, action: str | None = None) -> str:
    """The coverage kind of a world fault rule's mode (and action: a rule
    aimed at a service's lookups is a ``lookup_fault``)."""
    if action == LOOKUP:
        return "lookup_fault"
    if mode in TOOL_REPLY_MODES:
        return model_kind(mode)  # the model family's: what a tool is told
    if mode == OUTAGE_MODE:
        return "outage"
    return "effect_boundary" if mode.startswith("kill_") else "world_fault"


@handles(ArmWorldFault)
def arm_world_fault(ctx: StepContext, step: ArmWorldFault) -> None:
    """Arm the rule (one per call, for ``calls`` consecutive calls); the
    world records when each fires (the runner syncs that into the history),
    so a rule that never fires shows as armed > fired."""
    world = ctx.env.world
    # ``nth`` counts from now: the world numbers calls from its creation.
    done = world.calls(step.service, step.action)
    for i in range(step.calls):
        world.arm(
            FaultRule(
                step.service,
                nth=done + step.nth + i,
                mode=step.mode,
                action=step.action,
                delay=step.delay,
            )
        )
        ctx.recorder.arm(world_kind(step.mode, step.action))
    ctx.recorder.record(
        "info", EventF.NOTE, "nemesis", {"text": "world fault armed", **step.model_dump()}
    )


@fires_at(ANY_TARGET)
def world_fault_event(fired: FiredFault) -> tuple[str, dict[str, Any]] | None:
    """The fault kind and event of a rule at a service that fired (any
    target no other family reads: see ``fires_at``). A reply without its
    reference (the ``model`` family's tool-reply fault) may leave the run
    to stop where it cannot prove its effect (parked, for an operator):
    named in ``runs``, so the comparisons with the fault-free run leave it
    out."""
    f = fired
    if f.mode == STOP_MODE:
        return None  # it held the caller for a step that records what it did
    named = {"runs": [f.run_id]} if f.mode in TOOL_REPLY_MODES and f.run_id else {}
    value = {"mode": f.mode, "service": f.service, "action": f.action, "run_id": f.run_id}
    return world_kind(f.mode, f.action), {**value, **named}


def name_outage_runs(ctx: StepContext) -> None:
    """Once the scenario's steps are done: name, in one ``outage`` fault
    event, the runs a persistent outage turned away. A run that gives up
    after its retries is right to (the fault-free run never met the
    outage), so the comparisons with the oracle leave it out. A run the
    scenario did not submit (a child a run spawned) was turned away on
    behalf of a submitted run of its tenant: those are named too, since
    their outcome follows the child's."""
    fired = [f for f in ctx.env.world.fired() if f.mode == OUTAGE_MODE]
    if not fired:
        return
    touched = {f.run_id for f in fired if f.run_id is not None}
    runs = {r for r in touched if r in ctx.runs}
    tenants = {f.tenant for f in fired if f.run_id not in ctx.runs}
    runs |= {r.run_id for r in ctx.runs.values() if r.tenant in tenants}
    services = sorted({f.service for f in fired})
    # Per run, how many calls of each service action were turned away, and
    # the retry limit its workflow declares: ``progress`` holds a run that
    # was refused more often than its own limit allows (retries that do not
    # stop where the runtime says they do).
    refused: dict[str, dict[str, int]] = {}
    for f in fired:
        if f.run_id is not None:
            per = refused.setdefault(f.run_id, {})
            # a service-wide rule (action "*") counts calls to the service
            what = f.service if f.action == "*" else f"{f.service}.{f.action}"
            per[what] = per.get(what, 0) + 1
    limits = {w.name: w.retry_limit for w in ctx.adapter.workflows()}
    retry_limits = {
        r: limits.get(ctx.runs[r].workflow)
        for r in refused
        if r in ctx.runs and limits.get(ctx.runs[r].workflow) is not None
    }
    ctx.recorder.record(
        "info",
        EventF.FAULT,
        "nemesis",
        {
            "kind": "outage",
            "fired": True,
            "services": services,
            "calls": len(fired),
            "touched": sorted(touched),
            "runs": sorted(runs),
            "refused": refused,
            "retry_limits": retry_limits,
        },
    )
