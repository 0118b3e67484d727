"""Targeted schedules of the ``world`` family: the world kills the caller right
after applying an effect, every other fault mode at every effect, refused
lookups, outages."""

from __future__ import annotations

from ...model import ArmWorldFault, CrashSpec, RunWorker, Scenario
from ...world import LOOKUP, LOOKUP_FAULT_MODES
from .._strategies import offers_lookup
from ._common import (
    _Aim,
    _interleave,
    _kill_after_apply,
    _run,
    _scenario,
)

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
