"""Hypothesis strategies for workloads and fault schedules.

A scenario is a workload (a few runs of the adapter's workflows, for one or
two tenants) followed by a fault schedule built from *episodes*, each of which
exercises one fault family, and it always ends with a quiesce (faults stop,
workers drain the queue). Everything is drawn from data the adapter declares
-- its workflows, its crash points, its capabilities -- so a strategy never
asks for what the runtime cannot do. Lists shrink towards fewer runs and
fewer, simpler episodes, so a failure ends as a short readable counterexample.

Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012): each scenario
first draws its :class:`Swarm`, a random subset of the enabled fault families
(each with a weight) and of each family's kinds (world modes, memory kinds,
message variants), then draws every episode from that subset only. Uniform
mixing spreads a scenario's few episodes over every family, so two faults of
one kind rarely meet; a swarm of one or two kinds gives long runs of them,
which is where combination bugs are (a kill during the recovery of a kill, a
second reject after a retried timeout). A swarm shrinks towards one family
and one kind (the first enabled), so a counterexample also says which
faults it needs.

The swarm also picks workload *shapes* (issue 28), as kinds of the families
they belong to, so an adapter without the family draws what it drew before:
identical twin runs of one tenant and decisions signed for a twin's approval
(``message``: ``misdirected``), a decision delivered while a worker holds
the run between its read and its commit (``message``: ``while_held``),
a verified memory version under a newer one that lapsed or only a user
supplied (``memory``), a rollback order of code versions (``migration``:
``rollback``), and runs left down past every deadline after a crash
(:data:`DOWNTIME`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from hypothesis import strategies as st

from ..adapters import Capability
from ..model import (
    AdvanceClock,
    Approve,
    ArmModelFault,
    ArmWorldFault,
    Cancel,
    ContinueWorker,
    CrashSpec,
    InjectMemory,
    NetworkFault,
    NetworkKind,
    Quiesce,
    RaceWorkers,
    RunSpec,
    RunWorker,
    Scenario,
    Step,
    StorageFault,
    Submit,
)
from ..vocabulary import FAMILY_VARIANTS, FAULT_FAMILIES, NETWORK_KINDS, TOOL_REPLY_MODES
from ..world import LOOKUP, LOOKUP_FAULT_MODES, SERVICES
from ._universe import TENANTS, Universe

#: How long the ``race`` family slows the first worker's effect: long enough
#: for a second worker to start and read the same state meanwhile.
RACE_DELAY = 1.0

#: Per family, the kinds a swarm picks a subset of (a family not listed has
#: one kind). The order is the shrink order: the first kind is the simplest.
#: From the families' records (``harness.vocabulary``).
FAMILY_KINDS = FAMILY_VARIANTS

#: memory kinds planted where they could waive an approval (a verified
#: waiver under a newer version that must hide it), as ``poisoned`` is
GATED_MEMORY_KINDS = frozenset({"poisoned", "lapsed_newest", "untrusted_newest"})

#: Where a swarm allows misdirected decisions, one run in this many after
#: the first is the identical twin of the run before it (same tenant,
#: workflow, input and decision): the decision a twin's approver signed is
#: the one to misdirect, and each twin must have effects of its own (a
#: runtime that keys an effect by its content answers the second with the
#: first's). Drawn only in such swarms, so that the stream of an adapter
#: without approvals is unchanged.
TWIN_ODDS = 2

#: Families a scenario draws one episode of at most: a lost acknowledgement
#: costs the worker its network timeout (seconds), where other episodes
#: cost tenths; a second one in the same scenario finds little the first
#: and the targeted schedules do not.
ONCE_PER_SCENARIO = frozenset(f.name for f in FAULT_FAMILIES if f.once_per_scenario)

#: Seconds a crash episode's runs may stay down (one episode in
#: ``DOWNTIME_ODDS``): past the default approval lifetime and wait deadlines
#: of an hour.
DOWNTIME = 4000.0
DOWNTIME_ODDS = 4

#: A swarm gives each of its families a weight from 1 to this: how often an
#: episode is of that family, relative to the others in the swarm.
MAX_WEIGHT = 4


@dataclass(frozen=True)
class Swarm:
    """The fault features one scenario may use: a subset of the universe's
    enabled families, each with a weight, and per family a subset of its
    kinds (:data:`FAMILY_KINDS`)."""

    families: tuple[str, ...]
    weights: tuple[int, ...] = ()
    kinds: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def kinds_of(self, family: str) -> tuple[str, ...]:
        """The kinds of ``family`` this swarm allows (every kind if unsaid)."""
        return self.kinds.get(family) or FAMILY_KINDS.get(family, ())

    def describe(self) -> str:
        """``crash, world[reject,kill_after_apply]``: the scenario's name."""
        parts = []
        for fam in self.families:
            kinds = self.kinds.get(fam)
            shown = f"[{','.join(kinds)}]" if kinds and kinds != FAMILY_KINDS.get(fam) else ""
            parts.append(fam + shown)
        return ", ".join(parts)


