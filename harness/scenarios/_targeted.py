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
record that it ended. Then the systematic sweeps, each bounded: every other
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

Right after every kind's first schedule come the *commit-fault pairs*
(:func:`commit_fault_pairs`): for every kind of commit the fault-free run
made (decision, intent, sent-mark, result, checkpoint, inbox
acknowledgement, the last) and every fault that can hit a commit (a kill
inside it, an operator's write and a delivery while the worker holds the
run at its door, a storage cut, a reset, a lost acknowledgement), one
schedule, so a short plan covers every pair once; an earlier category's
schedule with the same steps serves its pair. :func:`commit_fault_plan`
says which schedule covers each pair, and why a pair has none.

The list is built only from what the adapter declares (workflows, effects,
capabilities, crash points) and from the profile's site order, never from a
runtime's site names. Every scenario is already minimal (one run, one fault),
so a failure needs no shrinking.

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

from dataclasses import dataclass
from typing import Literal

from ..adapters import Capability, WorkflowSpec
from ..model import (
    AdvanceClock,
    Approve,
    ArmWorldFault,
    Cancel,
    ContinueWorker,
    CrashSpec,
    InjectMemory,
    NetworkFault,
    Quiesce,
    ReleaseWorkers,
    RunSpec,
    RunWorker,
    Scenario,
    Step,
    StorageFault,
    Submit,
)
from ..world import LOOKUP, LOOKUP_FAULT_MODES, SERVICES
from ._profile import COMMIT_KINDS, Commit, EffectSite, WorkflowProfile
from ._strategies import offers_lookup
from ._universe import TENANTS, Universe

#: a long outage: longer than any approval should live (a day and a bit)
OUTAGE_SECONDS = 90_000.0
#: in-transaction sites of the first commit after a decision, aimed at first
MAX_TXN_SITES = 8
#: boundaries before an effect at which a zombie is paused, nearest first
ZOMBIE_SITES = 4
#: places the systematic sweeps take in each breadth-first round
SWEEP_SLOTS = 2
#: the world fault modes tried at every effect besides ``kill_after_apply``
#: (its own category, first), in the order they are tried
WORLD_MODES = ("apply_then_timeout", "timeout_before_apply", "reject", "kill_before_apply", "slow")
#: how long a ``slow`` world fault holds the call (one worker: a delay, no race)
SLOW_SECONDS = 0.05
#: consecutive calls a persistent outage turns away: more than common retry
#: limits (a run that gives up is named, and excused), fewer than the
#: quiesce rounds, so the outage heals while a patient runtime still
#: retries (retrying with backoff until a service is back is a policy,
#: Temporal's default, not a bug) and its run must then complete
OUTAGE_CALLS = 8
#: every kind of planted memory, each before and after the clock moves
#: (not ``trusted``: a live, verified record of the tenant's own is no fault,
#: and may rightly change what the run is allowed to do)
MEMORY_KINDS = ("poisoned", "cross_tenant", "expired", "stale", "stale_reordered")
#: shapes of planted memory aimed at once, not swept with the clock
MEMORY_SHAPES = ("lapsed_newest", "untrusted_newest")
#: plants of each shape at most (on the first workflows with a memory target)
MAX_LAPSED = 1
#: memory schedules at most, first each (kind, when, key) once
MAX_MEMORY = 20
#: kills right after a commit at most (hand-offs first)
MAX_COMMIT_KILLS = 30
#: network fault schedules at most: a lost acknowledgement costs the worker
#: its network timeout (seconds, not the tenths a kill costs)
MAX_NETWORK = 10
#: network fault kinds on a reply, that only a proxy can inflict (Toxiproxy)
REPLY_KINDS = ("latency", "slow_reply", "cut_reply")


def _run(wf: WorkflowSpec, *, code_version: int | None = None) -> RunSpec:
    return RunSpec(
        run_id="r1",
        tenant="acme",
        workflow=wf.name,
        input=dict(wf.inputs[0]),
        code_version=code_version,
    )


def _scenario(name: str, run: RunSpec, *steps: Step) -> Scenario:
    return Scenario(name=f"targeted/{name}", steps=(Submit(run=run), *steps, Quiesce()))


def _paused(worker_id: str, site: str, nth: int) -> RunWorker:
    return RunWorker(worker_id=worker_id, crash=CrashSpec(site=site, nth=nth, action="pause"))


def _rounds(n: int) -> list[Step]:
    """Workers to bring run r1 to round ``n``, its decision delivered after
    each, as the fault-free profile delivered it (the approver's valid
    decision, which every environment's ``approval_message`` makes, signed
    or not: a round of the profile that began with a decision must begin
    with one here too, or the worker aimed at it finds nothing to do)."""
    out: list[Step] = []
    for i in range(n):
        out.append(RunWorker(worker_id=f"p{i}"))
        out.append(Approve(run_id="r1"))
    return out


@dataclass(frozen=True)
class _Aim:
    """What every category needs to know about the universe."""

    u: Universe
    workflows: tuple[WorkflowSpec, ...]
    families: frozenset[str]
    in_txn: frozenset[str]
    pausable: frozenset[str]

    def profile(self, wf: WorkflowSpec) -> WorkflowProfile:
        return self.u.profiles.get(wf.name) or WorkflowProfile(wf.name)

    def before(self, wf: WorkflowSpec, es: EffectSite, *steps: Step, name: str) -> Scenario:
        """A scenario whose ``steps`` start at the worker round that makes ``es``'s call."""
        return _scenario(f"{wf.name}/{name}", _run(wf), *_rounds(es.round), *steps)


def targeted(u: Universe) -> list[Scenario]:
    """The targeted schedules for ``u``, in the order they should run."""
    aim = _Aim(
        u=u,
        # Workflows that need a decision first: that is where most is at stake.
        workflows=tuple(sorted(u.workflows, key=lambda w: not w.needs_approval)),
        families=frozenset(u.enabled()),
        in_txn=frozenset(u.in_transaction_points()),
        pausable=frozenset(u.pause_points),
    )
    first_ends, middles = _commit_sweeps(aim)
    cats = [
        _world_kills(aim),
        # Zombies (a lease that expired under a paused worker) early in each
        # round: a plan the ci budget cuts must still reach the later
        # workflows' zombie schedules, which find the fencing mistakes.
        _zombies(aim),
        _messages(aim),
        _memory(aim),
        _tenant_twins(aim),
        _run_twins(aim),
        _deliveries_while_held(aim),
        _memory_while_down(aim),
        _upgrades(aim),
        _rollbacks(aim),
        _outages(aim),
        _wait_deadlines(aim),
        first_ends,
        _last_windows(aim),
        _operator_cancels(aim),
        _kills_before(aim),
        middles,
        _storage_cuts(aim),
        _network(aim),
    ]
    # The systematic sweeps take SWEEP_SLOTS places in each round, round
    # robin among themselves: each one's first scenario still comes within
    # the first rounds, and the categories above keep their pace.
    sweep_groups = [
        _world_modes(aim),
        _lookup_refusals(aim),
        _service_outages(aim),
        _memory_clock(aim),
        _commit_kills(aim),
        _barriers(aim),
    ]
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
    return out


