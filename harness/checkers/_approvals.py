"""``approval_integrity``: a consequential effect happens only as approved, and once."""

from __future__ import annotations

from ..history import History
from ..model import Event, EventF, PropertyResult
from ._base import Findings, every, guarded, plural, short, vnum, vstr
from ._effects import (
    Effect,
    applied_by_op,
    approval_actions,
    approvals_by_run,
    fmt_op,
    match_approval,
    parse_effects,
)
from ._genuine import Decisions, Delivered, delivered_decisions

NAME = "approval_integrity"


@guarded(NAME)
def check_approval_integrity(history: History, oracle: History | None) -> PropertyResult:
    """Every applied effect that needs approval was approved, exactly as performed.

    A failure usually means: an effect ran without the approval it needed,
    or with other parameters than approved: a duplicated, forged, expired,
    stale or other tenant's decision was accepted.

    Promises: each counted effect (``applied`` and ``side_effect``) whose
    kind is in ``declaration.needs_approval`` has an ``approval`` event of
    the same run with ``decision == "approved"``, ``action`` equal to the
    kind (or to the approval action the declaration maps the kind to),
    ``params_hash`` equal to the effect's ``request_hash``, and the effect's
    ``at`` before ``expires_at`` (the first instant the approval no longer
    counts, as a JWT's ``exp``; a missing ``expires_at`` never expires).
    One approval executes once: a logical operation of such a kind
    applied more than once fails here too, naming the approval. One
    decision message counts once: a message id delivered again after the
    runtime accepted it must be recognised as a duplicate at the door
    (``deliver`` ok with ``accepted`` false); accepted twice, the same
    decision may be processed twice.

    Authenticity, judged against what the approver genuinely said (the
    ``deliver`` invoke events: a ``valid`` message, or the same message
    delivered again, is genuine; ``forged``, ``wrong_role``,
    ``wrong_params`` and ``cross_tenant`` messages are not, whatever
    decision they carry, nor is a valid one signed for another tenant than
    the run's): every
    approval the runtime recorded as ``approved`` is backed by a genuine
    ``approved`` decision delivered for its run (and its approval id, when
    both name one), and every gated effect was applied after such a
    decision was delivered (history order). An approval recorded as
    ``approved`` with ``decided_at`` at or after its ``expires_at`` fails:
    the runtime accepted an expired decision, even if a later re-check kept
    the effect from happening. The oracle is not used.

    Cannot see: effects the world never received; a decision the runtime
    took from a message the runner did not deliver. Authenticity is
    ``unknown`` (never guessed) for a run with an approved record and no
    recorded delivery (a history written before deliveries named their
    variant, or a runtime that approved on its own), and for a decision
    backed only by a forged or wrong message when the adapter does not
    declare the ``approvals`` capability (its messages are not signed, so a
    "forged" one may be indistinguishable from the approver's). Expiry is
    judged only where the record gives both times as numbers, on the
    runtime's own clock. Without a declaration it cannot tell which kinds
    need approval: ``unknown``.
    """
    f = Findings(NAME)
    f.zero("gated_effects", "authorized", "approvals", "approved_records")
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
    decisions = delivered_decisions(history)
    signed = decl.has_capability("approvals")
    for a in history.by_f(EventF.APPROVAL):
        if a.value.get("decision") == "approved":
            f.count("approved_records")
            _check_genuine_record(f, decisions, a, signed)
            _check_expiry(f, a)
    gated = [eff for eff in effects if eff.counted and eff.kind in decl.needs_approval]
    for eff in gated:
        f.count("gated_effects")
        actions = approval_actions(decl, eff.kind)
        found, why = match_approval(eff, approvals.get(eff.run_id or "", []), actions)
        if why is None:
            f.count("authorized")
            if found is not None:
                _check_approved_before(f, decisions, eff, found)
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
        f"{every(f.counts['gated_effects'], 'applied effect')} of kinds needing approval "
        f"({kinds}) matched an approved, unexpired approval for their exact parameters, "
        "and each executed once; "
        f"{plural(f.counts.get('genuinely_approved', 0), 'approved record')} matched a "
        "genuine decision of the approver",
        evidence=f.counts["gated_effects"]
        + f.counts.get("decisions", 0)
        + f.counts["approved_records"],
    )