def _subset(items: tuple[str, ...]) -> st.SearchStrategy[tuple[str, ...]]:
    """A non-empty subset of ``items`` in their order. Each item is in with
    probability 1/2 (Groce et al.'s coin per feature), so subsets of every
    size are drawn; it shrinks towards the first item alone."""

    def keep(flags: list[bool]) -> tuple[str, ...]:
        chosen = tuple(i for i, on in zip(items, flags, strict=True) if on)
        return chosen or items[:1]

    return st.lists(st.booleans(), min_size=len(items), max_size=len(items)).map(keep)


@st.composite
def swarms(draw: st.DrawFn, u: Universe) -> Swarm:
    """A swarm over ``u``'s enabled families (empty when none is enabled)."""
    enabled = u.enabled()
    if not enabled:
        return Swarm(families=())
    families = draw(_subset(enabled))
    # A weight and a kind subset for every enabled family, in or out: the
    # draws keep their places when the shrinker drops a family, so what
    # follows them (the episodes) is read back unchanged.
    weight = {fam: draw(st.integers(1, MAX_WEIGHT)) for fam in enabled}
    kinds = {fam: draw(_subset(_offered(u, fam))) for fam in enabled if fam in FAMILY_KINDS}
    return Swarm(
        families=families,
        weights=tuple(weight[fam] for fam in families),
        kinds={fam: k for fam, k in kinds.items() if fam in families},
    )


def _offered(u: Universe, family: str) -> tuple[str, ...]:
    """The kinds of ``family`` ``u`` can arm: every kind, but the network
    kinds the adapter's connections let the kernel backend inflict."""
    if family == "network":
        return u.offered_network_kinds() or NETWORK_KINDS
    return FAMILY_KINDS[family]


def _family(draw: st.DrawFn, u: Universe, swarm: Swarm, spent: frozenset[str] = frozenset()) -> str:
    """One family of the swarm, by weight.

    Drawn as a slot of a fixed table (every enabled family, ``MAX_WEIGHT``
    slots each) that the swarm's families and weights open, not as an index
    into the swarm: switching another family off then leaves this draw as
    it was, so the shrinker can drop every family an example does not need.
    ``spent``: families of :data:`ONCE_PER_SCENARIO` the scenario has drawn.
    """
    weights = swarm.weights or (1,) * len(swarm.families)
    weight = dict(zip(swarm.families, weights, strict=True))
    # A family drawn once already that may come once only is out (the
    # scenario ends when nothing else is left: see ``scenarios``).
    if any(f not in spent for f in swarm.families):
        weight = {f: w for f, w in weight.items() if f not in spent}
    order = [*u.enabled(), *(f for f in swarm.families if f not in u.enabled())]
    slots = [(fam, k) for fam in order for k in range(MAX_WEIGHT)]
    fam, _ = draw(st.sampled_from(slots).filter(lambda slot: slot[1] < weight.get(slot[0], 0)))
    return fam