def _steps(s: Scenario) -> str:
    return "".join(step.model_dump_json() for step in s.steps)


def schedule_kind(name: str) -> str:
    """A targeted schedule's kind, from its name ``targeted/WORKFLOW/KIND/...``
    ("" for a regression's or a sampled scenario's name). A kind of planted
    memory is a kind of its own (``memory_before_clock/stale`` is not
    ``memory_before_clock/poisoned``: a runtime may handle one and not the
    other). The plan runs every kind's first schedule before any category's
    second, and a budget cut that leaves a kind unrun is inconclusive."""
    parts = name.split("/")
    if len(parts) < 3 or parts[0] != "targeted":
        return ""
    if len(parts) > 3 and parts[3] in (*MEMORY_KINDS, *MEMORY_SHAPES):
        return f"{parts[2]}/{parts[3]}"
    return parts[2]


def _kill_after_apply(eff: str) -> ArmWorldFault:
    """The world kills the caller of effect ``eff`` ("service.action") right
    after applying it."""
    service, _, action = eff.partition(".")
    return ArmWorldFault(service=service, action=action or None, mode="kill_after_apply")


def _world_kills(a: _Aim) -> list[Scenario]:
    """The world kills the worker right after applying each effect."""
    if "world" not in a.families:
        return []
    return _interleave(
        [
            [
                _scenario(
                    f"{wf.name}/kill_after_apply/{eff}",
                    _run(wf),
                    _kill_after_apply(eff),
                    RunWorker(worker_id="w1"),
                )
                for eff in wf.effects
            ]
            for wf in a.workflows
        ]
    )


def _messages(a: _Aim) -> list[Scenario]:
    """The decision delivered twice (same message id); and, for the first
    gated workflow, decisions the runtime must refuse at the door.

    A refused message carries the *opposite* of the approver's decision: the
    approver (asked at the final Quiesce) rejects while the forged, wrong-role
    or wrong-params message approves, so a runtime that trusts it performs an
    effect nobody genuinely approved. A message carrying the same decision
    the approver gives would leave a trusting runtime and a checking one
    indistinguishable. Then once the other way round: the approver approves,
    a forged message rejects (a trusting runtime cancels the run).

    A decision genuinely signed for another approval of the run's tenant
    (``misdirected``): the twin run's, same workflow and input, so the same
    role and parameters; only the approval it answers differs. It carries
    the decision the twin's approver gives (approved) to a run whose
    approver rejects, so a runtime that checks signature, tenant, role and
    parameters but not which approval a decision answers refunds a
    customer nobody approved.

    A message of another tenant naming the run (``cross_tenant``): the
    decision that tenant's approver genuinely signed, with its own key,
    carrying the opposite decision; and, for each workflow whose fault-free
    run hands off and waits (a child's result, a message), the event it
    waits on, sent by another tenant while it waits (the worker killed right
    after the first commit that hands off, as ``_wait_deadlines``). Neither
    may move the run.
    """
    if "message" not in a.families:
        return []
    gated = [wf for wf in a.workflows if wf.needs_approval]
    twice = [
        _scenario(
            f"{wf.name}/duplicate_decision",
            _run(wf),
            RunWorker(worker_id="w1"),
            Approve(run_id="r1", copies=2),
        )
        for wf in gated
    ]
    refused = [
        _scenario(
            f"{wf.name}/{variant}_decision",
            _run(wf).model_copy(update={"decision": "rejected"}),
            RunWorker(worker_id="w1"),
            Approve(run_id="r1", variant=variant, decision="opposite"),
        )
        for wf in gated[:1]
        for variant in ("forged", "wrong_role", "wrong_params", "cross_tenant")
    ]
    # The decision the approver genuinely signed for another run's approval
    # (same tenant, workflow and input, so the same role and parameters),
    # addressed to this run, which the approver will reject.
    refused += [
        _scenario(
            f"{wf.name}/misdirected_decision",
            _run(wf).model_copy(update={"decision": "rejected"}),
            Submit(run=_run(wf).model_copy(update={"run_id": "r2"})),
            RunWorker(worker_id="w1"),
            Approve(run_id="r1", variant="misdirected", decision="opposite", signed_for="r2"),
        )
        for wf in gated[:1]
    ]
    refused += [
        _scenario(
            f"{wf.name}/forged_rejection",
            _run(wf),
            RunWorker(worker_id="w1"),
            Approve(run_id="r1", variant="forged", decision="opposite"),
        )
        for wf in gated[:1]
    ]
    # The approver's genuine opposite decision right behind the first: the
    # first counts, whichever the plan is.
    changed = [
        _scenario(
            f"{wf.name}/changed_mind/{planned}",
            _run(wf).model_copy(update={"decision": planned}),
            RunWorker(worker_id="w1"),
            Approve(run_id="r1", variant="changed_mind"),
        )
        for wf in gated[:1]
        for planned in ("rejected", "approved")
    ]
    return twice[:1] + refused + changed + _cross_tenant_events(a) + twice[1:]


#: delivery-while-held schedules at most (one per gated workflow)
MAX_HELD_DELIVERIES = 2


def _deliveries_while_held(a: _Aim) -> list[Scenario]:
    """A message delivered while a worker holds the run between its inbox
    read and the commit that acknowledges what it read. The run waits for
    its decision; a message it must ignore (a forged decision) comes first,
    so the worker that next claims the run reads it and commits its
    acknowledgement; that worker is paused at the last pause point before
    the first commit of the round that follows a decision in the fault-free
    run (after its read, before its acknowledging commit), the approver's
    valid decision is delivered, and the worker goes on, its commit
    succeeding. The decision was never read: it must still be pending
    after that commit, and the run must take it. A runtime that
    acknowledges the run's whole pending inbox, not the messages it read,
    loses it unseen (the run then waits for ever, or times out). The
    ignored message carries the approver's own decision, so a runtime that
    wrongly trusts it ends the same: this schedule tests the acknowledgement
    only. Gated workflows first-decision rounds, a few."""
    if "message" not in a.families or not a.pausable:
        return []
    out: list[Scenario] = []
    for wf in a.workflows:
        p = a.profile(wf)
        r = p.resume_round
        if not wf.needs_approval or r < 1 or r >= len(p.rounds):
            continue
        trace = p.rounds[r]
        first = next((i for i, (site, _) in enumerate(trace) if site in a.in_txn), len(trace))
        held = next((trace[i] for i in reversed(range(first)) if trace[i][0] in a.pausable), None)
        if held is None:
            continue
        out.append(
            _scenario(
                f"{wf.name}/deliver_while_held/r{r}/{held[0]}@{held[1]}",
                _run(wf),
                *_rounds(r - 1),
                RunWorker(worker_id=f"p{r - 1}"),
                Approve(run_id="r1", variant="forged"),
                _paused("h1", *held),
                Approve(run_id="r1"),
                ContinueWorker(worker_id="h1"),
            )
        )
    return out[:MAX_HELD_DELIVERIES]


