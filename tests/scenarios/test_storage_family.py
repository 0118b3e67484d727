"""The ``storage`` fault family: drawn only where the adapter can take it, and
always as pause -> cut -> continue of one worker with its own id."""

from __future__ import annotations

from typing import Any

from hypothesis import find, given, settings
from hypothesis import strategies as st

from harness.adapters._contract import (
    STORAGE_KINDS,
    Capability,
    WorkflowSpec,
    offered_storage_kinds,
)
from harness.model import ContinueWorker, RunWorker, Scenario, StorageFault
from harness.scenarios import Universe, episode, scenarios

WORKFLOWS = (WorkflowSpec(name="procurement", inputs=({"item": "bolts"},)),)
INSIDE = ("checkpoint_stmt_1", "checkpoint_stmt_2")
BETWEEN = ("after_intent_commit", "before_lease_acquire")


def universe(**changes: Any) -> Universe:
    base: dict[str, Any] = {
        "workflows": WORKFLOWS,
        "crash_points": (*BETWEEN, *INSIDE),
        "pause_points": BETWEEN,
        "capabilities": frozenset({Capability.CRASH_POINTS, Capability.STORAGE_FAULTS}),
        "families": ("storage",),
        "storage_kinds": ("pg_terminate",),
    }
    return Universe(**{**base, **changes})


def test_the_storage_family_needs_the_capability_and_a_kind_to_inflict() -> None:
    assert universe().enabled() == ("storage",)
    no_cap = frozenset({Capability.CRASH_POINTS})
    assert universe(capabilities=no_cap).enabled() == ()
    assert universe(storage_kinds=()).enabled() == ()
    # Not probed: every kind is assumed, as for an adapter without storage_kinds().
    assert universe(storage_kinds=None).offered_storage_kinds() == STORAGE_KINDS
    # Nowhere to hold a worker: nothing to cut it at.
    assert universe(crash_points=(), pause_points=()).enabled() == ()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_storage_scenario_pauses_cuts_and_continues_workers_with_unique_ids(
    data: st.DataObject,
) -> None:
    u = universe(storage_kinds=STORAGE_KINDS)
    scenario: Scenario = data.draw(scenarios(u))
    started = [s.worker_id for s in scenario.steps if isinstance(s, RunWorker)]
    assert len(started) == len(set(started)), started
    steps = list(scenario.steps)
    for i, step in enumerate(steps):
        if not isinstance(step, RunWorker):
            continue
        assert step.crash is not None and step.crash.action == "pause"
        assert step.crash.site in INSIDE + BETWEEN
        cuts = []
        j = i + 1
        while isinstance(steps[j], StorageFault):
            cuts.append(steps[j].kind)  # type: ignore[union-attr]
            j += 1
        assert cuts and len(cuts) == len(set(cuts)) and set(cuts) <= set(STORAGE_KINDS)
        assert steps[j] == ContinueWorker(worker_id=step.worker_id)


def test_both_variants_are_drawn_inside_a_transaction_and_between_steps() -> None:
    u = universe()
    runs = ()
    for sites in (INSIDE, BETWEEN):
        found = find(
            episode(u, runs, 0),
            lambda steps, sites=sites: steps[0].crash.site in sites,  # type: ignore[misc]
        )
        assert isinstance(found[0], RunWorker) and found[0].crash is not None
        assert found[0].crash.site in sites


class _Env:
    """Just enough of an environment for offered_storage_kinds."""

    def __init__(self, kinds: tuple[str, ...] | None) -> None:
        if kinds is not None:
            self.storage_kinds = lambda: kinds


def test_offered_storage_kinds_defaults_to_every_kind_and_drops_unknown_ones() -> None:
    cap = frozenset({Capability.STORAGE_FAULTS})
    assert offered_storage_kinds(_Env(None), cap) == STORAGE_KINDS  # type: ignore[arg-type]
    assert offered_storage_kinds(_Env(("redis_client_kill", "x")), cap) == (  # type: ignore[arg-type]
        "redis_client_kill",
    )
    assert offered_storage_kinds(_Env(None), frozenset()) == ()  # type: ignore[arg-type]
