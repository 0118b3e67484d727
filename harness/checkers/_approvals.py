"""``approval_integrity``: a consequential effect happens only as approved, and once."""

from __future__ import annotations

from ..history import History
from ..model import EventF, PropertyResult
from ._base import Findings, guarded, plural
from ._effects import (
    applied_by_op,
    approval_actions,
    approvals_by_run,
    fmt_op,
    match_approval,
    parse_effects,
)

NAME = "approval_integrity"


@guarded(NAME)
def check_approval_integrity(history: History, oracle: History | None) -> PropertyResult:
    """Every applied effect that needs approval was approved, exactly as performed.

    Promises: each counted effect (``applied`` and ``side_effect``) whose
    kind is in ``declaration.needs_approval`` has an ``approval`` event of
    the same run with ``decision == "approved"``, ``action`` equal to the
    kind (or to the approval action the declaration maps the kind to),
    ``params_hash`` equal to the effect's ``request_hash``, and the effect's
    ``at`` no later than ``expires_at`` (a missing ``expires_at`` never
    expires). One approval executes once: a logical operation of such a kind
    applied more than once fails here too, naming the approval. One
    decision message counts once: a message id delivered again after the
    runtime accepted it must be recognised as a duplicate at the door
    (``deliver`` ok with ``accepted`` false); accepted twice, the same
    decision may be processed twice. The oracle is not used.

    Cannot see: whether the approval message itself was authentic (the
    runtime's approval record is trusted as recorded), or effects the world
    never received. Without a declaration it cannot tell which kinds need
    approval: ``unknown``.
    """
    f = Findings(NAME)
    f.zero("gated_effects", "authorized", "approvals")
    f.count("approvals", len(history.by_f(EventF.APPROVAL)))
    decl = history.declaration()
    if decl is None:
        f.unknown("no declaration was recorded, so which effect kinds need approval is unknown")
        return f.result("")
    if not decl.needs_approval:
        return f.result("The runtime declares no effect kind that needs approval")
    effects, malformed = parse_effects(history)
    for e in malformed:
        f.unknown(
            f"effect #{e.index} lacks a kind, a request_hash or a boolean 'applied'", [e.index]
        )
    _check_redeliveries(f, history)
    approvals = approvals_by_run(history)
    gated = [eff for eff in effects if eff.counted and eff.kind in decl.needs_approval]
    for eff in gated:
        f.count("gated_effects")
        actions = approval_actions(decl, eff.kind)
        found, why = match_approval(eff, approvals.get(eff.run_id or "", []), actions)
        if why is None:
            f.count("authorized")
            continue
        f.fail(
            f"effect #{eff.index} applied {eff.kind} for run {eff.run_id} without a valid "
            f"approval: {why}",
            [eff.index] + ([found.index] if found is not None else []),
        )
        f.count("unauthorized")
    for op, group in applied_by_op(gated).items():
        if len(group) < 2:
            continue
        approval, _ = match_approval(
            group[0], approvals.get(group[0].run_id or "", []), approval_actions(decl, op[2])
        )
        named = (
            f"approval {approval.value.get('approval_id') or '#' + str(approval.index)}"
            if approval is not None
            else "its approval"
        )
        f.fail(
            f"{named} executed {len(group)} times: {fmt_op(op)} was applied by effects "
            f"{', '.join('#' + str(g.index) for g in group)}",
            [g.index for g in group] + ([approval.index] if approval is not None else []),
        )
        f.count("duplicated_ops")
    kinds = ", ".join(sorted(decl.needs_approval))
    return f.result(
        f"All {plural(f.counts['gated_effects'], 'applied effect')} of kinds needing approval "
        f"({kinds}) matched an approved, unexpired approval for their exact parameters, "
        "and each executed once",
        evidence=f.counts["gated_effects"] + f.counts.get("decisions", 0),
    )


def _check_redeliveries(f: Findings, history: History) -> None:
    """Fail for a message id the runtime accepted as new more than once."""
    first: dict[str, int] = {}
    for e in history.by_f(EventF.DELIVER):
        message_id = e.value.get("message_id")
        if e.type != "ok" or e.value.get("accepted") is not True or not isinstance(message_id, str):
            continue
        f.count("decisions")
        if message_id not in first:
            first[message_id] = e.index
            continue
        f.fail(
            f"message {message_id} was accepted as new twice (deliveries #{first[message_id]} "
            f"and #{e.index}): the inbox did not deduplicate it, so its decision can be "
            "processed twice",
            [first[message_id], e.index],
        )
        f.count("messages_accepted_twice")