def _cross_tenant_events(a: _Aim) -> list[Scenario]:
    """Another tenant sends the event a run waits on (see :func:`_messages`)."""
    if "crash" not in a.families or not a.in_txn:
        return []
    out: list[Scenario] = []
    for wf in a.workflows:
        c = next((c for c in a.profile(wf).commits(a.in_txn) if c.handoff and c.after), None)
        if c is None or c.after is None:
            continue
        out.append(
            _scenario(
                f"{wf.name}/cross_tenant_event/r{c.round}/{c.last[0]}@{c.last[1]}",
                _run(wf),
                *_rounds(c.round),
                RunWorker(worker_id="w1", crash=CrashSpec(site=c.after[0], nth=c.after[1])),
                Approve(run_id="r1", variant="cross_tenant", decision="opposite"),
            )
        )
    return out


def _memory(a: _Aim) -> list[Scenario]:
    """Memory planted before the run reads it, at its workflow's first
    memory target (declared, or a namespace its fault-free run read):
    user-supplied text where a workflow waits for an approval (it could
    waive one), other tenants' / expired / superseded records elsewhere.
    And, on the first few workflows, a verified version whose newer
    version has lapsed (``lapsed_newest``): the key is absent, as in the
    oracle; a reader that drops lapsed versions before it picks the newest
    reads the superseded one (where a workflow waits for an approval, a
    verified waiver that no longer holds). Likewise a verified version
    whose newer version only a user supplied (``untrusted_newest``): below
    the trust floor a workflow reads at, the key is absent, never answered
    by the older version."""
    if "memory" not in a.families:
        return []
    by_kind: dict[str, list[Scenario]] = {}
    for wf in a.workflows:
        run = _run(wf)
        aimed = a.u.memory_targets(run)
        if not aimed:
            continue  # no place its runs read: a plant would test nothing
        namespace, key, value = aimed[0]
        kinds: tuple[str, ...] = ("poisoned",)
        if not wf.needs_approval:
            kinds = ("cross_tenant", "expired", "stale")
        kinds += tuple(k for k in MEMORY_SHAPES if len(by_kind.get(k, ())) < MAX_LAPSED)
        for kind in kinds:
            plant = InjectMemory(
                tenant=run.tenant,
                namespace=namespace,
                key=key,
                value=value,
                kind=kind,
                provenance="user_supplied" if kind == "poisoned" else "system_verified",
            )
            by_kind.setdefault(kind, []).append(
                _scenario(f"{wf.name}/memory/{kind}", run, plant, RunWorker(worker_id="w1"))
            )
    # Each kind once (on its first workflow), then each again on the next.
    return _interleave(list(by_kind.values()))


def _tenant_twins(a: _Aim) -> list[Scenario]:
    """The same run for a second tenant, submitted once the first tenant's
    has ended, without any fault: a runtime that lets one tenant's data
    reach another's run (a cache keyed by content, a deduplication or a
    memory read that forgets the tenant) changes the second run, and the
    oracle, one deployment per tenant, shows it. With the cross-tenant
    families (``memory``, ``message``): isolation is what they test."""
    if not {"memory", "message"} & a.families or len(TENANTS) < 2:
        return []
    out = []
    for wf in a.workflows:
        first = _run(wf)
        twin = first.model_copy(update={"run_id": "r2", "tenant": TENANTS[1]})
        out.append(
            _scenario(
                f"{wf.name}/tenant_twin/{TENANTS[1]}",
                first,
                Quiesce(),  # the first run to its end, its decisions delivered
                Submit(run=twin),
                RunWorker(worker_id="t1"),
            )
        )
    return out


#: identical-twin schedules at most (one per workflow with a keyed effect)
MAX_RUN_TWINS = 2


def _run_twins(a: _Aim) -> list[Scenario]:
    """Two identical runs of one tenant (same workflow, input and decision,
    two run ids), submitted together, without any fault: each must have its
    own effects. A runtime that derives an idempotency key from the
    request's content sends the second run's request under the first's key,
    and the world answers it with the first run's effect: the second
    customer is never refunded. The oracle runs both in one deployment and
    makes the same mistake; ``exactly_once_effects`` sees it from the
    world's records alone (a run answered with another run's effect). On
    the workflows whose effects a service deduplicates by key, gated first."""
    if "world" not in a.families:
        return []
    out = []
    for wf in a.workflows:
        if not any(_keyed(eff) for eff in wf.effects):
            continue
        first = _run(wf)
        twin = first.model_copy(update={"run_id": "r2"})
        out.append(
            _scenario(
                f"{wf.name}/run_twin/{first.tenant}",
                first,
                Submit(run=twin),
                RunWorker(worker_id="w1"),
            )
        )
    return out[:MAX_RUN_TWINS]


def _keyed(eff: str) -> bool:
    """Whether the world's service of effect ``eff`` deduplicates by key."""
    spec = SERVICES.get(eff.partition(".")[0])
    return spec is not None and spec.capabilities.idempotency_keys


def _commit_sweeps(a: _Aim) -> tuple[list[Scenario], list[Scenario]]:
    """A kill inside the first commit after the decision (or the first commit
    of all, with none), statement by statement. Returned in two parts, each
    across workflows: the first and last statements (a commit split in two
    shows at one of its ends), both ends of one commit before the next
    workflow's; then the middle ones, interleaved."""
    if "crash" not in a.families:
        return [], []
    sweeps = []
    for wf in a.workflows:
        p = a.profile(wf)
        first: list[tuple[str, int]] = []
        for site, n in p.resume_sites():
            if site in a.in_txn:
                first.append((site, n))
            elif first:
                break
        sweeps.append(
            [
                _scenario(
                    f"{wf.name}/kill_in_first_commit/{site}@{n}",
                    _run(wf),
                    *_rounds(p.resume_round),
                    RunWorker(worker_id="w1", crash=CrashSpec(site=site, nth=n)),
                )
                for site, n in first[:MAX_TXN_SITES]
            ]
        )
    ends = [g[:1] + g[-1:] if len(g) > 1 else g for g in sweeps]
    return [s for g in ends for s in g], _interleave([g[1:-1] for g in sweeps])


def _operator_cancels(a: _Aim) -> list[Scenario]:
    """An operator cancels the run while a worker paused right before its last
    commit ahead of the first effect holds it: that commit must not undo the
    cancellation."""
    if "operator" not in a.families:
        return []
    return [
        a.before(
            wf,
            es,
            _paused("o1", site, n),
            Cancel(run_id="r1"),
            ContinueWorker(worker_id="o1"),
            name=f"cancel_while_held/{es.effect}/{site}@{n}",
        )
        for wf in a.workflows
        for es in a.profile(wf).effect_sites[:1]
        for site, n in _before_last_commit(es, a.pausable, a.in_txn)
    ]