def _kind(draw: st.DrawFn, swarm: Swarm, family: str) -> str:
    """One kind of ``family`` that the swarm allows (stable as ``_family``)."""
    allowed = swarm.kinds_of(family)
    pool = FAMILY_KINDS[family]
    if family == "network" and set(allowed) <= set(NETWORK_KINDS):
        # Drawn as before the proxy's kinds existed: the stream of an
        # adapter whose faults run on netfilter rules stays as it was.
        pool = NETWORK_KINDS
    return draw(st.sampled_from(pool).filter(lambda k: k in allowed))


def _lookup_refused(
    draw: st.DrawFn, effects: list[str], nth: int, kill_alone: bool
) -> list[ArmWorldFault]:
    """The ``lookup_refused`` world kind: the caller of an effect whose
    service offers a lookup is killed right after the service applied it,
    and the lookup the next worker reconciles with is refused or its answer
    lost (where the swarm allows the kill alone, in three draws of four:
    the shrinker can take the refusal away). Nothing, when no effect of the
    runs' has a service with a lookup (a lookup rule there could never
    fire)."""
    looked = [e for e in effects if offers_lookup(e.partition(".")[0])]
    if not looked:
        return []
    service, _, action = draw(st.sampled_from(looked)).partition(".")
    kill = ArmWorldFault(service=service, action=action, nth=nth, mode="kill_after_apply")
    # Where the swarm allows the kill alone (``kill_after_apply``), three
    # draws in four refuse the lookup too; the fourth, 0, is the one the
    # shrinker tries first, so a counterexample keeps the refusal only when
    # the kill alone does not fail. Otherwise the refusal always comes: the
    # episode stays of a kind its swarm allows.
    if kill_alone and draw(st.integers(min_value=0, max_value=3)) == 0:
        return [kill]
    mode = draw(st.sampled_from(LOOKUP_FAULT_MODES))
    return [kill, ArmWorldFault(service=service, action=LOOKUP, nth=1, mode=mode)]


def offers_lookup(service: str) -> bool:
    """Whether the world's ``service`` offers a lookup (by key or business key)."""
    spec = SERVICES.get(service)
    caps = spec.capabilities if spec is not None else None
    return caps is not None and (caps.lookup_by_key or caps.lookup_by_business_key)


@st.composite
def run_specs(draw: st.DrawFn, u: Universe, twins: bool = False) -> tuple[RunSpec, ...]:
    """1 to ``u.max_runs`` runs; with ``twins``, sometimes one the identical
    twin of the run before (see :data:`TWIN_ODDS`; shrinks to no twin)."""
    n = draw(st.integers(min_value=1, max_value=u.max_runs))
    runs: list[RunSpec] = []
    for i in range(n):
        if twins and runs and draw(st.integers(0, TWIN_ODDS - 1)) == TWIN_ODDS - 1:
            runs.append(runs[-1].model_copy(update={"run_id": f"r{i + 1}"}))
            continue
        wf = draw(st.sampled_from(u.workflows))
        payload = draw(st.sampled_from(wf.inputs))
        tenant = draw(st.sampled_from(TENANTS))
        decision = draw(st.sampled_from(("approved", "approved", "approved", "rejected")))
        old = Capability.VERSION_SWITCH in u.capabilities and draw(st.integers(0, 3)) == 0
        runs.append(
            RunSpec(
                run_id=f"r{i + 1}",
                tenant=tenant,
                workflow=wf.name,
                input=dict(payload),
                decision=decision if wf.needs_approval else "approved",
                code_version=1 if old else None,
            )
        )
    return tuple(runs)


def _crash(
    draw: st.DrawFn, u: Universe, action: str = "kill", runs: tuple[RunSpec, ...] = ()
) -> CrashSpec:
    sites = u.pause_points if action == "pause" else u.crash_points
    reached = u.reached(runs, sites)
    # Aim where the workload goes: mostly at the sites its runs pass, at a hit
    # number one worker reaches; sometimes anywhere (recovery code, such as
    # reconciliation, is only passed after a fault).
    if reached and draw(st.integers(0, 3)) > 0:
        site = draw(st.sampled_from(sorted(reached)))
        # The first hit is drawn as often as the later ones together (and is
        # where shrinking goes): a worker passes most sites once per run.
        later = list(range(2, min(reached[site], 6) + 1))
        nth = draw(st.sampled_from([1] * max(1, len(later)) + later))
        return CrashSpec(site=site, nth=nth, action=action)
    site = draw(st.sampled_from(sites))
    nth = draw(st.sampled_from((1, 1, 2, 3)))
    return CrashSpec(site=site, nth=nth, action=action)


