"""Targeted schedules: the faults that break durable runtimes, aimed first.

Before sampling, a search runs a short, fixed list of one-run scenarios, each
one fault aimed where the workflow's site profile (:mod:`harness._profile`)
says it hurts most: the world killing a worker right after it applied an
effect, a decision delivered twice, memory planted before the run reads it, a
kill inside the first commit after a decision, a zombie paused right before an
effect, an operator cancelling a run a worker holds, a long outage between an
approval and its effect, an upgrade between
crash and resume. Jepsen's nemeses are aimed the same way; Hypothesis's
explicit ``@example`` runs before generation for the same reason: the schedules
that matter most should not wait for the dice.

The list is built only from what the adapter declares (workflows, effects,
capabilities, crash points) and from the profile's site order, never from a
runtime's site names. Every scenario is already minimal (one run, one fault),
so a failure needs no shrinking. Categories are interleaved across
workflows, cheapest first.
"""

from __future__ import annotations

from harness._profile import EffectSite, WorkflowProfile
from harness.adapters._contract import Capability, WorkflowSpec
from harness.model import (
    AdvanceClock,
    Approve,
    ArmWorldFault,
    Cancel,
    ContinueWorker,
    CrashSpec,
    InjectMemory,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Step,
    Submit,
)

from ._strategies import Universe, _memory_target

#: a long outage: longer than any approval should live (a day and a bit)
OUTAGE_SECONDS = 90_000.0
#: in-transaction sites of the first commit after a decision, aimed at first
MAX_TXN_SITES = 8
#: boundaries before an effect at which a zombie is paused, nearest first
ZOMBIE_SITES = 4


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


def _rounds(n: int, run_id: str, approvals: bool) -> list[Step]:
    """Workers to bring a run to round ``n``, its decision delivered after each."""
    out: list[Step] = []
    for i in range(n):
        out.append(RunWorker(worker_id=f"p{i}"))
        if approvals:
            out.append(Approve(run_id=run_id))
    return out