def _zombies(a: _Aim) -> list[Scenario]:
    """A worker paused just before an effect outlives its lease; another takes
    over; the first wakes up and carries on. Paused at each of the last few
    boundaries before the call, nearest first: a runtime checks its lease at
    one of them, and only a pause before that check tests it. All of one
    call's boundaries before the next call's: where the check sits matters
    more than which call it guards. Calls the runtime declares at most once
    (``exactly_once``, ``at_most_once``) come before ``at_least_once`` ones:
    a zombie's second call is a violation only where one was promised."""
    if "zombie" not in a.families:
        return []
    groups = []
    for wf in a.workflows:
        for es in a.profile(wf).effect_sites:
            near = [(site, n) for site, n in reversed(es.approach) if site in a.pausable]
            groups.append(
                [
                    a.before(
                        wf,
                        es,
                        _paused("z1", site, n),
                        AdvanceClock(seconds=a.u.lease_seconds + 1),
                        RunWorker(worker_id="w1"),
                        ContinueWorker(worker_id="z1"),
                        name=f"zombie_before/{es.effect}/{site}@{n}",
                    )
                    for site, n in near[:ZOMBIE_SITES]
                ]
            )
    once = [g for g in groups if g and a.u.delivery.get(_effect_of(g[0])) != "at_least_once"]
    rest = [g for g in groups if g and a.u.delivery.get(_effect_of(g[0])) == "at_least_once"]
    return [s for g in [*once, *rest] for s in g]


def _effect_of(s: Scenario) -> str:
    """The effect kind a ``.../zombie_before/EFFECT/SITE@N`` schedule aims at."""
    return s.name.split("/")[3]


def _outages(a: _Aim) -> list[Scenario]:
    """A long outage between the decision and a gated workflow's effect: the
    worker dies right before the effect, and nothing runs for a day."""
    if "late_approval" not in a.families:
        return []
    return [
        a.before(
            wf,
            es,
            RunWorker(worker_id="w1", crash=CrashSpec(site=es.site, nth=es.nth)),
            AdvanceClock(seconds=OUTAGE_SECONDS),
            name=f"outage_before/{es.effect}",
        )
        for wf in a.workflows
        if wf.needs_approval
        for es in a.profile(wf).effect_sites
        if es.round >= a.profile(wf).resume_round
    ]


#: how far the clock jumps past a waiting run: beyond any deadline a runtime
#: or a workflow sets for an event or a decision (a day and a bit)
WAIT_SECONDS = OUTAGE_SECONDS
#: wait-deadline schedules at most
MAX_WAIT_DEADLINES = 8


def _wait_deadlines(a: _Aim) -> list[Scenario]:
    """A run left waiting while the clock passes its deadline, with what it
    waits for withheld. The worker is killed right after each commit of the
    fault-free run that hands off (the run yields and the worker's loop
    finds another run to do: the run now waits for what it handed off, a
    child's result or a message, and the other run has not yet made it),
    then the clock jumps a day; a gated run is left waiting for its
    decision while the clock jumps, and a worker runs before the decision
    comes. The runtime must time the wait out (the clock fault names the
    runs whose deadline, the ``wake_at`` they report, it passes: they may
    end otherwise than fault-free), take what came in time, or keep waiting
    without starving the run it waits on; never wait past its deadline
    for ever. Each workflow's first wait, then each one's next."""
    if "late_approval" not in a.families or Capability.CLOCK not in a.u.capabilities:
        return []
    groups: list[list[Scenario]] = []
    for wf in a.workflows:
        mine: list[Scenario] = []
        if "crash" in a.families and a.in_txn:
            for c in a.profile(wf).commits(a.in_txn):
                if not c.handoff or c.after is None:
                    continue
                mine.append(
                    _scenario(
                        f"{wf.name}/deadline_passes/r{c.round}/{c.last[0]}@{c.last[1]}",
                        _run(wf),
                        *_rounds(c.round),
                        RunWorker(worker_id="w1", crash=CrashSpec(site=c.after[0], nth=c.after[1])),
                        AdvanceClock(seconds=WAIT_SECONDS),
                    )
                )
        if wf.needs_approval:
            mine.append(
                _scenario(
                    f"{wf.name}/deadline_passes/approval",
                    _run(wf),
                    RunWorker(worker_id="w1"),
                    AdvanceClock(seconds=WAIT_SECONDS),
                    RunWorker(worker_id="w2"),
                )
            )
        groups.append(mine)
    return _interleave(groups)[:MAX_WAIT_DEADLINES]


def _storage_cuts(a: _Aim) -> list[Scenario]:
    """The store's connections cut under a worker held inside the first commit
    after the decision (that transaction must die whole), then under one
    held between steps on the way to the first effect (its pooled
    connections die idle; the next use must recover). Every kind the
    deployment offers, at once."""
    kinds = a.u.offered_storage_kinds()
    if "storage" not in a.families or not kinds:
        return []
    cuts = [StorageFault(kind=k) for k in kinds]
    inside: list[Scenario] = []
    idle: list[Scenario] = []
    for wf in a.workflows:
        p = a.profile(wf)
        site_in = next(((s, n) for s, n in p.resume_sites() if s in a.in_txn), None)
        if site_in is not None:
            inside.append(
                _scenario(
                    f"{wf.name}/storage_cut_in_commit/{site_in[0]}@{site_in[1]}",
                    _run(wf),
                    *_rounds(p.resume_round),
                    _paused("s1", *site_in),
                    *cuts,
                    ContinueWorker(worker_id="s1"),
                )
            )
        for es in p.effect_sites[:1]:
            near = next(((s, n) for s, n in reversed(es.approach) if s in a.pausable), None)
            if near is not None:
                idle.append(
                    a.before(
                        wf,
                        es,
                        _paused("s1", *near),
                        *cuts,
                        ContinueWorker(worker_id="s1"),
                        name=f"storage_cut_idle/{es.effect}/{near[0]}@{near[1]}",
                    )
                )
    return _interleave([inside, idle])


