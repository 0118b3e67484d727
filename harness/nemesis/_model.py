"""Model faults: a rule armed at the world's model endpoint (a rate limit, a
server error, a lost or cut reply, or a reply whose decision is changed:
malformed or incomplete tool-call arguments, an empty answer, a refusal)."""

from __future__ import annotations

from typing import Any

from ..model import ArmModelFault, EventF
from ..vocabulary import model_kind
from ..world import MODEL, MODEL_CONTENT_MODES, FaultRule, FiredFault
from ._context import StepContext
from ._registry import fires_at, handles


@handles(ArmModelFault)
def arm_model_fault(ctx: StepContext, step: ArmModelFault) -> None:
    """Arm the rule (one per call, for ``calls`` consecutive calls), counted
    from the model calls (or replies of ``action``'s kind) made so far; the
    world records when each fires (the runner syncs it into the history)."""
    world = ctx.env.world
    done = world.calls(MODEL, step.action)
    for i in range(step.calls):
        world.arm(FaultRule(MODEL, nth=done + step.nth + i, mode=step.mode, action=step.action))
        ctx.recorder.arm(model_kind(step.mode))
    ctx.recorder.record(
        "info", EventF.NOTE, "nemesis", {"text": "model fault armed", **step.model_dump()}
    )


def model_fault_event(fired: FiredFault) -> dict[str, Any]:
    """The fault event of a model fault that fired. One that changed what
    the model decided names the run it answered (``runs``): that run may
    legitimately end otherwise than a fault-free one (the comparisons with
    the oracle leave it out; no property excuses an effect done twice or
    one the run cannot prove). One that lost or refused the reply names
    none: a client retries it, and the run must end as if it had not
    happened."""
    value: dict[str, Any] = {"mode": fired.mode, "service": MODEL, "run_id": fired.run_id}
    if fired.mode in MODEL_CONTENT_MODES and fired.run_id is not None:
        value["runs"] = [fired.run_id]
    return value


@fires_at(MODEL)
def _fired(fired: FiredFault) -> tuple[str, dict[str, Any]]:
    """A model rule that fired, as the fault kind of its mode and its event."""
    return model_kind(fired.mode), model_fault_event(fired)
