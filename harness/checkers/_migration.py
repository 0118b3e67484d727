"""``migration_safety``: a run read by other code ends right, or is parked loudly."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..history import History
from ..model import EventF, PropertyResult, RunState
from ._base import Findings, every, final_state, guarded, plural, short, vstrs
from ._effects import (
    Effect,
    Request,
    lost_answer,
    parse_effects,
    requests_of,
    stopped_for_operator,
)
from ._excuses import excused_runs
from ._runs import (
    divergence,
    migration_faults,
    migration_touched,
    parked_for_schema,
    repeat_refs,
    surplus_effects,
)

NAME = "migration_safety"


@guarded(NAME, uses_oracle=True, compares=True)
def check_migration_safety(history: History, oracle: History | None) -> PropertyResult:
    """Runs touched by a code-version switch lose nothing silently.

    A failure usually means: one release misread what another wrote: a
    payload not upgraded on read, a step renamed, added or reordered
    between releases while runs were in flight.

    Promises, for every run touched by a fired ``migration`` fault (named in
    its ``runs``; a fault without ``runs`` touches every run): either the run
    ends ``parked`` with an ``error`` that mentions the schema or version (it
    refused to read what it does not understand), or it ends in the oracle's
    state with the oracle's ``output`` and the same effect requests -- (kind,
    request hash) as multisets for exactly-once and at-most-once kinds, as
    sets for at-least-once kinds, so a field silently lost shows as another
    request hash or output. A run parked without naming the schema/version
    fails, and so does one *stranded*: parked for its schema although only an
    older release touched it (it submitted the run; no worker of other code
    ran it) and the oracle does not park it -- the new release must resume
    what the old one started. A run that ends ``retrying`` (the runtime
    keeps failing it, a replay that no longer matches the history, say)
    fails, with the runtime's message. No migration fault: nothing to judge.

    Where the adapter keeps definitions (``keeps_definitions``: a run
    finishes on the definition it started on), the oracle of a run an
    older release accepted is that run, accepted by that release and
    finished by today's code with no fault; the run must then also go
    through the same steps as the oracle's (the steps of its model
    contexts, as sets; with the ``context`` capability): a step the oracle
    never took, or one it took and the run skipped, is a run moved to
    another definition mid-flight (``steps_compared`` counts them).

    An effect a worker of the older release applied was requested in that
    release's shape, and later requests may carry the references the world
    gave it: for such a run, requests are compared by kind and count
    (``older_release_requests``) and the output by its keys, as today's
    oracle builds every request in today's shape.

    A run that *failed* after a fired world fault refused one of its calls
    (``reject``, ``unavailable``, a timeout) is left out
    (``excluded_by_other_fault``): giving up on a refusal the oracle never
    met is not the migration's doing.

    Cannot see: without an oracle, any run that did not park (``unknown``);
    a lost field that changes neither output nor any request; runs with no
    final event (``unknown``; ``progress`` reports them).
    """
    f = Findings(NAME)
    f.zero("touched", "parked", "equivalent")
    faults = migration_faults(history)
    if not faults:
        return f.result("No migration fault fired, so no run was read by another code version")
    touched = migration_touched(history)
    f.count("touched", len(touched))
    finals = history.finals()
    decl = history.declaration()
    effects, _ = parse_effects(history)
    oracle_effects, _ = parse_effects(oracle) if oracle is not None else ([], [])
    ofinals = oracle.finals() if oracle is not None else {}
    # Another fault (an approval left to expire, ...) may have changed a run's
    # outcome legitimately; only what migration alone explains is judged here.
    elsewhere = excused_runs(history, except_kind="migration")
    refused = refused_by_the_world(history)
    older = older_workers(history)
    kept = started_by_older_release(oracle) if oracle is not None else frozenset()
    for run_id, by in touched.items():
        if run_id in elsewhere:
            f.count("excluded_by_other_fault")
            continue
        final = finals.get(run_id)
        if run_id in refused and final is not None and final_state(final) is RunState.FAILED:
            # It failed after a service refused its call (a rejection, a
            # call in doubt): a cause the oracle never met, not a migration.
            f.count("excluded_by_other_fault")
            continue
        if final is None:
            f.unknown(f"run {run_id}, touched by migration fault #{by[0]}, has no final event", by)
            continue
        if final_state(final) is RunState.RETRYING:
            ofinal = ofinals.get(run_id)
            f.fail(
                f"run {run_id}, touched by migration fault #{by[0]}, is retried forever: the "
                f"runtime keeps failing it (final #{final.index}: raw status "
                f"{short(final.value.get('raw_status'))}, error "
                f"{short(final.value.get('error'), 300)}), while the oracle ends it "
                f"{ofinal.value.get('state') if ofinal is not None else 'unknown'}",
                [by[0], final.index],
            )
            f.count("retrying")
            continue
        if parked_for_schema(final):
            # Parking is the right answer for code that meets a payload newer
            # than itself (an older worker in a rolling deploy). A run only an
            # older *release* started, that today's code then parks, is
            # stranded: the new release never resumes it.
            older_worker = any(
                (ev := history.event(i)) is not None and ev.value.get("at") != "submit" for i in by
            )
            ofinal = ofinals.get(run_id)
            oracle_parks = ofinal is not None and final_state(ofinal) is RunState.PARKED
            if older_worker or oracle_parks:
                f.count("parked")
                continue
            f.fail(
                f"run {run_id}, started by an older release (migration fault #{by[0]}), is "
                f"stranded: today's code parked it instead of resuming it (final #{final.index}: "
                f"raw status {short(final.value.get('raw_status'))}, error "
                f"{short(final.value.get('error'), 200)}), while the oracle ends it "
                f"{ofinal.value.get('state') if ofinal is not None else 'unknown'}",
                [by[0], final.index],
            )
            f.count("stranded")
            continue
        if final_state(final) is RunState.PARKED:
            f.fail(
                f"run {run_id} was parked after migration fault #{by[0]} without saying why "
                f"(error {short(final.value.get('error'))} names no schema or version)",
                [by[0], final.index],
            )
            continue
        if oracle is None:
            f.unknown(f"run {run_id} did not park and there is no oracle to compare it with", by)
            continue
        ofinal = ofinals.get(run_id)
        if ofinal is None:
            f.unknown(f"the oracle has no final state for run {run_id}", [final.index])
            continue
        mine, theirs = requests_of(effects, run_id), requests_of(oracle_effects, run_id)
        state, ostate = final_state(final), final_state(ofinal)
        lost = lost_answer(history, run_id, final)
        if lost is None and stopped_for_operator(state, ostate, mine, theirs, decl):
            f.count("needs_operator")
            continue
        if older_release_applied(history, effects, run_id, older):
            # The older release built its requests in its own shape, the
            # world's references follow from them, and later requests carry
            # those references: today's oracle cannot match the run's
            # requests hash for hash. Judge them by kind and count, and the
            # output by its keys; the state as always.
            f.count("older_release_requests")
            mine, theirs = by_kind(mine), by_kind(theirs)
            out, oout = final.value.get("output"), ofinal.value.get("output")
            diffs = divergence(
                final.model_copy(update={"value": {**final.value, "output": _keys(out)}}),
                ofinal.model_copy(update={"value": {**ofinal.value, "output": _keys(oout)}}),
                mine,
                theirs,
                decl,
            )
        else:
            repeats = repeat_refs(effects, oracle_effects, run_id, decl)
            diffs = divergence(final, ofinal, mine, theirs, decl, repeats)
        if not diffs and run_id in kept:
            # The oracle started this run under the release that accepted
            # it (the adapter keeps definitions): the run must go through
            # the steps of that definition, no more and no fewer.
            diffs = step_difference(history, oracle, run_id)
            f.count("steps_compared")
        if not diffs:
            f.count("equivalent")
            continue
        f.fail(
            f"run {run_id}, touched by migration fault #{by[0]}, ended unlike the oracle "
            f"without parking (final #{final.index}, raw status "
            f"{short(final.value.get('raw_status'))}): {'; '.join(diffs)}",
            [by[0], final.index, *surplus_effects(effects, run_id, mine, theirs, decl)],
        )
        f.count("diverged")
    return f.result(
        f"{every(f.counts['touched'], 'run')} touched by "
        f"{plural(len(faults), 'migration fault')} ended safely: {f.counts['equivalent']} as "
        f"in the oracle, {f.counts['parked']} parked with a schema/version error",
        evidence=sum(
            f.counts.get(k, 0) for k in ("parked", "equivalent", "needs_operator", "diverged")
        ),
    )


#: world fault modes after which the calling run may rightly give up: the
#: service refused the call or its answer was lost
REFUSING_MODES = frozenset({"reject", "unavailable", "timeout_before_apply", "apply_then_timeout"})


def refused_by_the_world(history: History) -> frozenset[str]:
    """The runs a fired world fault refused a call of (``REFUSING_MODES``)."""
    return frozenset(
        str(e.value.get("run_id"))
        for e in history.faults()
        if e.value.get("kind") == "world_fault"
        and e.value.get("fired") is True
        and e.value.get("mode") in REFUSING_MODES
        and e.value.get("run_id") is not None
    )


def started_by_older_release(oracle: History) -> frozenset[str]:
    """The runs the oracle itself submitted to an older release (a
    ``migration`` fault at ``submit``: the adapter keeps definitions)."""
    return frozenset(
        str(r)
        for e in migration_faults(oracle)
        if e.value.get("at") == "submit"
        for r in vstrs(e, "runs") or []
    )


def steps_of(history: History, run_id: str) -> frozenset[str]:
    """The steps ``run_id`` built a model context at (``context`` events)."""
    return frozenset(
        str(e.value.get("step"))
        for e in history.by_f(EventF.CONTEXT)
        if e.value.get("run_id") == run_id and e.value.get("step") is not None
    )


def step_difference(history: History, oracle: History, run_id: str) -> list[str]:
    """How the steps ``run_id`` went through differ from the oracle's (empty
    when they are the same, or when either history shows none)."""
    mine, theirs = steps_of(history, run_id), steps_of(oracle, run_id)
    if not mine or not theirs or mine == theirs:
        return []
    out = []
    if extra := sorted(mine - theirs):
        out.append(f"it went through step(s) {', '.join(extra)} the oracle never took")
    if missing := sorted(theirs - mine):
        out.append(f"it skipped step(s) {', '.join(missing)} the oracle took")
    return [
        f"{' and '.join(out)}, although the oracle started it under the same release "
        "(the adapter keeps definitions: a run finishes on the definition it started on)"
    ]


def older_workers(history: History) -> frozenset[str]:
    """The workers that ran an older release's code (``code_version`` set)."""
    return frozenset(
        str(e.value.get("worker_id"))
        for e in history.by_f(EventF.WORKER)
        if e.type == "invoke" and e.value.get("code_version") is not None
    )


def older_release_applied(
    history: History, effects: list[Effect], run_id: str, older: frozenset[str]
) -> bool:
    """Whether a worker in ``older`` applied an effect of ``run_id`` (known
    from the world's record of the calling worker; an effect that names no
    worker counts as today's)."""
    for eff in effects:
        if eff.counted and eff.run_id == run_id:
            event = history.event(eff.index)
            if event is not None and event.value.get("worker_id") in older:
                return True
    return False


def by_kind(requests: Counter[Request]) -> Counter[Request]:
    """``requests`` counted by kind alone (the digest shown is 12 characters,
    as ``compare_requests`` shows digests)."""
    out: Counter[Request] = Counter()
    for (kind, _digest), n in requests.items():
        out[(kind, "of any shape")] += n
    return out


def _keys(output: Any) -> Any:
    return sorted(output) if isinstance(output, dict) else output