def _network(a: _Aim) -> list[Scenario]:
    """Network faults on the worker's storage connection, at each kind of
    commit a fault-free run made: its acknowledgement lost (the commit
    reached the store, the worker cannot know) at the *intent* commit (the
    last before an effect's call), the *result* commit (the first after
    it), the *decision* commit (the first after an approval was delivered)
    and a plain *checkpoint* (the first commit that is none of those); the
    connection reset between two statements of the first commit after the
    decision (the first of all, with none); and a partition past the lease
    right before the first effect (:func:`_partitions`). The worker is
    paused at the commit's last in-transaction crash point (a lost
    acknowledgement) or at a middle one (a reset). Every variant once, on
    the first workflow where a fault-free run made that kind of commit,
    before any is tried on the next workflow: the decision's commit first
    (where most is at stake, and a commit that moves the run's status shows
    a commit written twice), then a reset and a partition, so a short plan
    fires every kind.

    Where the backend can (Toxiproxy: see ``Universe.network_kinds``), the
    first commit aimed at also gets its reply held back past the lease
    (``latency``: the commit still in flight when another worker may take
    the run), and the reset's position a reply in fragments
    (``slow_reply``) and a reply cut after a few bytes (``cut_reply``)."""
    if "network" not in a.families:
        return []
    offered = a.u.offered_network_kinds()
    order = (
        "decision", "reset", "partition", *REPLY_KINDS, "intent", "result", "checkpoint",
    )  # fmt: skip
    # per variant, per workflow: breadth-first across workflows within a variant
    by_variant: dict[str, list[list[Scenario]]] = {v: [] for v in order}
    for wf in a.workflows:
        mine: dict[str, list[Scenario]] = {v: [] for v in order}
        targets = _network_targets(a, wf)
        first_end = next(((c, site) for v, c, site in targets if v != "reset"), None)
        aimed: list[tuple[str, str, Commit, tuple[str, int]]] = []
        for variant, c, site in targets:
            kind = "reset_mid_transaction" if variant == "reset" else "commit_ack_lost"
            aimed.append((variant, kind, c, site))
            if variant == "reset":
                aimed += [(k, k, c, site) for k in ("slow_reply", "cut_reply")]
        if first_end is not None:
            aimed.append(("latency", "latency", *first_end))
        for variant, kind, c, site in aimed:
            if kind not in offered:
                continue  # never armed where it cannot fire (a Unix socket, the kernel)
            label = kind if kind == variant else f"{kind}/{variant}"
            name = f"{label}/r{c.round}/{site[0]}@{site[1]}"
            mine[variant].append(
                _scenario(
                    f"{wf.name}/{name}",
                    _run(wf),
                    *_rounds(c.round),
                    _paused("n1", *site),
                    NetworkFault(kind=kind, worker_id="n1"),
                )
            )
        mine["partition"] = _partitions(a, wf) if "partition" in offered else []
        for v in order:
            by_variant[v].append(mine[v])
    return _interleave([_interleave(by_variant[v]) for v in order])[:MAX_NETWORK]


def _partitions(a: _Aim, wf: WorkflowSpec) -> list[Scenario]:
    """A worker partitioned from the store at the boundary nearest before
    the workflow's first effect, past its lease, while another takes over:
    back, it is a zombie about to call (needs the clock)."""
    if Capability.CLOCK not in a.u.capabilities:
        return []
    out = []
    for es in a.profile(wf).effect_sites[:1]:
        near = next(((s, n) for s, n in reversed(es.approach) if s in a.pausable), None)
        if near is not None:
            out.append(
                a.before(
                    wf,
                    es,
                    _paused("n1", *near),
                    NetworkFault(kind="partition", worker_id="n1"),
                    name=f"partition/before/{es.effect}/{near[0]}@{near[1]}",
                )
            )
    return out