@st.composite
def episode(
    draw: st.DrawFn,
    u: Universe,
    runs: tuple[RunSpec, ...],
    n: int,
    swarm: Swarm | None = None,
    spent: frozenset[str] = frozenset(),
) -> list[Step]:
    """One fault episode of a family (and kinds) of ``swarm`` (default: every
    enabled family, every kind); ``n`` makes worker ids unique within the
    scenario; ``spent``: families of :data:`ONCE_PER_SCENARIO` already drawn."""
    swarm = swarm or Swarm(families=u.enabled())
    family = _family(draw, u, swarm, spent)
    return EPISODES[family](draw, u, runs, n, swarm)


#: An episode of one family: (draw, universe, the scenario's runs, its
#: episode number, its swarm) -> steps.
Episode = Callable[[st.DrawFn, Universe, tuple[RunSpec, ...], int, Swarm], list[Step]]


def _run_ids(runs: tuple[RunSpec, ...]) -> list[str]:
    return [r.run_id for r in runs]


def _effects(u: Universe, runs: tuple[RunSpec, ...]) -> list[str]:
    """The effect kinds the runs' workflows make, sorted."""
    return sorted(
        {e for r in runs for wf in u.workflows if wf.name == r.workflow for e in wf.effects}
    )


def _crash_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    """A worker killed at a crash point, then possibly kills during recovery:
    each recovering worker may be killed in turn (a chain that shrinks to
    none), the long runs of one fault that swarms favour."""
    crash = _crash(draw, u, runs=runs)
    steps: list[Step] = [
        *_approved_first(draw, u, _run_ids(runs), n),
        RunWorker(worker_id=f"w{n}", crash=crash),
    ]
    chain = draw(st.integers(min_value=0, max_value=2))
    for k in range(chain):
        tag = "r" * (k + 1)
        steps.append(RunWorker(worker_id=f"w{n}{tag}", crash=_crash(draw, u, runs=runs)))
    # Sometimes the runs stay down past every deadline before anyone
    # resumes them: what was decided or delivered before the crash meets
    # a clock that moved on (an approval that expired meanwhile, a wait
    # whose answer came before its deadline). Shrinks to no downtime.
    if (
        Capability.CLOCK in u.capabilities
        and draw(st.integers(0, DOWNTIME_ODDS - 1)) == DOWNTIME_ODDS - 1
    ):
        steps.append(AdvanceClock(seconds=DOWNTIME))
    return steps


def _zombie_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    """A paused worker outlives its lease; another takes over; it wakes up."""
    return [
        RunWorker(worker_id=f"z{n}", crash=_crash(draw, u, "pause", runs)),
        AdvanceClock(seconds=u.lease_seconds + 1),
        RunWorker(worker_id=f"w{n}"),
        ContinueWorker(worker_id=f"z{n}"),
    ]


def _operator_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    """An operator cancels a run while a worker, paused mid-step, holds it."""
    return [
        RunWorker(worker_id=f"o{n}", crash=_crash(draw, u, "pause", runs)),
        Cancel(run_id=draw(st.sampled_from(_run_ids(runs)))),
        ContinueWorker(worker_id=f"o{n}"),
    ]


def _message_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    variant = _kind(draw, swarm, "message")
    if variant == "while_held":
        return _held_delivery(draw, u, runs, n)
    if variant == "misdirected":
        return _misdirected(draw, u, runs, n)
    # An invalid message may carry the opposite of the approver's
    # decision: a runtime that trusts it then does what was refused.
    opposite = variant not in ("valid", "changed_mind") and draw(st.booleans())
    return [
        RunWorker(worker_id=f"w{n}"),
        Approve(
            run_id=draw(st.sampled_from(_run_ids(runs))),
            variant=variant,
            decision="opposite" if opposite else "planned",
            copies=draw(st.integers(min_value=1, max_value=3)),
            fresh_copies=draw(st.integers(min_value=0, max_value=1)),
        ),
    ]