def _aid(a: Event) -> str:
    return vstr(a, "approval_id") or f"#{a.index}"


def _said(ds: list[Delivered]) -> str:
    return ", ".join(f"{d.variant} {d.decision} #{d.index}" for d in ds) or "none"


def _check_genuine_record(f: Findings, decisions: Decisions, a: Event, signed: bool) -> None:
    """An approval recorded as approved must be backed by the approver."""
    run_id, approval_id = vstr(a, "run_id"), vstr(a, "approval_id")
    if run_id is None:
        f.unknown(f"approval #{a.index} names no run", [a.index])
        return
    if not decisions.by_run.get(run_id):
        why = (
            "its deliveries do not say their variant and decision"
            if run_id in decisions.unreadable
            else "no decision was delivered for it"
        )
        f.unknown(
            f"approval {_aid(a)} of run {run_id} is recorded as approved, but {why}, so "
            "whether the approver genuinely approved it cannot be told",
            [a.index, *decisions.unreadable.get(run_id, [])],
        )
        f.count("authenticity_unjudged")
        return
    if decisions.genuine_approvals(run_id, approval_id):
        f.count("genuinely_approved")
        return
    refused = decisions.refused_approvals(run_id, approval_id)
    if refused and not signed:
        f.unknown(
            f"approval {_aid(a)} of run {run_id} was approved only by a message the runner "
            f"meant as {refused[0].variant}, and the adapter does not declare signed "
            "approvals (the approvals capability), so it may have been genuine",
            [a.index, refused[0].index],
        )
        f.count("authenticity_unjudged")
        return
    genuine = [d for d in decisions.by_run[run_id] if d.genuine]
    said = f"the approver said {_said(genuine)}" if genuine else "the approver said nothing"
    f.fail(
        f"approval {_aid(a)} of run {run_id} is recorded as approved, but {said}; "
        f"only messages it must refuse approved it ({_said(refused)})",
        [a.index, *(d.index for d in refused), *(d.index for d in genuine)],
    )
    f.count("approved_without_approver")


def _check_approved_before(f: Findings, decisions: Decisions, eff: Effect, a: Event) -> None:
    """A gated effect must follow the approver's genuine approval. An effect
    with no genuine approval at all is reported on its approval record."""
    run_id = eff.run_id or ""
    approval_id = vstr(a, "approval_id")
    if not decisions.by_run.get(run_id):
        return  # unknown, said on the record
    if decisions.genuine_approvals(run_id, approval_id, before=eff.index):
        return
    later = decisions.genuine_approvals(run_id, approval_id)
    if not later:
        return  # no genuine approval at all: failed (or unknown) on the record
    early = [d for d in decisions.by_run[run_id] if d.index < eff.index]
    f.fail(
        f"effect #{eff.index} applied {eff.kind} for run {run_id} before the approver's "
        f"approval was delivered (#{later[0].index}); by then only {_said(early)} had "
        "been delivered",
        [eff.index, a.index, later[0].index, *(d.index for d in early)],
    )
    f.count("applied_before_approval")


def _check_expiry(f: Findings, a: Event) -> None:
    """An approval recorded as approved after it expired."""
    decided, expires = vnum(a, "decided_at"), vnum(a, "expires_at")
    if decided is None or expires is None:
        if a.value.get("decided_at") is not None and decided is None:
            raw = short(a.value["decided_at"])
            f.note(f"approval {_aid(a)} has an unreadable decided_at {raw}")
        return
    f.count("expiry_judged")
    if decided >= expires:
        when = (
            f"at {decided!r}, the instant it expired (the first instant it no longer counts)"
            if decided == expires
            else f"at {decided:g}, after it expired at {expires:g}"
        )
        f.fail(
            f"approval {_aid(a)} of run {vstr(a, 'run_id')} was recorded as approved {when}: "
            "the runtime accepted an expired decision",
            [a.index],
        )
        f.count("approved_after_expiry")


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
