"""Effects as the world recorded them, grouped and compared; approval matching.

The world is the one place that sees every effect, so these helpers read only
``effect`` events (the world's records), never the runtime's own account.
A *logical operation* is (tenant, run id, kind, request hash): one thing the
run meant to do, however many times it was attempted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..history import Declaration, History
from ..model import OPERATOR_ANSWER, Event, EventF, RunState
from ._base import final_state, short, vnum, vstr

#: outcomes after which the caller cannot know whether the effect happened
IN_DOUBT = frozenset(
    {"unknown_applied", "unknown_not_applied", "killed_before_apply", "killed_after_apply"}
)

LogicalOp = tuple[str | None, str | None, str, str]
Request = tuple[str, str]


@dataclass(frozen=True)
class Effect:
    """One ``effect`` event, typed."""

    index: int
    tenant: str | None
    run_id: str | None
    kind: str
    request_hash: str
    outcome: str | None
    applied: bool
    deduplicated: bool
    side_effect: bool
    at: float | None
    #: the reference the world answered with (None: none recorded)
    external_ref: str | None = None
    #: the idempotency key the call carried (None: none)
    idempotency_key: str | None = None
    #: the request's parameters as the world recorded them (None: not
    #: recorded); ``request_hash`` is what identifies the request
    params: Any = field(default=None, compare=False, hash=False)

    @property
    def counted(self) -> bool:
        """A new side effect in the world (what exactly-once counts)."""
        return self.applied and self.side_effect

    @property
    def op(self) -> LogicalOp:
        return (self.tenant, self.run_id, self.kind, self.request_hash)

    @property
    def request(self) -> Request:
        return (self.kind, self.request_hash)


def parse_effects(history: History) -> tuple[list[Effect], list[Event]]:
    """Every ``effect`` event as an :class:`Effect`, and the ones that cannot be
    read (no kind, no request hash, ``applied`` not a bool)."""
    good: list[Effect] = []
    bad: list[Event] = []
    for e in history.by_f(EventF.EFFECT):
        v = e.value
        kind = vstr(e, "kind")
        if kind is None and isinstance(v.get("service"), str) and isinstance(v.get("action"), str):
            kind = f"{v['service']}.{v['action']}"
        req = vstr(e, "request_hash")
        applied = v.get("applied")
        side_effect = v.get("side_effect", True)
        if kind is None or req is None or not isinstance(applied, bool):
            bad.append(e)
            continue
        good.append(
            Effect(
                index=e.index,
                tenant=vstr(e, "tenant"),
                run_id=vstr(e, "run_id"),
                kind=kind,
                request_hash=req,
                outcome=vstr(e, "outcome"),
                applied=applied,
                deduplicated=v.get("deduplicated") is True,
                side_effect=side_effect is not False,
                at=vnum(e, "at"),
                external_ref=vstr(e, "external_ref"),
                idempotency_key=vstr(e, "idempotency_key"),
                params=v.get("request"),
            )
        )
    return good, bad


def foreign_answers(effects: Iterable[Effect]) -> list[tuple[Effect, Effect]]:
    """Every deduplicated answer to a run whose first application belongs to
    another run: (the answer, that application), in history order.

    The world deduplicates by (service, tenant, idempotency key) and answers
    a repeat with the first applied request's response, so it knows whose
    effect an answer is: the first application with that key (or, for a
    record without a key, the first applied effect with the answer's
    external ref). An answer to run B that is run A's effect means the
    world never did anything for B's request: two runs shared a key (one
    derived from the request's content, say), and B's effect is lost, while
    B holds A's answer as its own. Neither the runtime's account nor the
    oracle is read: the attribution is the world's."""
    first: dict[tuple[str, str | None, str], Effect] = {}
    by_ref: dict[str, Effect] = {}
    out: list[tuple[Effect, Effect]] = []
    for eff in effects:
        service = eff.kind.partition(".")[0]
        key = None if eff.idempotency_key is None else (service, eff.tenant, eff.idempotency_key)
        if eff.applied:
            if key is not None:
                first.setdefault(key, eff)
            if eff.external_ref is not None:
                by_ref.setdefault(eff.external_ref, eff)
            continue
        if not eff.deduplicated:
            continue
        orig = first.get(key) if key is not None else None
        if orig is None and eff.external_ref is not None:
            orig = by_ref.get(eff.external_ref)
        if (
            orig is not None
            and eff.run_id is not None
            and orig.run_id is not None
            and orig.run_id != eff.run_id
        ):
            out.append((eff, orig))
    return out