def _late_approval_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    return [
        RunWorker(worker_id=f"w{n}"),
        AdvanceClock(seconds=draw(st.sampled_from((600.0, 4000.0)))),
        Approve(run_id=draw(st.sampled_from(_run_ids(runs)))),
    ]


def _race(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    return _race_episode(draw, _effects(u, runs), _run_ids(runs), n)


def _world_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    wf_effects = _effects(u, runs)
    kind = draw(st.sampled_from(wf_effects or ["payments.charge"]))
    service, _, action = kind.partition(".")
    mode = _kind(draw, swarm, "world")
    # Mostly the first call from now; sometimes a later one (a retry, the
    # next run's call), so a fault also lands after a recovery.
    nth = draw(st.sampled_from((1, 1, 1, 1, 2, 3)))
    # After a decision only when a run waits for one, and not often: an
    # ungated run would be done before the fault is armed.
    waits = any(wf.needs_approval for r in runs for wf in u.workflows if wf.name == r.workflow)
    first = _approved_first(draw, u, _run_ids(runs), n) if waits and draw(st.booleans()) else []
    armed = (
        _lookup_refused(draw, wf_effects, nth, "kill_after_apply" in swarm.kinds_of("world"))
        if mode == "lookup_refused"
        else [ArmWorldFault(service=service, action=action, nth=nth, mode=mode)]
    )
    return [*first, *armed, RunWorker(worker_id=f"w{n}")]


def _memory_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    kind = _kind(draw, swarm, "memory")
    # Poison is planted where it could do harm: as a stand-in for an
    # approval, so for a run whose workflow asks for one (if any does).
    # Only runs whose workflow has a place to plant at (the universe
    # enables the family when one has): none in this workload, and the
    # episode plants nothing (no fault armed, none counted).
    aimed = tuple(r for r in runs if u.memory_targets(r))
    if not aimed:
        return [RunWorker(worker_id=f"w{n}")]
    gated = tuple(
        r for r in aimed for wf in u.workflows if wf.name == r.workflow and wf.needs_approval
    )
    run = draw(st.sampled_from(gated if kind in GATED_MEMORY_KINDS and gated else aimed))
    namespace, key, value = draw(st.sampled_from(u.memory_targets(run)))
    provenance = "user_supplied" if kind == "poisoned" else "system_verified"
    return [
        InjectMemory(
            tenant=run.tenant,
            namespace=namespace,
            key=key,
            value=value,
            kind=kind,
            provenance=provenance,
        ),
        RunWorker(worker_id=f"w{n}"),
    ]


def _storage(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    return _storage_episode(draw, u, runs, n)


def _network(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    kind = _kind(draw, swarm, "network")
    offered = _offered(u, "network")
    # a swarm made without the universe's kinds: only what the backend can do
    return _network_episode(draw, u, runs, n, kind if kind in offered else offered[0])


def _migration_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    """Crash under old code, resume under the current one; or (rollback)
    this code first, then the older release meets what it wrote (drawn
    either way, so that one declaration does not move the stream)."""
    rollback = _kind(draw, swarm, "migration") == "rollback" and u.rollbacks
    if rollback and u.crash_points:
        return [
            RunWorker(worker_id=f"u{n}", crash=_crash(draw, u, runs=runs)),
            RunWorker(worker_id=f"v{n}", code_version=1, crash=_crash(draw, u, runs=runs)),
        ]
    if not u.crash_points:
        # No crash points: old code runs until its runs wait or end, or until
        # the world kills it at an effect boundary.
        old: list[Step] = []
        wf_effects = _effects(u, runs)
        kill: bool = draw(st.booleans())
        if wf_effects and kill:
            service, _, action = draw(st.sampled_from(wf_effects)).partition(".")
            old.append(
                ArmWorldFault(service=service, action=action, nth=1, mode="kill_after_apply")
            )
        return [*old, RunWorker(worker_id=f"v{n}", code_version=1)]
    return [RunWorker(worker_id=f"v{n}", code_version=1, crash=_crash(draw, u, runs=runs))]


def _model_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    """A model fault at one of the next model calls (a fault of a tool
    call's arguments: at one of the next replies that call a tool)."""
    mode = _kind(draw, swarm, "model")
    nth = draw(st.sampled_from((1, 1, 1, 2, 3)))
    if mode in TOOL_REPLY_MODES:
        # a tool's service answers one of its next calls without the reference
        effect = draw(st.sampled_from(_effects(u, runs) or ["payments.charge"]))
        service, _, name = effect.partition(".")
        armed: Step = ArmWorldFault(service=service, action=name or None, nth=nth, mode=mode)
        return [armed, RunWorker(worker_id=f"w{n}")]
    action = "tool_call" if mode in ("malformed_arguments", "missing_argument") else None
    return [ArmModelFault(mode=mode, action=action, nth=nth), RunWorker(worker_id=f"w{n}")]


#: Each fault family's episode for the sampled search (one per family of
#: ``harness.vocabulary.FAULT_FAMILIES``: a test keeps the two in step).
EPISODES: Mapping[str, Episode] = {
    "crash": _crash_episode,
    "zombie": _zombie_episode,
    "message": _message_episode,
    "late_approval": _late_approval_episode,
    "world": _world_episode,
    "memory": _memory_episode,
    "migration": _migration_episode,
    "storage": _storage,
    "race": _race,
    "operator": _operator_episode,
    "network": _network,
    "model": _model_episode,
}


def _gated(u: Universe, runs: tuple[RunSpec, ...]) -> list[RunSpec]:
    """The runs whose workflow waits for an approval."""
    return [r for r in runs for wf in u.workflows if wf.name == r.workflow and wf.needs_approval]


def _misdirected(draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int) -> list[Step]:
    """A decision genuinely signed for another run's approval, addressed to
    a run of the same tenant: its identical twin's (same role and
    parameters: only the approval differs), submitted here when the
    workload has none, or another gated run of the tenant's. Its decision
    may be the opposite of the addressee's approver's. Without a gated
    run, a valid decision."""
    gated = _gated(u, runs)
    if not gated:
        return [RunWorker(worker_id=f"w{n}"), Approve(run_id=draw(st.sampled_from(runs)).run_id)]
    pairs = [(a, b) for a in gated for b in gated if a.run_id != b.run_id and a.tenant == b.tenant]
    twins = [(a, b) for a, b in pairs if (a.workflow, a.input) == (b.workflow, b.input)]
    submit: list[Step] = []
    if twins or (pairs and bool(draw(st.booleans()))):
        to, signer = draw(st.sampled_from(twins or pairs))
    else:
        to = draw(st.sampled_from(gated))
        # A run id no other step uses: the workload's are r1..rN.
        signer = to.model_copy(update={"run_id": f"r{len(runs) + 1}x{n}"})
        submit = [Submit(run=signer)]
    return [
        *submit,
        RunWorker(worker_id=f"w{n}"),
        Approve(
            run_id=to.run_id,
            variant="misdirected",
            decision="opposite" if draw(st.booleans()) else "planned",
            signed_for=signer.run_id,
        ),
    ]


def _held_delivery(draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int) -> list[Step]:
    """The approver's decision delivered while a worker holds the run
    between its inbox read and the commit that acknowledges what it read
    (as the targeted ``deliver_while_held``): the runs brought to their
    waits, a message to ignore (a forged decision) makes the run claimable,
    the next worker is paused at a pause point the runs pass, the valid
    decision arrives, the worker goes on. Without pause points, a valid
    decision."""
    run_id = draw(st.sampled_from([r.run_id for r in _gated(u, runs)] or [runs[0].run_id]))
    # Where the runs pass, if the site profile says; else any pause point.
    reached = u.reached(runs, u.pause_points) or dict.fromkeys(u.pause_points, 1)
    if not reached:
        return [RunWorker(worker_id=f"w{n}"), Approve(run_id=run_id)]
    site = draw(st.sampled_from(sorted(reached)))
    nth = draw(st.integers(min_value=1, max_value=min(reached[site], 3)))
    return [
        RunWorker(worker_id=f"w{n}"),
        Approve(run_id=run_id, variant="forged"),
        RunWorker(worker_id=f"h{n}", crash=CrashSpec(site=site, nth=nth, action="pause")),
        Approve(run_id=run_id),
        ContinueWorker(worker_id=f"h{n}"),
    ]


def _approved_first(draw: st.DrawFn, u: Universe, run_ids: list[str], n: int) -> list[Step]:
    """Maybe bring the runs to their approval waits and approve them first, so
    that the fault that follows hits the resume after a decision: the
    inbound message, the re-check and the gated effect (as ``_race_episode``).
    Shrinks to nothing."""
    if Capability.APPROVALS not in u.capabilities or not draw(st.booleans()):
        return []
    return [RunWorker(worker_id=f"p{n}"), *(Approve(run_id=r) for r in run_ids)]


def _race_episode(draw: st.DrawFn, effects: list[str], run_ids: list[str], n: int) -> list[Step]:
    """Two workers at once on the same runs, the first held inside a slowed effect.

    Optionally the runs are first brought to their approval waits and
    approved, so that the race is on the resume after the approval.
    """
    steps: list[Step] = []
    if draw(st.booleans()):
        steps += [RunWorker(worker_id=f"w{n}"), *(Approve(run_id=r) for r in run_ids)]
    service, _, action = draw(st.sampled_from(effects or ["payments.charge"])).partition(".")
    return [
        *steps,
        ArmWorldFault(service=service, action=action, nth=1, mode="slow", delay=RACE_DELAY),
        RaceWorkers(worker_ids=(f"a{n}", f"b{n}")),
    ]


def _storage_episode(draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int) -> list[Step]:
    """Hold a worker, cut its storage connections, let it go on.

    Held *inside* a transaction (a crash point that is not a pause point), the
    cut kills the transaction: nothing of that checkpoint may be committed.
    Held *between* steps, its pooled connections die while idle: the next use
    must notice and carry on with fresh ones. Either way the run must end as
    if nothing happened.
    """
    # Held where the workload's runs actually pass (the site profile): a
    # pause that never fires leaves no worker holding a connection, and the
    # cut then finds nothing to cut (armed, never fired).
    reached = u.reached(runs, (*u.in_transaction_points(), *u.pause_points))
    inside = tuple(s for s in u.in_transaction_points() if s in reached) or (
        u.in_transaction_points()
    )
    idle = tuple(s for s in u.pause_points if s in reached) or u.pause_points
    variants = [v for v, ok in (("in_transaction", inside), ("idle", idle)) if ok]
    variant = draw(st.sampled_from(variants))
    site = draw(st.sampled_from(inside if variant == "in_transaction" else idle))
    nth = draw(st.integers(min_value=1, max_value=min(3, reached.get(site, 3))))
    kinds = draw(
        st.lists(st.sampled_from(u.offered_storage_kinds()), min_size=1, max_size=2, unique=True)
    )
    return [
        RunWorker(worker_id=f"s{n}", crash=CrashSpec(site=site, nth=nth, action="pause")),
        *(StorageFault(kind=k) for k in kinds),
        ContinueWorker(worker_id=f"s{n}"),
    ]


def _network_sites(u: Universe, runs: tuple[RunSpec, ...], kind: str) -> dict[str, int]:
    """Where a worker is paused for a network fault of ``kind``, with hit
    bounds: for a lost acknowledgement, the last in-transaction crash point
    of each commit the workload's fault-free runs made (right before the
    COMMIT); for a reset, the other in-transaction points (between two
    statements); for a partition, the pause points. Without a profile,
    every in-transaction point; without any, the pause points (between
    steps: the next commit is hit)."""
    if kind == "partition":
        # Held between steps, holding the run's lease (see _network_episode).
        return u.reached(runs, u.pause_points) or _network_sites(u, runs, "reset_mid_transaction")
    in_txn = frozenset(u.in_transaction_points())
    ends: set[str] = set()
    for r in runs:
        p = u.profiles.get(r.workflow)
        if p is not None:
            ends.update(c.last[0] for c in p.commits(in_txn))
    reached = u.reached(runs, tuple(in_txn))
    if kind == "commit_ack_lost":
        aimed = {s: n for s, n in reached.items() if s in ends}
    else:
        aimed = {s: n for s, n in reached.items() if s not in ends}
    if aimed:
        return aimed
    if in_txn:
        return reached or dict.fromkeys(sorted(in_txn), 3)
    return u.reached(runs, u.pause_points) or dict.fromkeys(u.pause_points, 3)


def _network_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, kind: str
) -> list[Step]:
    """Pause a worker inside a commit, then lose that commit's
    acknowledgement or reset its connection (see :mod:`harness.nemesis._network`);
    or pause it between steps and partition it from the store past its
    lease while another worker takes over (with the clock only: a lost
    acknowledgement instead). Maybe after the runs' decisions, so it lands
    on the resume's commits."""
    if kind == "partition" and Capability.CLOCK not in u.capabilities:
        kind = "commit_ack_lost"
    # A reply held back, and a COMMIT lost on its way, are aimed where an
    # acknowledgement is lost (right before a COMMIT); a fragmented or cut
    # reply where a reset is (between two statements).
    aim = {"latency": "commit_ack_lost", "slow_reply": "reset_mid_transaction"}
    aim["commit_lost"] = "commit_ack_lost"
    aim["cut_reply"] = "reset_mid_transaction"
    sites = _network_sites(u, runs, aim.get(kind, kind))
    if not sites:  # nowhere to hold the worker between steps: inside a commit
        kind = "commit_ack_lost"
        sites = _network_sites(u, runs, kind)
    site = draw(st.sampled_from(sorted(sites)))
    later = list(range(2, min(sites[site], 6) + 1))
    nth = draw(st.sampled_from([1] * max(1, len(later)) + later))
    kinds: dict[str, NetworkKind] = {
        "commit_ack_lost": "commit_ack_lost",
        "reset_mid_transaction": "reset_mid_transaction",
        "partition": "partition",
        "latency": "latency",
        "slow_reply": "slow_reply",
        "cut_reply": "cut_reply",
        "commit_lost": "commit_lost",
    }
    return [
        *_approved_first(draw, u, [r.run_id for r in runs], n),
        RunWorker(worker_id=f"n{n}", crash=CrashSpec(site=site, nth=nth, action="pause")),
        NetworkFault(kind=kinds[kind], worker_id=f"n{n}"),
    ]


def _of_family(steps: list[Step], family: str) -> bool:
    """Whether an episode's ``steps`` are of ``family`` (network: a NetworkFault)."""
    return family == "network" and any(isinstance(s, NetworkFault) for s in steps)


@st.composite
def scenarios(draw: st.DrawFn, u: Universe, swarm: Swarm | None = None) -> Scenario:
    """A workload, then 1 to ``u.max_episodes`` episodes of one swarm (drawn
    first, unless given), then a quiesce. The scenario's name is its swarm.
    With no family enabled, the workload alone runs (and quiesces)."""
    swarm = swarm if swarm is not None else draw(swarms(u))
    twins = "message" in swarm.families and "misdirected" in swarm.kinds_of("message")
    runs = draw(run_specs(u, twins=twins))
    steps: list[Step] = [Submit(run=r) for r in runs]
    if swarm.families:
        n_episodes = draw(st.integers(min_value=1, max_value=u.max_episodes))
        spent: frozenset[str] = frozenset()
        for i in range(n_episodes):
            if spent >= set(swarm.families):
                break  # every family of the swarm may come once only, and has
            ep = draw(episode(u, runs, i, swarm, spent))
            spent |= {fam for fam in ONCE_PER_SCENARIO if _of_family(ep, fam)}
            steps.extend(ep)
    steps.append(Quiesce())
    return Scenario(name=f"swarm: {swarm.describe() or 'none'}", steps=tuple(steps))
