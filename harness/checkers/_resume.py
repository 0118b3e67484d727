"""``resume_equivalence``: a run that survived faults ends as if there had been none."""

from __future__ import annotations

from ..history import History
from ..model import PropertyResult
from ._base import Findings, final_state, guarded, plural
from ._effects import (
    lost_answer,
    lost_answer_text,
    parse_effects,
    requests_of,
    stopped_for_operator,
)
from ._excuses import count_excuses, excused_runs
from ._runs import (
    divergence,
    known_runs,
    migration_touched,
    output_diff,
    parked_for_schema,
    repeat_refs,
    surplus_effects,
)

NAME = "resume_equivalence"


@guarded(NAME, uses_oracle=True, compares=True)
def check_resume_equivalence(history: History, oracle: History | None) -> PropertyResult:
    """Each run ends as its fault-free oracle run did: same state, output, effects.

    A failure usually means: a resumed run redid or skipped work, or ended
    with another state or output than an uninterrupted run: a step repeated
    after a crash, a decision lost with the message that carried it.

    Promises, for every run the history submitted or saw end, except runs
    a fault excuses (named in a ``fault`` event's ``runs`` list *and* shown
    by the history to be within the fault's reach: see
    :mod:`harness.checkers._excuses`; counted as ``excluded_by_fault``, and
    by the fault's kind as ``excused_by_KIND``; a run named without that
    evidence is judged, counted as ``not_excused_KIND``): the final
    normalized ``state`` and the ``output`` equal the oracle's; the counted
    effects' (kind, request hash) are equal as multisets for exactly-once
    and at-most-once kinds and as sets for at-least-once kinds. An
    at-least-once request the world applied twice got a new reference the
    second time: an output that differs from the oracle's only in carrying
    the repeat's reference instead of the first one's is equal (counted as
    ``at_least_once_new_ref``; an exactly-once kind's new reference, or any
    other changed field, still diverges). Legitimate divergences, counted
    and not failed: a run that ends ``needs_operator``
    while the oracle's completed, when the oracle run applied an at-most-once
    effect and this run applied nothing the oracle did not (counted as
    ``needs_operator``); a run touched by a ``migration`` fault that ends
    ``parked`` with an error naming the schema/version (``parked_by_migration``;
    ``migration_safety`` judges those runs in full).

    Cannot see: anything without the oracle (``unknown``); a run that has no
    final event here or in the oracle (``unknown`` for that run: see
    ``progress``); intermediate states -- only ends are compared.
    """
    f = Findings(NAME)
    f.zero("runs", "equivalent", "excluded_by_fault", "needs_operator")
    if oracle is None:
        f.unknown("no oracle history was given, so there is nothing to compare with")
        return f.result("")
    decl = history.declaration()
    effects, bad = parse_effects(history)
    oracle_effects, obad = parse_effects(oracle)
    for e in bad:
        f.unknown(
            f"effect #{e.index} lacks a kind, a request_hash or a boolean 'applied'", [e.index]
        )
    if obad:
        f.unknown(f"{plural(len(obad), 'oracle effect')} cannot be read")
    excluded = excused_runs(history)
    touched = migration_touched(history)
    finals, ofinals = history.finals(), oracle.finals()
    runs = known_runs(history)
    count_excuses(excluded, runs, f)
    for run_id in runs:
        if run_id in excluded:
            f.count("excluded_by_fault")
            continue
        f.count("runs")
        final, ofinal = finals.get(run_id), ofinals.get(run_id)
        if final is None:
            f.unknown(f"run {run_id} has no final event to compare")
            continue
        if ofinal is None:
            f.unknown(f"the oracle has no final state for run {run_id}", [final.index])
            continue
        mine, theirs = requests_of(effects, run_id), requests_of(oracle_effects, run_id)
        state, ostate = final_state(final), final_state(ofinal)
        if run_id in touched and parked_for_schema(final):
            f.count("parked_by_migration")
            continue
        lost = lost_answer(history, run_id, final)
        if lost is None and stopped_for_operator(state, ostate, mine, theirs, decl):
            f.count("needs_operator")
            continue
        repeats = repeat_refs(effects, oracle_effects, run_id, decl)
        diffs = divergence(final, ofinal, mine, theirs, decl, repeats)
        if lost is not None:
            diffs = [lost_answer_text(run_id, lost), *diffs]
        if not diffs:
            f.count("equivalent")
            if output_diff(final.value.get("output"), ofinal.value.get("output")) is not None:
                # Equal only once a repeat's new reference is set aside.
                f.count("at_least_once_new_ref")
            continue
        f.fail(
            f"run {run_id} diverged from the oracle (final #{final.index}, oracle final "
            f"#{ofinal.index}): {'; '.join(diffs)}",
            [final.index, *surplus_effects(effects, run_id, mine, theirs, decl)],
        )
        f.count("diverged")
    only_oracle = [r for r in ofinals if r not in finals and r not in runs]
    if only_oracle:
        f.count("only_in_oracle", len(only_oracle))
        f.note(
            f"{plural(len(only_oracle), 'oracle run')} never appeared here "
            f"({', '.join(only_oracle[:3])}{', ...' if len(only_oracle) > 3 else ''})"
        )
    return f.result(
        f"{f.counts['equivalent']} of {plural(f.counts['runs'], 'run')} ended exactly as in the "
        f"oracle; {f.counts['needs_operator']} stopped at needs_operator on an at-most-once "
        f"effect and {f.counts['excluded_by_fault']} were excluded because a fault may change "
        "their outcome",
        evidence=f.counts["runs"],
    )