def _network_targets(a: _Aim, wf: WorkflowSpec) -> list[tuple[str, Commit, tuple[str, int]]]:
    """(variant, commit, paused at) for each kind of commit of ``wf``'s
    fault-free run, each commit once (see :func:`_network`)."""
    p = a.profile(wf)
    commits = list(p.commits(a.in_txn))
    if not commits:
        return []
    out: list[tuple[str, Commit, tuple[str, int]]] = []
    used: set[tuple[int, tuple[str, int]]] = set()

    def add(variant: str, c: Commit | None) -> None:
        if c is not None and (c.round, c.last) not in used:
            used.add((c.round, c.last))
            out.append((variant, c, c.last))

    decided = next((c for c in commits if c.round == p.resume_round), None)
    if wf.needs_approval and p.resume_round > 0:
        add("decision", decided)
    for es in p.effect_sites:
        trace = p.rounds[es.round] if es.round < len(p.rounds) else ()
        at = len(es.approach) - 1
        if not trace or trace[: at + 1] != es.approach:
            continue  # the killed run went another way: no position to aim from
        ends = {c.last: c for c in commits if c.round == es.round}
        before = [ends[s] for s in trace[:at] if s in ends]
        after = [ends[s] for s in trace[at + 1 :] if s in ends]
        add("intent", before[-1] if before else None)
        add("result", after[0] if after else None)
    add("checkpoint", next((c for c in commits if (c.round, c.last) not in used), None))
    # The reset: between two statements of the first commit after the
    # decision (or of the first commit), at its middle crash point.
    first = decided or commits[0]
    trace = p.rounds[first.round]
    end = trace.index(first.last)
    start = end
    while start > 0 and trace[start - 1][0] in a.in_txn:
        start -= 1
    span = trace[start : end + 1]
    out.append(("reset", first, span[(len(span) - 1) // 2]))
    return out


def _upgrades(a: _Aim) -> list[Scenario]:
    """Submitted and started by the previous release, resumed by this one.

    The old code's worker runs until its run waits or ends. Without crash
    points that stops a workflow mid-run only at an approval wait, so the
    old code is also stopped at each effect boundary: the world kills its
    worker right after applying the effect (as the sampled migrations do),
    and this release resumes a run the old code left half done. A gated
    workflow's run then gets its decision and a second old worker, so a
    kill aimed past the approval lands under the old code too; and, with or
    without crash points, a gated run is decided and finished by the old
    code alone.
    Per workflow: the stop most likely mid-run first (the wait of a gated
    workflow, else the first effect), across workflows breadth-first."""
    if "migration" not in a.families:
        return []
    groups = []
    for wf in a.workflows:
        plain = _scenario(
            f"{wf.name}/upgrade_mid_run",
            _run(wf, code_version=1),
            RunWorker(worker_id="v1", code_version=1),
        )
        kills = []
        if not a.u.crash_points and "world" in a.families:
            gated = wf.needs_approval
            decided: list[Step] = [Approve(run_id="r1"), RunWorker(worker_id="v2", code_version=1)]
            kills = [
                _scenario(
                    f"{wf.name}/upgrade_mid_run/kill_after_apply/{eff}",
                    _run(wf, code_version=1),
                    _kill_after_apply(eff),
                    RunWorker(worker_id="v1", code_version=1),
                    *(decided if gated else []),
                )
                for eff in wf.effects
            ]
        if not wf.needs_approval:
            groups.append([*kills, plain])
            continue
        # The previous release decides and finishes its own run: a rolling
        # deploy keeps old workers serving, and the old code must honour
        # the approvals it asked for (a deploy that migrates approvals the
        # wrong way round denies them). Judged against today's oracle by
        # state, effect counts and output keys (migration_safety).
        decided_old = _scenario(
            f"{wf.name}/upgrade_mid_run/decided_by_older_release",
            _run(wf, code_version=1),
            RunWorker(worker_id="v1", code_version=1),
            Approve(run_id="r1"),
            RunWorker(worker_id="v2", code_version=1),
        )
        groups.append([plain, decided_old, *kills])
    return _interleave(groups)


#: rollback-order schedules at most
MAX_ROLLBACKS = 3


def _rollbacks(a: _Aim) -> list[Scenario]:
    """A rollback order of code versions: this release's worker, then the
    previous release's, then this release's again (a deploy rolled back and
    forward, or a rolling deploy whose old workers still serve). Today's
    worker runs a gated run until it waits for its decision, so what the
    run has stored (its payload, its approval's parameters, its definition)
    is as today's code wrote it; the decision arrives; the previous
    release's worker claims the run and meets records newer than itself;
    then today's worker again. The older code must park the run loudly or
    finish it right: one that fails the run it cannot read, reads a newer
    payload as its own shape, or writes it back stamped with its own
    version (which today's code then upgrades a second time) ends the run
    unlike the oracle (``migration_safety``). The forward upgrades
    (``_upgrades``) never show the old code a newer record.
    Per gated workflow, the run submitted by the previous release (so the
    payload the old code meets is one today's code upgraded), then, for
    the first, one submitted by today's code (a definition from the
    future); a few."""
    if "migration" not in a.families or not a.u.rollbacks:
        return []  # a promise the adapter did not make (``rolls_back``)
    gated = [wf for wf in a.workflows if wf.needs_approval]

    def rollback(wf: WorkflowSpec, submitted: str, code_version: int | None) -> Scenario:
        return _scenario(
            f"{wf.name}/rollback/{submitted}",
            _run(wf, code_version=code_version),
            RunWorker(worker_id="n1"),
            Approve(run_id="r1"),
            RunWorker(worker_id="o1", code_version=1),
            RunWorker(worker_id="n2"),
        )

    out = [rollback(wf, "submitted_by_older_release", 1) for wf in gated]
    out[1:1] = [rollback(wf, "submitted_by_this_release", None) for wf in gated[:1]]
    return out[:MAX_ROLLBACKS]


def _kills_before(a: _Aim) -> list[Scenario]:
    """A kill right before each effect (intent persisted, no call yet)."""
    if "crash" not in a.families:
        return []
    return _interleave(
        [
            [
                a.before(
                    wf,
                    es,
                    RunWorker(worker_id="w1", crash=CrashSpec(site=es.site, nth=es.nth)),
                    name=f"kill_before/{es.effect}",
                )
                for es in a.profile(wf).effect_sites
            ]
            for wf in a.workflows
        ]
    )


def _world_modes(a: _Aim) -> list[Scenario]:
    """Every other world fault mode at every effect: the service applied the
    call and then timed out, timed out before applying, refused it, the
    world killed the caller before applying, the call was slow. All modes
    at one effect before the next effect's."""
    if "world" not in a.families:
        return []
    return _interleave(
        [
            [
                _scenario(
                    f"{wf.name}/{mode}/{eff}",
                    _run(wf),
                    ArmWorldFault(
                        service=eff.partition(".")[0],
                        action=eff.partition(".")[2] or None,
                        mode=mode,
                        delay=SLOW_SECONDS if mode == "slow" else 0.0,
                    ),
                    RunWorker(worker_id="w1"),
                )
                for eff in wf.effects
                for mode in WORLD_MODES
            ]
            for wf in a.workflows
        ]
    )


def _lookup_refusals(a: _Aim) -> list[Scenario]:
    """The reconciliation refused: at every effect whose service offers a
    lookup, the world kills the caller right after applying it, and the
    lookup the next worker reconciles with is refused, or its answer lost
    (each of :data:`~harness.world.LOOKUP_FAULT_MODES`). A runtime must not
    guess then: it may not resend what it cannot see (a second effect where
    the service has no idempotency keys), nor give up on an effect that was
    applied. Both modes at one effect before the next effect's."""
    if "world" not in a.families:
        return []
    return _interleave(
        [
            [
                _scenario(
                    f"{wf.name}/lookup_{mode}/{eff}",
                    _run(wf),
                    _kill_after_apply(eff),
                    ArmWorldFault(service=eff.partition(".")[0], action=LOOKUP, mode=mode),
                    RunWorker(worker_id="w1"),
                )
                for eff in wf.effects
                if offers_lookup(eff.partition(".")[0])
                for mode in LOOKUP_FAULT_MODES
            ]
            for wf in a.workflows
        ]
    )


def _service_outages(a: _Aim) -> list[Scenario]:
    """A persistent outage: every call of one service turned away, for more
    calls than common retry limits, then healed. A run that gives up is
    right to (its runs are named, so no divergence is read into it); one
    that keeps retrying must complete once the service is back; none may
    report success for a call that was turned away. Each service once, on
    the first workflow that calls it."""
    if "world" not in a.families:
        return []
    out: list[Scenario] = []
    seen: set[str] = set()
    for wf in a.workflows:
        for eff in wf.effects:
            service = eff.partition(".")[0]
            if service in seen:
                continue
            seen.add(service)
            out.append(
                _scenario(
                    f"{wf.name}/service_down/{service}",
                    _run(wf),
                    ArmWorldFault(service=service, mode="unavailable", calls=OUTAGE_CALLS),
                    RunWorker(worker_id="w1"),
                )
            )
    return out


def _memory_clock(a: _Aim) -> list[Scenario]:
    """Every kind of planted memory, planted before the clock moves and
    after it has moved, at a key the run reads and at keys it writes (the
    records its fault-free run read back: see the site profile). Before:
    an ``expired`` record is still live when planted and lapses as the
    clock moves. After: it expired just now, by the moved clock. Each
    (kind, when, key) once before any is tried on another workflow."""
    if "memory" not in a.families or Capability.CLOCK not in a.u.capabilities:
        return []
    step = a.u.lease_seconds + 1
    by_variant: dict[tuple[str, str, str], list[Scenario]] = {}
    for wf in a.workflows:
        run = _run(wf)
        targets = [("reads", ns, k, v) for ns, k, v in a.u.memory_targets(run)[:1]]
        targets += [("writes", ns, k, {"planted": True}) for ns, k in a.profile(wf).memory_keys[:1]]
        for kind in MEMORY_KINDS:
            for when in ("before", "after"):
                for target, ns, k, v in targets:
                    plant = InjectMemory(
                        tenant=run.tenant,
                        namespace=ns,
                        key=k,
                        value=v,
                        kind=kind,
                        provenance="user_supplied" if kind == "poisoned" else "system_verified",
                        expires_in=step / 2 if kind == "expired" and when == "before" else None,
                        at_written_key=target == "writes",
                    )
                    clock = AdvanceClock(seconds=step)
                    steps = (plant, clock) if when == "before" else (clock, plant)
                    by_variant.setdefault((kind, when, target), []).append(
                        _scenario(
                            f"{wf.name}/memory_{when}_clock/{kind}/{target}/{ns}/{k}",
                            run,
                            *steps,
                            RunWorker(worker_id="w1"),
                        )
                    )
    return _interleave(list(by_variant.values()))[:MAX_MEMORY]


def _memory_while_down(a: _Aim) -> list[Scenario]:
    """A record at the run's memory target that lapses while the run is
    down: the worker is killed right after the run's first commit, the
    clock moves, a record that expired just now is planted, another worker
    resumes. Its expiry falls between the run's last commit and the resume,
    so a runtime that rebuilds the context as of its checkpoint (to replay
    what the run saw) reads it; one per workflow, with the clock and a
    commit the profile traced."""
    if "memory" not in a.families or Capability.CLOCK not in a.u.capabilities:
        return []
    out = []
    for wf in a.workflows:
        run = _run(wf)
        aimed = a.u.memory_targets(run)
        first = next((c for c in a.profile(wf).commits(a.in_txn) if c.after is not None), None)
        if not aimed or first is None or first.after is None:
            continue
        ns, key, value = aimed[0]
        out.append(
            _scenario(
                f"{wf.name}/memory_while_down/expired/{ns}/{key}",
                run,
                *_rounds(first.round),
                RunWorker(worker_id="w1", crash=CrashSpec(site=first.after[0], nth=first.after[1])),
                AdvanceClock(seconds=a.u.lease_seconds + 1),
                InjectMemory(
                    tenant=run.tenant,
                    namespace=ns,
                    key=key,
                    value=value,
                    kind="expired",
                    provenance="system_verified",
                ),
                RunWorker(worker_id="w2"),
            )
        )
    return out


#: last-window schedules at most (one per workflow)
MAX_LAST_WINDOWS = 4


def _last_windows(a: _Aim) -> list[Scenario]:
    """A kill in the last window: after the run's last durable write, before
    the record that it completed. The fault-free run's last commit is the
    one that ends it; the worker is killed at the last crash point before
    that commit begins (everything the run did is durable, its end is
    not), and another worker must finish it as the fault-free run did: its
    output, its state, its parent told. A runtime that treats a run found
    past its last step as done (records the end without the output, or
    never records it), or that replays the finished run from an earlier
    step, shows only here: the kills after each commit (``_commit_kills``)
    are capped, and reach a long workflow's last commits last, if at all.
    One per workflow, breadth-first."""
    if "crash" not in a.families or not a.in_txn:
        return []
    out: list[Scenario] = []
    for wf in a.workflows:
        p = a.profile(wf)
        commits = p.commits(a.in_txn)
        if not commits:
            continue
        last = commits[-1]
        trace = p.rounds[last.round]
        end = trace.index(last.last)
        start = end
        while start > 0 and trace[start - 1][0] in a.in_txn:
            start -= 1
        # the crash point right before the commit's transaction (or its
        # first statement, when one commit follows another directly)
        site = trace[start - 1] if start > 0 else trace[start]
        out.append(
            _scenario(
                f"{wf.name}/last_window/r{last.round}/{site[0]}@{site[1]}",
                _run(wf),
                *_rounds(last.round),
                RunWorker(worker_id="w1", crash=CrashSpec(site=site[0], nth=site[1])),
            )
        )
    return out[:MAX_LAST_WINDOWS]


def _commit_kills(a: _Aim) -> list[Scenario]:
    """A kill right after every commit of a fault-free run: first the
    commits that hand work or a message to another run (a child spawned, a
    child's completion delivered), then every other, breadth-first across
    workflows (each workflow's first commit, then each one's second...)."""
    if "crash" not in a.families or not a.in_txn:
        return []
    handoffs: list[list[Scenario]] = []
    others: list[list[Scenario]] = []
    for wf in a.workflows:
        p = a.profile(wf)
        commits = [c for c in p.commits(a.in_txn) if c.after is not None]
        handoffs.append([_kill_after(a, wf, c) for c in commits if c.handoff])
        others.append([_kill_after(a, wf, c) for c in commits if not c.handoff])
    return (_interleave(handoffs) + _interleave(others))[:MAX_COMMIT_KILLS]


def _kill_after(a: _Aim, wf: WorkflowSpec, c: Commit) -> Scenario:
    assert c.after is not None
    site, n = c.after
    kind = "handoff" if c.handoff else "commit"
    return _scenario(
        f"{wf.name}/kill_after_{kind}/r{c.round}/{c.last[0]}@{c.last[1]}",
        _run(wf),
        *_rounds(c.round),
        RunWorker(worker_id="w1", crash=CrashSpec(site=site, nth=n)),
    )


def _barriers(a: _Aim) -> list[Scenario]:
    """Two workers held at the first crash point of a round (before either
    has claimed anything), then released together: they race for the same
    run truly at once, so a claim that is not atomic (a lost row lock, a
    read-then-write without one) lets both work it. The round that starts
    the run, then the one that resumes it after the decision."""
    if "race" not in a.families or not a.pausable:
        return []
    out: list[Scenario] = []
    for wf in a.workflows:
        p = a.profile(wf)
        for r in sorted({0, p.resume_round}):
            if r >= len(p.rounds):
                continue
            first = next(((s, n) for s, n in p.rounds[r] if s in a.pausable), None)
            if first is None:
                continue
            out.append(
                _scenario(
                    f"{wf.name}/barrier_race/r{r}/{first[0]}@{first[1]}",
                    _run(wf),
                    *_rounds(r),
                    _paused("b1", *first),
                    _paused("b2", *first),
                    ReleaseWorkers(worker_ids=("b1", "b2")),
                )
            )
    return out


def _before_last_commit(
    es: EffectSite, pausable: frozenset[str], in_txn: frozenset[str]
) -> list[tuple[str, int]]:
    """The pausable site right before the last commit on the way to an effect."""
    path = es.approach
    for i in range(len(path) - 1, 0, -1):
        if path[i][0] in in_txn and path[i - 1][0] in pausable:
            return [path[i - 1]]
    return []


def _interleave(groups: list[list[Scenario]]) -> list[Scenario]:
    """Round-robin: the first of each group, then the second of each, ..."""
    longest = max((len(g) for g in groups), default=0)
    return [g[i] for i in range(longest) for g in groups if i < len(g)]


# -- faults at every commit ------------------------------------------------------

#: every fault that can hit a commit, in the order a plan tries them
COMMIT_FAULTS = (
    "kill_inside",
    "operator_write",
    "delivery_while_held",
    "storage_cut",
    "reset",
    "ack_lost",
)


@dataclass(frozen=True)
class CommitFaultPair:
    """One (commit kind x fault) pair of a plan: the schedule that aims the
    fault at a commit of that kind (None: not offered, and ``why``)."""

    kind: str
    fault: str
    scenario: Scenario | None = None
    #: why no schedule aims it: "capability: ..." (the adapter or this
    #: deployment lacks what the fault needs) or "trace: ..." (no fault-free
    #: run made a commit of that kind)
    why: str | None = None


def commit_fault_pairs(u: Universe) -> list[CommitFaultPair]:
    """Every (commit kind x fault) pair (:data:`~harness.scenarios._profile.COMMIT_KINDS`
    x :data:`COMMIT_FAULTS`), each with one schedule aimed at the first
    workflow whose fault-free run made a commit of that kind, or with why
    none is. Per commit, where each fault lands:

    - ``kill_inside``: the worker killed at the commit's middle in-transaction
      crash point (the transaction must die whole);
    - ``operator_write``: an operator cancels the run while the worker holds
      it at the commit's door (the last pause point before the transaction:
      the run read, its commit not begun), and the worker goes on; its
      commit must not write over the cancellation. Inside the transaction
      is not offered: the cancel would wait on the worker's lock, and the
      worker on the harness;
    - ``delivery_while_held``: the approver's decision delivered while the
      worker holds the run at the door of the commit that acknowledges what
      it read (after a forged decision it must ignore): only where the run
      reads a decision (``decision``, ``inbox_ack``);
    - ``storage_cut``: the store's connections cut under the worker held at
      the middle in-transaction crash point;
    - ``reset``: the worker's storage connection reset there;
    - ``ack_lost``: the commit's acknowledgement lost (the worker held at
      its last in-transaction crash point).

    Pairs come breadth-first: each fault's pairs interleaved with every
    other fault's, so a plan cut short has tried every fault."""
    a = _aim(u)
    storage = u.offered_storage_kinds() if "storage" in a.families else ()
    network = u.offered_network_kinds() if "network" in a.families else ()
    needs: dict[str, str | None] = {
        "kill_inside": None
        if "crash" in a.families and a.in_txn
        else "crash points inside a transaction (crash family)",
        "operator_write": None
        if "operator" in a.families
        else "an operator's cancel and pause points (operator family)",
        "delivery_while_held": None
        if "message" in a.families and a.pausable
        else "approvals and pause points (message family)",
        "storage_cut": None
        if storage
        else "storage faults this deployment offers (a server's sessions to cut: Postgres, Redis)",
        "reset": None
        if "reset_mid_transaction" in network
        else "network faults on a TCP storage connection (reset_mid_transaction)",
        "ack_lost": None
        if "commit_ack_lost" in network
        else "network faults on a TCP storage connection (commit_ack_lost)",
    }
    by_fault: list[list[CommitFaultPair]] = []
    for fault in COMMIT_FAULTS:
        mine = []
        for kind in COMMIT_KINDS:
            missing = needs[fault]
            if missing is not None:
                mine.append(CommitFaultPair(kind, fault, why=f"capability: {missing}"))
                continue
            if fault == "delivery_while_held" and kind not in ("decision", "inbox_ack"):
                mine.append(
                    CommitFaultPair(
                        kind, fault, why="trace: the run reads no message at this commit"
                    )
                )
                continue
            found = _pair_schedule(a, kind, fault, storage)
            if isinstance(found, str):
                mine.append(CommitFaultPair(kind, fault, why=found))
            else:
                mine.append(CommitFaultPair(kind, fault, scenario=found))
        by_fault.append(mine)
    longest = max(len(g) for g in by_fault)
    return [g[i] for i in range(longest) for g in by_fault if i < len(g)]


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


def commit_pair_rows(u: Universe, share: int) -> list[dict[str, str | None]]:
    """:func:`commit_fault_plan` of a plan that runs the first ``share``
    targeted schedules (none: ``--no-targeted``), as the report's rows:
    ``kind``, ``fault``, ``schedule``, ``why``."""
    if share <= 0:
        return []
    return [
        {"kind": k, "fault": f, "schedule": name, "why": why}
        for k, f, name, why in commit_fault_plan(u, targeted(u)[:share])
    ]


def _aim(u: Universe) -> _Aim:
    return _Aim(
        u=u,
        workflows=tuple(sorted(u.workflows, key=lambda w: not w.needs_approval)),
        families=frozenset(u.enabled()),
        in_txn=frozenset(u.in_transaction_points()),
        pausable=frozenset(u.pause_points),
    )


def _pair_schedule(a: _Aim, kind: str, fault: str, storage: tuple[str, ...]) -> Scenario | str:
    """The schedule aiming ``fault`` at the first commit of ``kind``, or why
    there is none ("trace: ...")."""
    candidates: list[tuple[WorkflowSpec, Commit, bool]] = []
    for wf in a.workflows:
        kinds = a.profile(wf).commit_kinds(a.in_txn, gated=wf.needs_approval)
        candidates += [(wf, c, c in kinds["decision"]) for c in kinds.get(kind, [])]
    if kind == "inbox_ack":
        # a message that is not the decision first: the decision has its own kind
        candidates.sort(key=lambda x: x[2])
    for wf, c, _ in candidates:
        p = a.profile(wf)
        trace = p.rounds[c.round]
        end = trace.index(c.last)
        start = end
        while start > 0 and trace[start - 1][0] in a.in_txn:
            start -= 1
        span = trace[start : end + 1]
        mid = span[(len(span) - 1) // 2]
        door = trace[start - 1] if start > 0 and trace[start - 1][0] in a.pausable else None
        name = f"{wf.name}/commit_fault/{kind}/{fault}/r{c.round}"
        if fault == "kill_inside":
            crash = CrashSpec(site=mid[0], nth=mid[1])
            return _scenario(
                f"{name}/{mid[0]}@{mid[1]}",
                _run(wf),
                *_rounds(c.round),
                RunWorker(worker_id="w1", crash=crash),
            )
        if fault in ("reset", "ack_lost"):
            at = c.last if fault == "ack_lost" else mid
            net: Literal["commit_ack_lost", "reset_mid_transaction"] = (
                "commit_ack_lost" if fault == "ack_lost" else "reset_mid_transaction"
            )
            return _scenario(
                f"{name}/{at[0]}@{at[1]}",
                _run(wf),
                *_rounds(c.round),
                _paused("n1", *at),
                NetworkFault(kind=net, worker_id="n1"),
            )
        if fault == "storage_cut":
            return _scenario(
                f"{name}/{mid[0]}@{mid[1]}",
                _run(wf),
                *_rounds(c.round),
                _paused("s1", *mid),
                *(StorageFault(kind=k) for k in storage),
                ContinueWorker(worker_id="s1"),
            )
        if door is None:
            continue  # nowhere to hold the worker before this commit
        if fault == "operator_write":
            return _scenario(
                f"{name}/{door[0]}@{door[1]}",
                _run(wf),
                *_rounds(c.round),
                _paused("o1", *door),
                Cancel(run_id="r1"),
                ContinueWorker(worker_id="o1"),
            )
        if fault == "delivery_while_held" and wf.needs_approval and c.round >= 1:
            return _scenario(
                f"{name}/{door[0]}@{door[1]}",
                _run(wf),
                *_rounds(c.round - 1),
                RunWorker(worker_id=f"p{c.round - 1}"),
                Approve(run_id="r1", variant="forged"),
                _paused("h1", *door),
                Approve(run_id="r1"),
                ContinueWorker(worker_id="h1"),
            )
    if not candidates:
        return f"trace: no fault-free run made a {kind.replace('_', '-')} commit"
    return f"trace: no {kind.replace('_', '-')} commit has a pause point before it"