def lost_to_another_run(history: History, effects: list[Effect]) -> list[tuple[Effect, Effect]]:
    """The foreign answers (:func:`foreign_answers`) that leave a completed
    run without its effect: the run ended ``completed`` and the world never
    applied that request (kind and request hash) for it. A run that ended
    otherwise may rightly not have had it; one that applied the request
    itself too has had it."""
    finals = history.finals()
    out: list[tuple[Effect, Effect]] = []
    for answer, first in foreign_answers(effects):
        final = finals.get(answer.run_id) if answer.run_id is not None else None
        if final is None or final_state(final) is not RunState.COMPLETED:
            continue
        own = any(
            eff.counted and eff.run_id == answer.run_id and eff.request == answer.request
            for eff in effects
        )
        if not own:
            out.append((answer, first))
    return out


def lost_text(answer: Effect, first: Effect) -> str:
    """Why an effect answered with another run's is lost, for a checker's message."""
    key = f"idempotency key {answer.idempotency_key!r}" if answer.idempotency_key else "its ref"
    return (
        f"run {answer.run_id} completed, but its {answer.kind} request "
        f"{answer.request_hash[:12]} was never applied for it: the world answered it "
        f"(effect #{answer.index}) with run {first.run_id}'s effect #{first.index}, "
        f"deduplicated under the same {key}; the two runs shared a key, and "
        f"run {answer.run_id}'s effect was lost"
    )


def applied_by_op(effects: Iterable[Effect]) -> dict[LogicalOp, list[Effect]]:
    """Counted effects grouped by logical operation, in history order."""
    out: dict[LogicalOp, list[Effect]] = {}
    for eff in effects:
        if eff.counted:
            out.setdefault(eff.op, []).append(eff)
    return out


def requests_of(effects: Iterable[Effect], run_id: str) -> Counter[Request]:
    """Multiset of (kind, request hash) of the counted effects of ``run_id``."""
    return Counter(eff.request for eff in effects if eff.counted and eff.run_id == run_id)


def compare_requests(
    mine: Counter[Request], oracle: Counter[Request], decl: Declaration | None
) -> list[str]:
    """How ``mine`` differs from ``oracle``, by each kind's declared delivery:
    multisets for exactly-once and at-most-once kinds, sets for at-least-once
    kinds (a redelivery is allowed, a missing or foreign request is not)."""
    diffs: list[str] = []
    for req in sorted(set(mine) | set(oracle)):
        kind, digest = req
        a, b = mine.get(req, 0), oracle.get(req, 0)
        if delivery(decl, kind) == "at_least_once":
            a, b = min(a, 1), min(b, 1)
        if a != b:
            diffs.append(f"{kind} request {digest[:12]} applied {a}x here, {b}x in the oracle")
    return diffs


def is_sub_multiset(mine: Counter[Request], oracle: Counter[Request]) -> bool:
    return all(oracle.get(req, 0) >= n for req, n in mine.items())


def delivery(decl: Declaration | None, kind: str) -> str:
    return "exactly_once" if decl is None else decl.delivery_for(kind)


# -- approvals ---------------------------------------------------------------------


def approval_actions(decl: Declaration | None, kind: str) -> frozenset[str]:
    """Approval actions that may authorize ``kind``: the kind itself and the
    action the declaration maps it to."""
    actions = {kind}
    if decl is not None and kind in decl.needs_approval:
        actions.add(decl.needs_approval[kind])
    return frozenset(actions)


