"""The operator's answer to a run stopped at ``needs_operator``.

A run stops at ``needs_operator`` when it made (or may have made) a call
whose outcome it cannot learn and must not repeat: an at-most-once effect
without idempotency keys or a lookup. That stop is correct, and where the
harness used to leave it -- so a runtime that loses the operator's answer,
or acts on it wrongly, passed. The world knows what the runtime cannot:
whether the call was applied. During the final quiesce, the runner plays
the operator with that knowledge (as it plays the approver), through the
environment's optional ``operator_message``; then the run must move on and
the effect must still have been applied exactly once.

Which call the run is in doubt about comes from the runtime's ledger (the
``operations`` capability: its ``in_doubt`` entry); the answer from the
world's record of that call, matched by the ledger's ``op_id``, else its
``request_hash``, else the kind. Without either, nothing is answered and
the history says why; the run's stop is then judged as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..adapters import Capability, RunView
from ..model import OPERATOR_ANSWER, EventF, RunState
from ..world import RequestRecord, WorldUsageError, service_spec
from ._context import StepContext
from ._messages import deliver_message


def answer_operator(
    ctx: StepContext,
    run: RunView,
    operations: Sequence[Mapping[str, Any]],
    answered: set[tuple[str, str, int]],
) -> bool:
    """Answer ``run`` (at ``needs_operator``) from the world's record; True
    if an answer was delivered. ``answered`` holds (run, wait, calls seen)
    already answered: a run is answered again only after it called the
    service again (it resent, and that call too ended in doubt)."""
    if run.state is not RunState.NEEDS_OPERATOR:
        return False
    make = getattr(ctx.env, "operator_message", None)
    if make is None or Capability.OPERATIONS not in ctx.capabilities:
        return False
    doubt = [
        op for op in operations if op.get("run_id") == run.run_id and op.get("status") == "in_doubt"
    ]
    requests = [r for r in ctx.env.world.requests() if r.run_id == run.run_id]
    key = (run.run_id, str(run.waiting_on), len(requests))
    if key in answered:
        return False
    answered.add(key)
    answer = world_answer(doubt[0], requests) if len(doubt) == 1 else None
    if answer is None:
        why = (
            f"its ledger names {len(doubt)} calls in doubt"
            if len(doubt) != 1
            else f"the world offers no service action {doubt[0].get('kind')!r}"
        )
        ctx.recorder.record(
            "info",
            EventF.NOTE,
            "runner",
            {"text": f"{run.run_id} waits for an operator, but {why}: no answer is given"},
        )
        return False
    applied, external_ref = answer
    message_id = ctx.message_id(run.run_id, "operator")
    msg: dict[str, Any] | None = make(run.run_id, applied, external_ref, message_id)
    if msg is None:
        ctx.recorder.record(
            "info",
            EventF.NOTE,
            "runner",
            {"text": f"{run.run_id} takes no operator's answer now; nothing delivered"},
        )
        return False
    deliver_message(
        ctx,
        msg,
        OPERATOR_ANSWER,
        "applied" if applied else "not_applied",
        waiting_on=run.waiting_on,
        op_kind=doubt[0].get("kind"),
        applied=applied,
        external_ref=external_ref,
    )
    return True


def world_answer(
    op: Mapping[str, Any], requests: Sequence[RequestRecord]
) -> tuple[bool, str | None] | None:
    """Whether the world applied the call ledger entry ``op`` stands for, and
    the reference it gave it: among the run's requests, those of the entry's
    ``op_id`` (when the world recorded op ids), else of its request hash,
    else of its kind; not applied when none matches but the kind is one of
    the world's service actions (the call never reached it). None when the
    ledger names the call in a way the world does not know: a guess could
    make the runtime repeat it, or skip it."""
    kind = op.get("kind")
    keys: tuple[tuple[str, Any], ...] = (
        ("op_id", op.get("op_id")),
        ("request_hash", op.get("request_hash")),
        ("kind", kind),
    )
    for field, want in keys:
        if want is None:
            continue
        mine = [r for r in requests if _field(r, field) == want]
        if mine:
            applied = [r for r in mine if r.applied]
            return bool(applied), applied[0].external_ref if applied else None
    # No request of the run is that call: if the kind names a service action
    # of the world, the call never reached it (the worker died, or stopped,
    # before it called), and so was not applied. Otherwise the ledger names
    # it in a way the world does not know: no guess.
    service, _, action = str(kind or "").partition(".")
    try:
        service_spec(service, action)
    except WorldUsageError:
        return None
    return False, None


def _field(r: RequestRecord, field: str) -> Any:
    return f"{r.service}.{r.action}" if field == "kind" else getattr(r, field)
