"""Message faults: approval decisions forged, for the wrong role (one on
each side of the expected one) or parameters, delivered twice (same
message) or again (a fresh message), messages of another tenant naming
the run (``cross_tenant``: a decision that tenant's approver genuinely
signed, or the event the run waits on), and decisions genuinely signed for
another approval of the run's tenant (``misdirected``).

A valid, single delivery is no fault; it goes through here too, so that
every approval the runner delivers (``Quiesce`` approves what waits) is made
and recorded one way.
"""

from __future__ import annotations

from typing import Any

from .._errors import AdapterError
from ..model import Approve, EventF
from ._context import StepContext
from ._registry import handles

#: The messages a step's variant asks the environment for, one each, when
#: it is more than one: a wrong role on each side of the expected one (the
#: kit's :func:`~harness.adapters.kit.wrong_roles`), since one wrong role
#: sorts on one side and a runtime comparing roles by order, not equality,
#: takes a role on the other.
ASKED: dict[str, tuple[str, ...]] = {"wrong_role": ("wrong_role", "wrong_role_above")}


@handles(Approve)
def approve(ctx: StepContext, step: Approve) -> None:
    """Deliver the run's planned decision, as ``step`` varies it."""
    env = ctx.env
    spec = ctx.runs.get(step.run_id)
    decision: str = spec.decision if spec is not None else "approved"
    if step.variant == "changed_mind":
        approve(ctx, step.model_copy(update={"variant": "valid", "decision": "planned"}))
        _change_mind(ctx, step.run_id, _other(decision))
        return
    if step.decision == "opposite":
        decision = _other(decision)
    if step.variant == "misdirected":
        _misdirect(ctx, step.run_id, step.signed_for or step.run_id, decision)
        return
    for copy in range(1 + step.fresh_copies):
        for asked in ASKED.get(step.variant, (step.variant,)):
            mid = ctx.message_id(step.run_id, "decision")
            msg = env.approval_message(step.run_id, decision, asked, mid)
            if msg is None and step.variant == "cross_tenant":
                msg = _cross_tenant_event(ctx, step.run_id, mid)
                if msg is None:
                    return
            if msg is None:
                ctx.recorder.record(
                    "info",
                    EventF.NOTE,
                    "runner",
                    {"text": f"{step.run_id} waits for no approval; nothing delivered"},
                )
                return
            if step.variant != "valid":
                ctx.recorder.fault(
                    f"{step.variant}_message", True, run_id=step.run_id, **_claims(asked, msg)
                )
            if copy > 0:
                ctx.recorder.fault("duplicate_message", True, run_id=step.run_id, fresh=True)
            for n in range(step.copies):
                deliver_message(ctx, msg, "duplicate" if n else asked, decision)
                if n:
                    ctx.recorder.fault("duplicate_message", True, run_id=step.run_id, fresh=False)
            if step.variant == "valid":
                ctx.decided.add(str(msg["payload"].get("approval_id")))


def _other(decision: str) -> str:
    return "rejected" if decision == "approved" else "approved"


def _change_mind(ctx: StepContext, run_id: str, decision: str) -> None:
    """The approver's second, opposite decision, genuinely signed, right
    behind the first: it must change nothing (the first one counts)."""
    mid = ctx.message_id(run_id, "decision")
    msg = ctx.env.approval_message(run_id, decision, "valid", mid)
    if msg is None:
        return  # the run waits for no approval: said when the first was not sent
    ctx.recorder.fault("changed_mind_message", True, run_id=run_id, decision=decision)
    deliver_message(ctx, msg, "changed_mind", decision)


def _misdirect(ctx: StepContext, run_id: str, signed_for: str, decision: str) -> None:
    """A decision the approver genuinely signed (right tenant, key, role and
    parameters) for the approval ``signed_for`` waits on, delivered to
    ``run_id``: the environment makes it for ``signed_for`` as a valid
    decision, and the harness addresses its envelope to ``run_id`` (the
    signed payload still names the approval it was signed for). Signed for
    another approval, it must decide nothing for ``run_id``; a runtime that
    checks the signature, the tenant and the role but not which approval a
    decision answers takes it (the approval ids of one workflow's runs
    differ only by run). Nothing is delivered, said in the history, when
    ``signed_for`` waits for no approval."""
    mid = ctx.message_id(run_id, "decision")
    msg = ctx.env.approval_message(signed_for, decision, "valid", mid)
    if msg is None:
        ctx.recorder.fault(
            "misdirected_message",
            False,
            run_id=run_id,
            signed_for=signed_for,
            reason=f"{signed_for} waits for no approval: no decision signed for it to misdirect",
        )
        return
    payload = msg.get("payload")
    ctx.recorder.fault(
        "misdirected_message",
        True,
        run_id=run_id,
        signed_for=signed_for,
        approval_id=payload.get("approval_id") if isinstance(payload, dict) else None,
    )
    deliver_message(ctx, {**msg, "run_id": run_id}, "misdirected", decision)


def _claims(asked: str, msg: dict[str, Any]) -> dict[str, Any]:
    """Who a refused message claims to be, for the fault's record."""
    if asked == "cross_tenant":
        return {"sent_as": msg.get("tenant")}
    payload = msg.get("payload")
    if asked in ASKED["wrong_role"] and isinstance(payload, dict):
        return {"asked": asked, "role": payload.get("role")}
    return {}


def _cross_tenant_event(ctx: StepContext, run_id: str, message_id: str) -> dict[str, Any] | None:
    """The event ``run_id`` waits on as another tenant sends it, from the
    environment's optional ``event_message``; None (said in the history)
    when the run waits for no event or the environment makes none."""
    make = getattr(ctx.env, "event_message", None)
    if make is None:
        # Armed, never fired: the coverage matrix shows it, and a run where
        # nothing else of the message family fired is inconclusive.
        ctx.recorder.fault(
            "cross_tenant_message",
            False,
            run_id=run_id,
            reason="the run waits for no approval, and the environment makes no event "
            "message (event_message): another tenant's event is not tested",
        )
        return None
    msg: dict[str, Any] | None = make(run_id, "cross_tenant", message_id)
    if msg is None:
        ctx.recorder.record(
            "info",
            EventF.NOTE,
            "runner",
            {"text": f"{run_id} waits for no approval or event; nothing delivered"},
        )
    return msg


def deliver_message(
    ctx: StepContext, msg: dict[str, Any], variant: str, decision: str, **extra: Any
) -> None:
    """Deliver ``msg`` through the environment, recording what it is meant
    as (``variant``, ``decision``; ``extra`` keys join the invoke event)."""
    base = {"message_id": msg["message_id"], "run_id": msg["run_id"]}
    spec = ctx.runs.get(str(msg["run_id"]))
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
            # who the message speaks for, and whose the run is (the
            # scenario's own record, not the runtime's)
            "tenant": msg.get("tenant"),
            "run_tenant": spec.tenant if spec is not None else None,
            **extra,
        },
    )
    try:
        accepted = ctx.env.deliver(msg)
    except AdapterError:  # the guard's: the adapter broke, the runtime did not refuse
        raise
    except Exception as exc:  # refused at the door, or lost on the way
        # ``info``: the message may have been taken before the error.
        ctx.recorder.record("info", EventF.DELIVER, "runner", {**base, "error": str(exc)})
    else:
        ctx.recorder.record("ok", EventF.DELIVER, "runner", {**base, "accepted": accepted})