def targeted(u: Universe) -> list[Scenario]:
    """The targeted schedules for ``u``, in the order they should run."""
    caps = u.capabilities
    approvals = Capability.APPROVALS in caps
    families = set(u.enabled())
    # Workflows that need a decision first: that is where most is at stake.
    workflows = sorted(u.workflows, key=lambda w: not w.needs_approval)
    cats: list[list[Scenario]] = []

    # 1. The world kills the worker right after applying each effect.
    if "world" in families:
        cats.append(
            [
                _scenario(
                    f"{wf.name}/kill_after_apply/{eff}",
                    _run(wf),
                    ArmWorldFault(
                        service=eff.partition(".")[0],
                        action=eff.partition(".")[2] or None,
                        mode="kill_after_apply",
                    ),
                    RunWorker(worker_id="w1"),
                )
                for wf in workflows
                for eff in wf.effects
            ]
        )
    # 2. The decision is delivered twice (same message id).
    if "message" in families:
        cats.append(
            [
                _scenario(
                    f"{wf.name}/duplicate_decision",
                    _run(wf),
                    RunWorker(worker_id="w1"),
                    Approve(run_id="r1", copies=2),
                )
                for wf in workflows
                if wf.needs_approval
            ]
            + [
                # and decisions the runtime must refuse at the door
                _scenario(
                    f"{wf.name}/{variant}_decision",
                    _run(wf),
                    RunWorker(worker_id="w1"),
                    Approve(run_id="r1", variant=variant),
                )
                for wf in workflows[:1]
                if wf.needs_approval
                for variant in ("forged", "wrong_role", "wrong_params")
            ]
        )
    # 3. Memory planted before the run reads it: user-supplied text where an
    # approval could be waived, other tenants' / expired / superseded records
    # where the run gathers evidence.
    if "memory" in families:
        plants = []
        for wf in workflows:
            run = _run(wf)
            namespace, key, value = _memory_target(run)
            kinds = ("poisoned",) if wf.needs_approval else ("cross_tenant", "expired", "stale")
            for kind in kinds:
                plants.append(
                    _scenario(
                        f"{wf.name}/memory/{kind}",
                        run,
                        InjectMemory(
                            tenant=run.tenant,
                            namespace=namespace,
                            key=key,
                            value=value,
                            kind=kind,
                            provenance="user_supplied" if kind == "poisoned" else "system_verified",
                        ),
                        RunWorker(worker_id="w1"),
                    )
                )
        cats.append(plants)

    profiles = {wf.name: u.profiles.get(wf.name) for wf in workflows}
    later: list[Scenario] = []
    in_txn = set(u.in_transaction_points())
    pausable = set(u.pause_points)
    if "crash" in families:
        # 4. A kill inside the first commit after the decision (or the first
        # commit of all, with none), statement by statement.
        sweeps: list[list[Scenario]] = []
        for wf in workflows:
            p = profiles[wf.name]
            if p is None:
                continue
            first: list[tuple[str, int]] = []
            for site, n in p.resume_sites():
                if site in in_txn:
                    first.append((site, n))
                elif first:
                    break
            sweeps.append(
                [
                    _scenario(
                        f"{wf.name}/kill_in_first_commit/{site}@{n}",
                        _run(wf),
                        *_rounds(p.resume_round, "r1", approvals),
                        RunWorker(worker_id="w1", crash=CrashSpec(site=site, nth=n)),
                    )
                    for site, n in first[:MAX_TXN_SITES]
                ]
            )
        # Across workflows: every workflow's first and last statement now (a
        # commit split in two shows at one of its ends), the middle ones last.
        ends = [g[:1] + g[-1:] if len(g) > 1 else g for g in sweeps]
        middles = [g[1:-1] for g in sweeps]
        cats.append([s for group in _zip(ends) for s in group])
        later = [s for group in _zip(middles) for s in group]
    if "operator" in families:
        # 5. An operator cancels the run while a worker paused right before its
        # last commit ahead of an effect holds it: that commit must not undo
        # the cancellation.
        cats.append(
            [
                _scenario(
                    f"{wf.name}/cancel_while_held/{es.effect}/{site}@{n}",
                    _run(wf),
                    *_rounds(es.round, "r1", approvals),
                    RunWorker(worker_id="o1", crash=CrashSpec(site=site, nth=n, action="pause")),
                    Cancel(run_id="r1"),
                    ContinueWorker(worker_id="o1"),
                )
                for wf in workflows
                for es in _effect_sites(profiles[wf.name])[:1]
                for site, n in _before_last_commit(es, pausable, in_txn)
            ]
        )
    if "zombie" in families:
        # 6. A worker paused just before an effect outlives its lease; another
        # takes over; the first wakes up and carries on. Paused at each of the
        # last few boundaries before the call, nearest first: a runtime checks
        # its lease at one of them, and only a pause before that check tests it.
        zombies: list[list[Scenario]] = []
        for wf in workflows:
            for es in _effect_sites(profiles[wf.name]):
                near = [(site, n) for site, n in reversed(es.approach) if site in pausable]
                zombies.append(
                    [
                        _scenario(
                            f"{wf.name}/zombie_before/{es.effect}/{site}@{n}",
                            _run(wf),
                            *_rounds(es.round, "r1", approvals),
                            RunWorker(
                                worker_id="z1", crash=CrashSpec(site=site, nth=n, action="pause")
                            ),
                            AdvanceClock(seconds=u.lease_seconds + 1),
                            RunWorker(worker_id="w1"),
                            ContinueWorker(worker_id="z1"),
                        )
                        for site, n in near[:ZOMBIE_SITES]
                    ]
                )
        cats.append([s for group in _zip(zombies) for s in group])
    if "late_approval" in families and approvals:
        # 6. A long outage between the decision and the gated effect: the
        # worker dies right before the effect, nothing runs for a day.
        cats.append(
            [
                _scenario(
                    f"{wf.name}/outage_before/{es.effect}",
                    _run(wf),
                    *_rounds(es.round, "r1", approvals),
                    RunWorker(worker_id="w1", crash=CrashSpec(site=es.site, nth=es.nth)),
                    AdvanceClock(seconds=OUTAGE_SECONDS),
                )
                for wf in workflows
                if wf.needs_approval
                for es in _effect_sites(profiles[wf.name])
                if es.round >= _resume_round(profiles[wf.name])
            ]
        )
    if "migration" in families:
        # 7. Submitted and started by the previous release, resumed by this one.
        cats.append(
            [
                _scenario(
                    f"{wf.name}/upgrade_mid_run",
                    _run(wf, code_version=1),
                    RunWorker(worker_id="v1", code_version=1),
                )
                for wf in workflows
            ]
        )
    if "crash" in families:
        # 8. A kill right before each effect (intent persisted, no call yet).
        cats.append(
            [
                _scenario(
                    f"{wf.name}/kill_before/{es.effect}",
                    _run(wf),
                    *_rounds(es.round, "r1", approvals),
                    RunWorker(worker_id="w1", crash=CrashSpec(site=es.site, nth=es.nth)),
                )
                for wf in workflows
                for es in _effect_sites(profiles[wf.name])
            ]
        )
    cats.append(later)
    out: list[Scenario] = []
    seen: set[str] = set()
    for cat in cats:
        for s in cat:
            key = s.model_dump_json()
            if key not in seen:
                seen.add(key)
                out.append(s)
    return out


def _effect_sites(profile: WorkflowProfile | None) -> tuple[EffectSite, ...]:
    return () if profile is None else profile.effect_sites


def _before_last_commit(
    es: EffectSite, pausable: set[str], in_txn: set[str]
) -> list[tuple[str, int]]:
    """The pausable site right before the last commit on the way to an effect."""
    path = list(es.approach)
    for i in range(len(path) - 1, 0, -1):
        if path[i][0] in in_txn and path[i - 1][0] in pausable:
            return [path[i - 1]]
    return []


def _resume_round(profile: WorkflowProfile | None) -> int:
    return 0 if profile is None else profile.resume_round


def _zip(groups: list[list[Scenario]]) -> list[list[Scenario]]:
    """Round-robin: the first of each group, then the second of each, ..."""
    out: list[list[Scenario]] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out.append([g[i] for g in groups if i < len(g)])
    return out