def match_approval(
    eff: Effect, approvals: Iterable[Event], actions: frozenset[str]
) -> tuple[Event | None, str | None]:
    """(the approval that authorizes ``eff``, None) or (the closest candidate
    or None, why nothing authorizes it). An approval authorizes an effect when
    it is for the same run, ``approved``, for one of ``actions``, for the
    effect's exact parameters (``params_hash == request_hash``) and not
    expired when the effect happened (``at < expires_at``: ``expires_at`` is
    the first instant the approval no longer counts, as a JWT's ``exp``,
    RFC 7519 4.1.4; a missing ``expires_at`` never expires)."""
    best: tuple[int, int, Event, str] | None = None
    for a in approvals:
        if vstr(a, "run_id") != eff.run_id:
            continue
        checks: list[tuple[bool, str]] = [
            (
                vstr(a, "action") in actions,
                f"approval {_aid(a)} is for {short(a.value.get('action'))}, not {eff.kind}",
            ),
            (
                a.value.get("decision") == "approved",
                f"approval {_aid(a)} is {short(a.value.get('decision'))}, not approved",
            ),
            (
                # The runtime may declare how an approval given under older
                # code reads in today's request shape (a migration); both the
                # signed hash and that declared reading count.
                eff.request_hash in (vstr(a, "params_hash"), vstr(a, "effective_params_hash")),
                f"approval {_aid(a)} was given for other parameters "
                f"(params_hash {str(a.value.get('params_hash'))[:12]}, "
                f"request {eff.request_hash[:12]})",
            ),
            _expiry_check(eff, a),
        ]
        failed = [why for ok, why in checks if not ok]
        if not failed:
            return a, None
        passed = len(checks) - len(failed)
        if best is None or (passed, a.index) > (best[0], best[1]):
            best = (passed, a.index, a, failed[0])
    if best is None:
        return None, f"run {eff.run_id} has no approval record"
    return best[2], best[3]


def _expiry_check(eff: Effect, a: Event) -> tuple[bool, str]:
    expires = a.value.get("expires_at")
    if expires is None:
        return True, ""
    exp = vnum(a, "expires_at")
    if exp is None:
        return False, f"approval {_aid(a)} has an unreadable expires_at {short(expires)}"
    if eff.at is None:
        return False, f"effect #{eff.index} has no time 'at' to compare with the expiry"
    return (
        eff.at < exp,
        f"approval {_aid(a)} expired at {exp!r}, the effect happened at {eff.at!r}"
        + (" (the first instant it no longer counts)" if eff.at == exp else ""),
    )


def _aid(a: Event) -> str:
    return str(a.value.get("approval_id") or f"#{a.index}")


def approvals_by_run(history: History) -> Mapping[str, list[Event]]:
    out: dict[str, list[Event]] = {}
    for a in history.by_f(EventF.APPROVAL):
        run_id = vstr(a, "run_id")
        if run_id is not None:
            out.setdefault(run_id, []).append(a)
    return out


def fmt_op(op: LogicalOp) -> str:
    tenant, run_id, kind, digest = op
    return f"{kind} request {digest[:12]} of run {run_id} (tenant {tenant})"


def stopped_for_operator(
    state: object,
    ostate: object,
    mine: Counter[Request],
    theirs: Counter[Request],
    decl: Declaration | None,
) -> bool:
    """A legitimate divergence: the run stopped at ``needs_operator`` on an
    at-most-once effect whose outcome it could not know, where the oracle
    completed, and it applied nothing the oracle did not."""
    return (
        str(state) == "needs_operator"
        and str(ostate) == "completed"
        and any(delivery(decl, kind) == "at_most_once" for kind, _ in theirs)
        and is_sub_multiset(mine, theirs)
    )


def lost_answer(history: History, run_id: str, final: Event) -> Event | None:
    """The operator's answer ``run_id`` lost: the last answer the runner
    delivered for the wait the run still ends on, when the run called no
    service after it (a run told "not applied" that sent again, and whose
    resend ended in doubt too, stops there legitimately). None otherwise."""
    waiting = final.value.get("waiting_on")
    if waiting is None or str(final_state(final)) != "needs_operator":
        return None
    last: Event | None = None
    for e in history.by_run(run_id):
        if e.index > final.index:
            break
        if (
            e.f is EventF.DELIVER
            and e.type == "invoke"
            and e.value.get("variant") == OPERATOR_ANSWER
            and e.value.get("waiting_on") == waiting
        ):
            last = e
        elif e.f is EventF.EFFECT and last is not None:
            last = None
    return last


def lost_answer_text(run_id: str, answer: Event) -> str:
    """Why a lost answer is a finding, for a checker's message."""
    said = "applied" if answer.value.get("applied") else "not applied"
    return (
        f"run {run_id} still waits on {answer.value.get('waiting_on')} after the "
        f"operator's answer #{answer.index} (the world's record: {said}) and called no "
        "service since: the answer was lost or ignored"
    )
