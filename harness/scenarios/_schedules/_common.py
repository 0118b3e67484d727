"""What every targeted schedule is made of: the run, the scenario around it,
the worker rounds that bring a run to an effect, and the aim (:class:`_Aim`)."""

from __future__ import annotations

from dataclasses import dataclass

from ...adapters import WorkflowSpec
from ...model import (
    Approve,
    ArmWorldFault,
    CrashSpec,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Step,
    Submit,
)
from ...world import SERVICES
from .._profile import Commit, EffectSite, WorkflowProfile
from .._universe import Universe

#: a long outage: longer than any approval should live (a day and a bit)
OUTAGE_SECONDS = 90_000.0


#: every kind of planted memory, each before and after the clock moves
#: (not ``trusted``: a live, verified record of the tenant's own is no fault,
#: and may rightly change what the run is allowed to do)
MEMORY_KINDS = ("poisoned", "cross_tenant", "expired", "stale", "stale_reordered")


#: shapes of planted memory aimed at once, not swept with the clock
MEMORY_SHAPES = ("lapsed_newest", "untrusted_newest")


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


def _keyed(eff: str) -> bool:
    """Whether the world's service of effect ``eff`` deduplicates by key."""
    spec = SERVICES.get(eff.partition(".")[0])
    return spec is not None and spec.capabilities.idempotency_keys


def _effect_of(s: Scenario) -> str:
    """The effect kind a ``.../zombie_before/EFFECT/SITE@N`` schedule aims at."""
    return s.name.split("/")[3]


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


def _aim(u: Universe) -> _Aim:
    return _Aim(
        u=u,
        # Workflows that need a decision first: that is where most is at stake.
        workflows=tuple(sorted(u.workflows, key=lambda w: not w.needs_approval)),
        families=frozenset(u.enabled()),
        in_txn=frozenset(u.in_transaction_points()),
        pausable=frozenset(u.pause_points),
    )
