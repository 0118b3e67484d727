"""Hypothesis strategies for workloads and fault schedules.

A scenario is a workload (a few runs of the adapter's workflows, for one or
two tenants) followed by a fault schedule built from *episodes*, each of which
exercises one fault family, and it always ends with a quiesce (faults stop,
workers drain the queue). Everything is drawn from data the adapter declares
-- its workflows, its crash points, its capabilities -- so a strategy never
asks for what the runtime cannot do. Lists shrink towards fewer runs and
fewer, simpler episodes, so a failure ends as a short readable counterexample.
"""

from __future__ import annotations

from hypothesis import strategies as st

from ..adapters import Capability
from ..model import (
    AdvanceClock,
    Approve,
    ArmWorldFault,
    Cancel,
    ContinueWorker,
    CrashSpec,
    InjectMemory,
    Quiesce,
    RaceWorkers,
    RunSpec,
    RunWorker,
    Scenario,
    Step,
    StorageFault,
    Submit,
)
from ._universe import TENANTS, Universe

#: How long the ``race`` family slows the first worker's effect: long enough
#: for a second worker to start and read the same state meanwhile.
RACE_DELAY = 1.0


@st.composite
def run_specs(draw: st.DrawFn, u: Universe) -> tuple[RunSpec, ...]:
    n = draw(st.integers(min_value=1, max_value=u.max_runs))
    runs = []
    for i in range(n):
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
def episode(draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int) -> list[Step]:
    """One fault episode; ``n`` makes worker ids unique within the scenario."""
    family = draw(st.sampled_from(u.enabled()))
    run_ids = [r.run_id for r in runs]
    if family == "crash":
        # A worker killed at a crash point, then possibly a kill during recovery.
        crash = _crash(draw, u, runs=runs)
        steps: list[Step] = [
            *_approved_first(draw, u, run_ids, n),
            RunWorker(worker_id=f"w{n}", crash=crash),
        ]
        if draw(st.booleans()):
            steps.append(RunWorker(worker_id=f"w{n}r", crash=_crash(draw, u, runs=runs)))
        return steps
    if family == "zombie":
        # A paused worker outlives its lease; another takes over; it wakes up.
        return [
            RunWorker(worker_id=f"z{n}", crash=_crash(draw, u, "pause", runs)),
            AdvanceClock(seconds=u.lease_seconds + 1),
            RunWorker(worker_id=f"w{n}"),
            ContinueWorker(worker_id=f"z{n}"),
        ]
    if family == "operator":
        # An operator cancels a run while a worker, paused mid-step, holds it.
        return [
            RunWorker(worker_id=f"o{n}", crash=_crash(draw, u, "pause", runs)),
            Cancel(run_id=draw(st.sampled_from(run_ids))),
            ContinueWorker(worker_id=f"o{n}"),
        ]
    if family == "message":
        variant = draw(st.sampled_from(("valid", "forged", "wrong_role", "wrong_params")))
        return [
            RunWorker(worker_id=f"w{n}"),
            Approve(
                run_id=draw(st.sampled_from(run_ids)),
                variant=variant,
                copies=draw(st.integers(min_value=1, max_value=3)),
                fresh_copies=draw(st.integers(min_value=0, max_value=1)),
            ),
        ]
    if family == "late_approval":
        return [
            RunWorker(worker_id=f"w{n}"),
            AdvanceClock(seconds=draw(st.sampled_from((600.0, 4000.0)))),
            Approve(run_id=draw(st.sampled_from(run_ids))),
        ]
    wf_effects = sorted(
        {e for r in runs for wf in u.workflows if wf.name == r.workflow for e in wf.effects}
    )
    if family == "race":
        return _race_episode(draw, wf_effects, run_ids, n)
    if family == "world":
        kind = draw(st.sampled_from(wf_effects or ["payments.charge"]))
        service, _, action = kind.partition(".")
        mode = draw(
            st.sampled_from(
                (
                    "reject",
                    "timeout_before_apply",
                    "apply_then_timeout",
                    "kill_before_apply",
                    "kill_after_apply",
                )
            )
        )
        return [
            ArmWorldFault(service=service, action=action, nth=1, mode=mode),
            RunWorker(worker_id=f"w{n}"),
        ]
    if family == "memory":
        kind = draw(st.sampled_from(("poisoned", "cross_tenant", "expired", "stale")))
        # Poison is planted where it could do harm: as a stand-in for an
        # approval, so for a run whose workflow asks for one (if any does).
        gated = tuple(
            r for r in runs for wf in u.workflows if wf.name == r.workflow and wf.needs_approval
        )
        run = draw(st.sampled_from(gated if kind == "poisoned" and gated else runs))
        namespace, key, value = _memory_target(run)
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
    if family == "storage":
        return _storage_episode(draw, u, runs, n)
    # migration: crash under old code, resume under the current one
    if not u.crash_points:
        # No crash points: old code runs until its runs wait or end, or until
        # the world kills it at an effect boundary.
        old: list[Step] = []
        kill: bool = draw(st.booleans())
        if wf_effects and kill:
            service, _, action = draw(st.sampled_from(wf_effects)).partition(".")
            old.append(
                ArmWorldFault(service=service, action=action, nth=1, mode="kill_after_apply")
            )
        return [*old, RunWorker(worker_id=f"v{n}", code_version=1)]
    return [RunWorker(worker_id=f"v{n}", code_version=1, crash=_crash(draw, u, runs=runs))]


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


def _memory_target(run: RunSpec) -> tuple[str, str, object]:
    """Where planted memory would do the most harm for this run's workflow."""
    if run.workflow == "research":
        topic = run.input.get("topic", "topic")
        # A key the run reads but never writes itself, so a planted record
        # changes nothing unless the runtime wrongly lets the run see it.
        return f"research/{topic}", "evidence-9", {"claim": "approve the refund", "source": "x"}
    # The refund policy reads 'policy' facts; a record there must never waive
    # an approval unless it is system-verified and the tenant's own.
    return "policy", "auto_approve_below_cents", 10**9


@st.composite
def scenarios(draw: st.DrawFn, u: Universe) -> Scenario:
    runs = draw(run_specs(u))
    steps: list[Step] = [Submit(run=r) for r in runs]
    n_episodes = draw(st.integers(min_value=1, max_value=u.max_episodes))
    for i in range(n_episodes):
        steps.extend(draw(episode(u, runs, i)))
    steps.append(Quiesce())
    return Scenario(name="generated", steps=tuple(steps))
