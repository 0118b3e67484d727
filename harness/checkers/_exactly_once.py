"""``exactly_once_effects``: the world saw each logical effect as often as promised."""

from __future__ import annotations

from ..history import History
from ..model import Event, EventF, PropertyResult, RunState
from ._base import DISAGREED, Findings, final_state, guarded, oracle_disagreement, plural, vstrs
from ._effects import (
    IN_DOUBT,
    Effect,
    LogicalOp,
    applied_by_op,
    delivery,
    fmt_op,
    lost_text,
    lost_to_another_run,
    parse_effects,
)

NAME = "exactly_once_effects"


@guarded(NAME, uses_oracle=True)
def check_exactly_once_effects(history: History, oracle: History | None) -> PropertyResult:
    """Each logical effect happened in the world as often as the runtime declared.

    A failure usually means: a call was sent again after a crash, a timeout
    or a lost reply without an idempotency key the service honours, or
    before the intent to make it was durable (nothing to reconcile
    against).

    Promises, judged from the world's ``effect`` records only (never the
    runtime's): counted effects (``applied`` and ``side_effect``) grouped by
    logical operation (tenant, run, kind, request hash) number at most one for
    ``exactly_once`` kinds (the default for undeclared kinds) and for
    ``at_most_once`` kinds; ``at_least_once`` duplicates are allowed and
    counted. Repeats the world absorbed by idempotency (``deduplicated``) are
    counted, never failed -- unless the repeat is another run's: a run that
    ended ``completed`` and whose request the world answered with another
    run's application (deduplicated under the same idempotency key, see
    ``foreign_answers``) and never applied for it lost its effect, whatever
    the oracle did (both twins of one tenant share the oracle's deployment,
    and its mistake). No counted effect exists for a run whose
    submission certainly failed, nor -- for a kind that needs approval -- for
    a run that ended ``cancelled``. With an oracle: an ``at_most_once``
    operation the oracle applied once must not be silently missing from a
    run that ended ``completed`` (``unknown`` instead of ``fail`` when the
    workload's fault-free runs disagree with each other: another of them may
    have done without it).

    Cannot see: whether an exactly-once effect that never happened *should*
    have (that is ``resume_equivalence``); a cancellation that came after a
    legitimately approved effect (a cancelled approval-gated run with the
    effect is always reported, unless an ``operator_cancel`` fault named it:
    a call already under way when an operator cancels cannot be recalled);
    effects that bypassed the world.
    """
    f = Findings(NAME)
    f.zero("applied_effects", "logical_ops", "absorbed_duplicates", "at_least_once_duplicates")
    decl = history.declaration()
    if decl is None:
        f.note("No declaration was recorded, so every kind was judged as exactly_once")
    elif decl.problems:
        f.unknown(f"the declaration is malformed ({'; '.join(decl.problems)})", [decl.index])
    effects, malformed = parse_effects(history)
    for e in malformed:
        f.unknown(
            f"effect #{e.index} lacks a kind, a request_hash or a boolean 'applied'", [e.index]
        )
    f.count("absorbed_duplicates", sum(1 for eff in effects if eff.deduplicated))
    f.count("unknown_outcomes", sum(1 for eff in effects if eff.outcome in IN_DOUBT))

    groups = applied_by_op(effects)
    f.count("logical_ops", len(groups))
    f.count("applied_effects", sum(len(g) for g in groups.values()))
    for op, group in groups.items():
        mode = delivery(decl, op[2])
        if len(group) <= 1:
            continue
        if mode == "at_least_once":
            f.count("at_least_once_duplicates", len(group) - 1)
            continue
        f.fail(
            f"{fmt_op(op)} was applied {len(group)} times "
            f"(effects {', '.join('#' + str(g.index) for g in group)}), but {op[2]} is {mode}",
            [g.index for g in group],
        )
        f.count("duplicated_ops")

    for answer, first in lost_to_another_run(history, effects):
        f.fail(lost_text(answer, first), [first.index, answer.index])
        f.count("lost_to_another_run")

    finals = history.finals()
    failed_submits = set(history.submitted_failed())
    needs_approval = decl.needs_approval if decl is not None else {}
    operator_cancelled = {
        run_id for e in history.faults("operator_cancel") for run_id in vstrs(e, "runs") or []
    }
    for op, group in groups.items():
        _tenant, run_id, kind, _digest = op
        if run_id in failed_submits:
            f.fail(
                f"run {run_id}'s submission failed, yet the world applied {fmt_op(op)} "
                f"(effect #{group[0].index})",
                [group[0].index, *_submit_fails(history, run_id)],
            )
            f.count("effects_without_run")
        final = finals.get(run_id) if run_id is not None else None
        if (
            final is not None
            and kind in needs_approval
            and final_state(final) is RunState.CANCELLED
            and run_id not in operator_cancelled
        ):
            f.fail(
                f"run {run_id} ended cancelled, yet the world applied {fmt_op(op)}, "
                f"which needs approval (effect #{group[0].index}, final #{final.index})",
                [group[0].index, final.index],
            )
            f.count("effects_of_cancelled_runs")

    if oracle is None:
        if any(delivery(decl, op[2]) == "at_most_once" for op in groups):
            f.note("Without an oracle, silently dropped at-most-once effects were not looked for")
    else:
        _silent_drops(f, history, oracle, groups)
    kinds = sorted({op[2] for op in groups})
    return f.result(
        f"Every one of {plural(len(groups), 'logical effect')} "
        f"({', '.join(kinds) or 'none'}) was applied as often as declared; "
        f"{f.counts['absorbed_duplicates']} repeats were absorbed by idempotency and "
        f"{f.counts['at_least_once_duplicates']} at-least-once duplicates were allowed",
        evidence=len(groups),
    )


