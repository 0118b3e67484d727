"""Message faults: approval decisions forged, for the wrong role or
parameters, delivered twice (same message) or again (a fresh message).

A valid, single delivery is no fault; it goes through here too, so that
every approval the runner delivers (``Quiesce`` approves what waits) is made
and recorded one way.
"""

from __future__ import annotations

from typing import Any

from ..model import Approve, EventF
from ._context import StepContext


def approve(ctx: StepContext, step: Approve) -> None:
    """Deliver the run's planned decision, as ``step`` varies it."""
    env = ctx.env
    spec = ctx.runs.get(step.run_id)
    decision = spec.decision if spec is not None else "approved"
    if step.decision == "opposite":
        decision = "rejected" if decision == "approved" else "approved"
    for copy in range(1 + step.fresh_copies):
        mid = ctx.message_id(step.run_id, "decision")
        msg = env.approval_message(step.run_id, decision, step.variant, mid)
        if msg is None:
            ctx.recorder.record(
                "info",
                EventF.NOTE,
                "runner",
                {"text": f"{step.run_id} waits for no approval; nothing delivered"},
            )
            return
        if step.variant != "valid":
            ctx.recorder.fault(f"{step.variant}_message", True, run_id=step.run_id)
        if copy > 0:
            ctx.recorder.fault("duplicate_message", True, run_id=step.run_id, fresh=True)
        for n in range(step.copies):
            _deliver(ctx, msg, "duplicate" if n else step.variant, decision)
            if n:
                ctx.recorder.fault("duplicate_message", True, run_id=step.run_id, fresh=False)
        if step.variant == "valid":
            ctx.decided.add(str(msg["payload"].get("approval_id")))


def _deliver(ctx: StepContext, msg: dict[str, Any], variant: str, decision: str) -> None:
    base = {"message_id": msg["message_id"], "run_id": msg["run_id"]}
    payload = msg.get("payload")
    approval_id = payload.get("approval_id") if isinstance(payload, dict) else None
    ctx.recorder.record(
        "invoke",
        EventF.DELIVER,
        "runner",
        {
            **base,
            "kind": msg["kind"],
            "variant": variant,
            "decision": decision,
            "approval_id": approval_id,
        },
    )
    try:
        accepted = ctx.env.deliver(msg)
    except Exception as exc:  # refused at the door, or lost on the way
        # ``info``: the message may have been taken before the error.
        ctx.recorder.record("info", EventF.DELIVER, "runner", {**base, "error": str(exc)})
    else:
        ctx.recorder.record("ok", EventF.DELIVER, "runner", {**base, "accepted": accepted})
