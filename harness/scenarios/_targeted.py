"""Targeted schedules: the faults that break durable runtimes, aimed first.

Before sampling, a search runs a short, fixed list of one-run scenarios, each
one fault aimed where the workflow's site profile (:mod:`harness.scenarios._profile`)
says it hurts most: the world killing a worker right after it applied an
effect, a decision delivered twice, memory planted before the run reads it, a
kill inside the first commit after a decision, a zombie paused right before an
effect, an operator cancelling a run a worker holds, a long outage between an
approval and its effect, an upgrade between
crash and resume, the clock passing a wait's deadline with what the run
waits for withheld, two identical runs of one tenant, a decision delivered
while a worker holds the run between its inbox read and the commit that
acknowledges it, a kill after the run's last durable write and before the
record that it ended, a model call rate-limited (or its reply lost) right
before an effect that the world then kills the worker after, every model
fault once. Then the systematic sweeps, each bounded: every other
world fault mode at every effect (applied then timed out, timed out before
applying, refused, killed before applying, slow), the lookup that
reconciles an effect in doubt refused or its answer lost (at every effect
whose service offers one), a persistent outage of
each service, every kind of planted memory before and after the clock
moves (at a key the run reads and at one it writes), a kill right after
every commit of a fault-free run (those that hand work or a message to
another run first), and two workers released together from a barrier.
Jepsen's nemeses are aimed the same way; Hypothesis's
explicit ``@example`` runs before generation for the same reason: the schedules
that matter most should not wait for the dice.

Then the *commit-fault pairs* (:func:`commit_fault_pairs`): for every kind
of commit the fault-free run made (decision, intent, sent-mark, result,
checkpoint, inbox acknowledgement, the last) and every fault that can hit a
commit (a kill inside it and right after it, an operator's write and a
delivery while the
worker holds the run at its door, a storage cut, a reset, a lost
acknowledgement), one schedule; an earlier category's schedule with the
same steps serves its pair, and the rest come last. A plan cut short of
them runs them anyway, past its targeted share (:func:`targeted_plan`), so
every plan that tries every kind once covers every pair once.
:func:`commit_fault_plan` says which schedule covers each pair, and why a
pair has none.

The list is built only from what the adapter declares (workflows, effects,
capabilities, crash points) and from the profile's site order, never from a
runtime's site names. Every scenario is nearly minimal (one run, one fault),
so Hypothesis does not shrink a failure; the shrink phase only deletes the
steps it did not need (``harness.session._drop``: the zombie schedules'
``ContinueWorker`` before the final quiesce, which continues paused
workers anyway).

The order is breadth-first: the first scenario of every category, then the
second of every category, and so on; within a category, the fault's own
variants (kinds of planted memory, kinds of bad decision, boundaries before
a call, ends of a commit) come before the same variant on another workflow
or effect. Nothing tells the harness which class of bug a runtime has, so no
class waits for another one's sweep. The systematic sweeps share two places
at the end of each round (round robin among themselves), so the categories
aimed first keep their pace and each sweep still begins within three
rounds. On the
reference runtime the first round is twelve scenarios, and eight of its
twelve seeded bugs fail within its first ten (``python benchmarks/detection.py``).
"""

from __future__ import annotations

from ..model import Scenario
from ._schedules._common import _aim, _interleave, _steps, schedule_kind
from ._schedules._registry import categories
from ._schedules.pairs import commit_fault_pairs
from ._universe import Universe

#: places the systematic sweeps take in each breadth-first round
SWEEP_SLOTS = 2
#: the commit faults that act on a worker's storage connections
CONNECTION_FAULTS = ("storage_cut", "reset", "ack_lost", "commit_lost")


def _pair_fault(name: str) -> str | None:
    """The fault of a commit-fault pair's own schedule
    (``targeted/WF/commit_fault/KIND/FAULT/...``), else None."""
    parts = name.split("/")
    return parts[4] if len(parts) > 4 and parts[2] == "commit_fault" else None


def targeted(u: Universe) -> list[Scenario]:
    """The targeted schedules for ``u``, in the order they should run."""
    return _targeted(u)[0]