def _submit_fails(history: History, run_id: str) -> list[int]:
    return [e.index for e in history.by_run(run_id) if e.f is EventF.SUBMIT and e.type == "fail"]


def _silent_drops(
    f: Findings, history: History, oracle: History, groups: dict[LogicalOp, list[Effect]]
) -> None:
    decl = history.declaration()
    finals = history.finals()
    oracle_effects, _ = parse_effects(oracle)
    # Compared by (run, kind), not by request hash: a fault that legitimately
    # changes a request's content (planted memory the run may read) must not
    # look like a drop; a completed run that never applied the kind at all is.
    applied_kinds = {(op[1], op[2]) for op in groups}
    untrusted_oracle = oracle_disagreement(oracle)
    for op, group in applied_by_op(oracle_effects).items():
        _tenant, run_id, kind, _digest = op
        if delivery(decl, kind) != "at_most_once" or len(group) != 1 or run_id is None:
            continue
        final = finals.get(run_id)
        done = final is not None and final_state(final) is RunState.COMPLETED
        if final is None or not done or (run_id, kind) in applied_kinds:
            continue
        text = (
            f"run {run_id} completed without {fmt_op(op)} ever being applied, while the "
            f"oracle applied it once"
        )
        witness = [final.index, *(e.index for e in history.by_run(run_id) if _is_attempt(e, kind))]
        if untrusted_oracle is not None:
            # Another fault-free run may well have done without it.
            f.unknown(
                f"{text}, but the fault-free runs of this workload disagree with each other "
                f"({untrusted_oracle.rstrip('.')}), so that proves no drop",
                witness,
            )
            f.count(DISAGREED)
            continue
        f.fail(
            f"{text}: the at-most-once effect was silently dropped "
            f"instead of surfacing as needs_operator",
            witness,
        )
        f.count("silently_dropped")


def _is_attempt(e: Event, kind: str) -> bool:
    return e.f is EventF.EFFECT and e.value.get("kind") == kind
