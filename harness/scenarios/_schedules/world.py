"""The targeted schedules of the ``world`` family: the world kills the caller right
after applying an effect, every other fault mode at every effect, refused
lookups, outages, identical twin runs whose effects a service deduplicates
by key; and its sampled-search episode."""

from __future__ import annotations

from hypothesis import strategies as st

from ...model import ArmWorldFault, RunSpec, RunWorker, Scenario, Step, Submit
from ...world import LOOKUP, LOOKUP_FAULT_MODES, SERVICES
from .._universe import Universe
from ._common import (
    _Aim,
    _interleave,
    _keyed,
    _kill_after_apply,
    _run,
    _scenario,
)
from ._draws import _approved_first, _effects, _kind, _run_ids
from ._registry import category, episode_of, sweep
from ._swarm import Swarm

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


@category("world", place=10)
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


@sweep("world", place=10)
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


@sweep("world", place=20)
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


@sweep("world", place=30)
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


@episode_of("world")
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


#: identical-twin schedules at most (one per workflow with a keyed effect)
MAX_RUN_TWINS = 2


@category("world", place=60)
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