def _targeted(u: Universe) -> tuple[list[Scenario], int]:
    """:func:`targeted`, and how many of them open it as the first of a
    category or of a kind of schedule (the rest follow them)."""
    aim = _aim(u)
    # Each family's module registers its categories with their places in a
    # round (``@category``, ``@sweep``: ``_schedules/_registry``).
    cats = [c.schedules(aim) for c in categories()]
    # The systematic sweeps take SWEEP_SLOTS places in each round, round
    # robin among themselves: each one's first scenario still comes within
    # the first rounds, and the categories above keep their pace.
    sweep_groups = [c.schedules(aim) for c in categories(sweeps=True)]
    sweeps = _interleave(sweep_groups)
    cats += [sweeps[i::SWEEP_SLOTS] for i in range(SWEEP_SLOTS)]
    # Every (commit kind x fault) pair the trace offers, once: a schedule of
    # a category above with the same steps serves its pair (a kill in the
    # decision's commit, say); the first pair no category holds is a
    # category of its own, in the first round.
    by_steps: dict[str, Scenario] = {}
    for s in _interleave(cats):
        by_steps.setdefault(_steps(s), s)
    pairs: list[Scenario] = []
    for pair in commit_fault_pairs(u):
        if pair.scenario is not None:
            pairs.append(by_steps.setdefault(_steps(pair.scenario), pair.scenario))
    cats.append([p for p in pairs if "/commit_fault/" in p.name][:1])
    # The connection faults at a commit (a storage cut, a reset, a lost
    # acknowledgement, a lost COMMIT: only where the deployment offers them,
    # Postgres and Redis) no other category aims, so each is a category of
    # its own, one commit kind a round: placed last, a plan cut by its
    # budget never reached them.
    for fault in CONNECTION_FAULTS:
        cats.append([p for p in pairs if _pair_fault(p.name) == fault])
    # Every category's first scenario (each sweep's too), and the first of
    # every kind of schedule within them (each world fault mode, each kind
    # of bad decision...), before any category's second, so a plan the
    # budget cuts short still tries every kind once (a kind none of whose
    # schedules ran makes the run inconclusive); then every pair, so a
    # short plan covers each; the rest keep the order above.
    ordered = _interleave(cats)
    firsts = {g[0].name for g in [*cats, *sweep_groups] if g}
    kinds = {schedule_kind(s.name) for s in ordered if s.name in firsts}
    kind_firsts: set[str] = set()
    for s in ordered:
        if schedule_kind(s.name) not in kinds:
            kinds.add(schedule_kind(s.name))
            kind_firsts.add(s.name)
    head = [s for s in ordered if s.name in firsts]
    head += [s for s in ordered if s.name in kind_firsts]
    # The pairs no category holds go last: placed before the rest they
    # pushed the later workflows' zombie schedules (no-fencing) and the
    # world-mode sweeps out of the ci plan's 120 targeted places. A plan
    # that ends first names the pairs it did not reach.
    ordered = head + [s for s in ordered if s.name not in firsts | kind_firsts] + pairs
    out: list[Scenario] = []
    seen: set[str] = set()
    for s in ordered:
        if s.name not in seen:
            seen.add(s.name)
            out.append(s)
    return out, len({s.name for s in head})


def targeted_plan(u: Universe, share: int, room: int) -> tuple[list[Scenario], int]:
    """The targeted schedules a plan of ``share`` targeted places runs: the
    first ``share`` of :func:`targeted`, then, in
    :func:`~._schedules.pairs.commit_fault_pairs`' breadth-first order (each
    fault's first kinds before any fault's later ones), up to ``room``
    schedules that aim a (commit kind x fault) pair none of those aims. The
    pairs come last in :func:`targeted` (placed earlier, they pushed other
    categories' schedules out of a short plan), so without the room a plan
    of 120 targeted places reached 4 of the 16 pairs the reference offers
    on SQLite. The room is given only to a share that runs every
    category's and every kind's first schedule (the pairs rank after them).
    Returns the schedules and how many the room added."""
    targets, firsts = _targeted(u)
    head = targets[: max(share, 0)]
    # The pairs rank after every kind's first schedule: a plan too short to
    # try every kind once is a quick one, and its report names the pairs
    # it did not reach.
    if room <= 0 or share < firsts:
        return head, 0
    covered = {_steps(s) for s in head}
    later: dict[str, Scenario] = {}
    for s in targets[share:]:
        later.setdefault(_steps(s), s)
    # one list per fault, its kinds in trace order, taken round robin: a
    # short room tries every fault before any fault's second kind
    by_fault: dict[str, list[Scenario]] = {}
    for pair in commit_fault_pairs(u):
        key = _steps(pair.scenario) if pair.scenario is not None else None
        if key is not None and key not in covered and key in later:
            covered.add(key)
            by_fault.setdefault(pair.fault, []).append(later[key])
    extra = _interleave(list(by_fault.values()))[:room]
    return head + extra, len(extra)


def commit_fault_plan(
    u: Universe, plan: list[Scenario] | None = None
) -> list[tuple[str, str, str | None, str | None]]:
    """(kind, fault, schedule, why) for every pair: ``schedule`` names the
    schedule of ``plan`` (default: :func:`targeted`) that aims it, which
    may be another category's with the same steps; ``why`` says why none
    does."""
    plan = targeted(u) if plan is None else plan
    names: dict[str, str] = {}
    for s in plan:
        names.setdefault(_steps(s), s.name)
    out: list[tuple[str, str, str | None, str | None]] = []
    for p in commit_fault_pairs(u):
        if p.scenario is None:
            out.append((p.kind, p.fault, None, p.why))
            continue
        name = names.get(_steps(p.scenario))
        out.append((p.kind, p.fault, name, None if name else "not in the plan"))
    return out


def commit_pair_rows(u: Universe, share: int, room: int = 0) -> list[dict[str, str | None]]:
    """:func:`commit_fault_plan` of a plan that runs :func:`targeted_plan`
    (``share`` targeted places, ``room`` more for the pairs; none:
    ``--no-targeted``), as the report's rows: ``kind``, ``fault``,
    ``schedule``, ``why``."""
    if share <= 0:
        return []
    return [
        {"kind": k, "fault": f, "schedule": name, "why": why}
        for k, f, name, why in commit_fault_plan(u, targeted_plan(u, share, room)[0])
    ]
