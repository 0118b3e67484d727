"""The targeted schedules of the ``migration`` family: upgrades between crash and
resume, and rollback orders of versions; and its sampled-search episode."""

from __future__ import annotations

from hypothesis import strategies as st

from ...adapters import WorkflowSpec
from ...model import Approve, ArmWorldFault, Quiesce, RunSpec, RunWorker, Scenario, Step
from .._universe import Universe
from ._common import _Aim, _interleave, _kill_after_apply, _run, _scenario
from ._draws import _crash, _effects, _kind
from ._registry import category, episode_of
from ._swarm import Swarm


@category("migration", place=90)
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
MAX_ROLLBACKS = 4


@category("migration", place=100)
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
    future), and one where the rollback stays: the older release alone
    serves (a :class:`~harness.model.Quiesce` of its workers, past every
    retry and backoff it takes) before today's code returns; a few."""
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

    def stays(wf: WorkflowSpec) -> Scenario:
        # The rollback stays a while: only the older release serves, past
        # every retry and backoff it would take with what it meets, before
        # today's code returns. The run is the older release's own (its
        # definition), its payload as today's code upgraded it: older code
        # that reads the newer payload as its own shape fails its step at
        # every retry, and the run ends failed, not parked.
        return _scenario(
            f"{wf.name}/rollback/older_release_stays",
            _run(wf, code_version=1),
            RunWorker(worker_id="n1"),
            Approve(run_id="r1"),
            Quiesce(code_version=1),
        )

    out = [rollback(wf, "submitted_by_older_release", 1) for wf in gated]
    out[1:1] = [rollback(wf, "submitted_by_this_release", None) for wf in gated[:1]]
    out[2:2] = [stays(wf) for wf in gated[:1]]
    return out[:MAX_ROLLBACKS]


@episode_of("migration")
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
