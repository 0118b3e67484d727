"""Swarm testing: each sampled scenario draws a subset of the enabled fault
families and kinds, then draws its episodes from that subset only."""

from __future__ import annotations

from typing import Any

from hypothesis import find, given, settings
from hypothesis import strategies as st

from harness.adapters import Capability, MemoryTarget, WorkflowSpec
from harness.model import (
    AdvanceClock,
    Approve,
    ArmWorldFault,
    Cancel,
    ContinueWorker,
    InjectMemory,
    Quiesce,
    RaceWorkers,
    RunWorker,
    Scenario,
    StorageFault,
    Submit,
)
from harness.nemesis import validate
from harness.scenarios import Universe, scenarios
from harness.scenarios._schedules.commits import DOWNTIME
from harness.scenarios._strategies import FAMILY_KINDS, Swarm, swarms

WORKFLOWS = (
    WorkflowSpec(
        name="refund",
        inputs=({"order": "o-1", "amount_cents": 500},),
        effects=("payments.refund", "email.send"),
        needs_approval=True,
        memory_targets=(MemoryTarget(namespace="policy", key="waive_below", value=10**9),),
    ),
    WorkflowSpec(
        name="digest",
        inputs=({"topic": "tides"},),
        effects=("email.send",),
        memory_targets=(MemoryTarget(namespace="notes/{topic}", key="n-9", value="x"),),
    ),
)
BETWEEN = ("after_intent_commit", "before_effect")
INSIDE = ("checkpoint_stmt_1",)
LEASE = 30.0


def universe(capabilities: frozenset[Capability] = frozenset(Capability), **kw: Any) -> Universe:
    base: dict[str, Any] = {
        "workflows": WORKFLOWS,
        "crash_points": (*BETWEEN, *INSIDE) if Capability.CRASH_POINTS in capabilities else (),
        "pause_points": BETWEEN if Capability.CRASH_POINTS in capabilities else (),
        "capabilities": capabilities,
        "lease_seconds": LEASE,
        "storage_kinds": ("pg_terminate",),
    }
    return Universe(**{**base, **kw})


def families_used(scenario: Scenario) -> set[str]:
    """The fault families a scenario's steps show, each by a step only that
    family draws (a valid single approval is also the crash and world
    families' way to bring runs past their approval, so it shows none)."""
    used: set[str] = set()
    steps = scenario.steps
    for i, step in enumerate(steps):
        after_kill = (
            i > 0 and isinstance(steps[i - 1], RunWorker) and steps[i - 1].crash is not None
        )  # type: ignore[union-attr]
        if isinstance(step, AdvanceClock) and step.seconds == DOWNTIME and after_kill:
            used.add("crash")  # the runs left down past every deadline after a crash
        elif isinstance(step, RunWorker):
            if step.code_version is not None:
                used.add("migration")
            elif step.worker_id.startswith("z"):
                used.add("zombie")
            elif step.crash is not None and step.crash.action == "kill":
                used.add("crash")
        elif isinstance(step, Cancel):
            used.add("operator")
        elif isinstance(step, StorageFault):
            used.add("storage")
        elif isinstance(step, RaceWorkers):
            used.add("race")
        elif isinstance(step, InjectMemory):
            used.add("memory")
        elif isinstance(step, ArmWorldFault) and step.mode != "slow":
            used.add("world")
        elif isinstance(step, AdvanceClock) and step.seconds != LEASE + 1:
            used.add("late_approval")
        elif isinstance(step, Approve) and (
            step.variant != "valid" or step.copies > 1 or step.fresh_copies
        ):
            used.add("message")
    return used


def _held_after(steps: tuple[Any, ...], i: int) -> bool:
    """Whether a worker paused, the valid decision and its continuation
    follow step ``i`` (the ``while_held`` shape of the message family)."""
    nxt = steps[i + 1 : i + 4]
    return (
        len(nxt) == 3
        and isinstance(nxt[0], RunWorker)
        and nxt[0].crash is not None
        and nxt[0].crash.action == "pause"
        and isinstance(nxt[1], Approve)
        and nxt[1].variant == "valid"
        and isinstance(nxt[2], ContinueWorker)
    )


def kinds_used(scenario: Scenario) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"world": set(), "memory": set(), "message": set()}
    steps = scenario.steps
    for i, step in enumerate(steps):
        lookup_next = (
            i + 1 < len(steps)
            and isinstance(steps[i + 1], ArmWorldFault)
            and steps[i + 1].action == "lookup"  # type: ignore[union-attr]
        )
        if isinstance(step, ArmWorldFault) and step.action == "lookup":
            out["world"].add("lookup_refused")
        elif isinstance(step, ArmWorldFault) and lookup_next:
            continue  # the kill that makes the next worker reconcile, of lookup_refused
        elif isinstance(step, ArmWorldFault) and step.mode != "slow":
            out["world"].add(step.mode)
        elif isinstance(step, InjectMemory):
            out["memory"].add(step.kind)
        elif isinstance(step, Approve) and step.variant == "forged" and _held_after(steps, i):
            out["message"].add("while_held")  # its message to ignore, then the held worker
        elif isinstance(step, Approve) and step.variant != "valid":
            out["message"].add(step.variant)
    return out


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_scenario_uses_only_the_families_and_kinds_of_its_swarm(data: st.DataObject) -> None:
    u = universe(families=("crash", "zombie", "message", "late_approval", "world", "memory"))
    swarm: Swarm = data.draw(swarms(u))
    assert swarm.families and set(swarm.families) <= set(u.enabled())
    assert len(swarm.weights) == len(swarm.families)
    scenario: Scenario = data.draw(scenarios(u, swarm=swarm))
    assert families_used(scenario) <= set(swarm.families), (swarm, scenario.describe())
    for family, kinds in kinds_used(scenario).items():
        assert kinds <= set(swarm.kinds_of(family)), (family, swarm, scenario.describe())
    assert scenario.name == f"swarm: {swarm.describe()}"


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_every_scenario_is_valid_for_what_the_adapter_declares(data: st.DataObject) -> None:
    caps = frozenset(data.draw(st.sets(st.sampled_from(list(Capability)))))
    u = universe(caps)
    scenario: Scenario = data.draw(scenarios(u))
    validate(scenario, caps)  # raises ScenarioError naming a step the adapter cannot take
    assert isinstance(scenario.steps[-1], Quiesce)
    for step in scenario.steps:
        if isinstance(step, RunWorker):
            assert step.code_version is None or Capability.VERSION_SWITCH in caps
            if step.crash is not None:
                # (the storage family also holds a worker inside a transaction)
                assert step.crash.site in u.crash_points
        if isinstance(step, Submit):
            assert step.run.code_version is None or Capability.VERSION_SWITCH in caps
        if isinstance(step, Approve) and step.variant != "valid":
            assert Capability.APPROVALS in caps
    if not u.enabled():
        assert scenario.name == "swarm: none" and len(families_used(scenario)) == 0


def test_swarms_of_every_size_are_drawn_and_kinds_are_subsets_too() -> None:
    u = universe()
    sizes: set[int] = set()

    @settings(max_examples=200, deadline=None, database=None, derandomize=True)
    @given(swarms(u))
    def collect(swarm: Swarm) -> None:
        sizes.add(len(swarm.families))
        for fam, kinds in swarm.kinds.items():
            assert kinds and set(kinds) <= set(FAMILY_KINDS[fam])

    collect()
    assert {1, 2, 3, 4} <= sizes, sizes


def test_a_failure_that_needs_one_kind_shrinks_to_a_swarm_of_that_kind_alone() -> None:
    u = universe()
    found = find(
        scenarios(u),
        lambda s: any(isinstance(x, InjectMemory) and x.kind == "stale" for x in s.steps),
        settings=settings(max_examples=2000, database=None),
    )
    assert found.name == "swarm: memory[stale]", found.name
    assert families_used(found) == {"memory"}
    assert len(found.runs) == 1
    # one episode: plant the record, run a worker; then quiesce
    assert len(found.steps) == 1 + 2 + 1, found.describe()


def test_a_refused_lookup_follows_a_kill_after_an_effect_whose_service_has_one() -> None:
    found = find(
        scenarios(universe()),
        lambda s: any(isinstance(x, ArmWorldFault) and x.action == "lookup" for x in s.steps),
        settings=settings(max_examples=2000, database=None),
    )
    assert found.name == "swarm: world[lookup_refused]", found.name
    kill, lookup = [x for x in found.steps if isinstance(x, ArmWorldFault)]
    assert (kill.service, kill.action, kill.mode) == ("payments", "refund", "kill_after_apply")
    assert (lookup.service, lookup.action, lookup.mode) == ("payments", "lookup", "reject")


def test_a_failure_that_needs_two_families_keeps_exactly_those_two() -> None:
    u = universe()
    found = find(
        scenarios(u),
        lambda s: {"crash", "world"} <= families_used(s),
        # derandomized: a random search's shrink sometimes kept a third
        # family's episode (seen once in a few runs), a flaky CI failure
        settings=settings(max_examples=2000, database=None, derandomize=True),
    )
    assert families_used(found) == {"crash", "world"}, found.describe()
    assert found.name.startswith("swarm: crash, world"), found.name


def test_a_swarm_of_one_family_draws_a_long_run_of_it() -> None:
    """What uniform mixing rarely draws: several episodes of one kind in a row."""
    u = universe()
    found = find(
        scenarios(u),
        # world episodes (a lookup_refused one arms its lookup rule after its kill)
        lambda s: (
            sum(
                isinstance(x, ArmWorldFault) and x.mode != "slow" and x.action != "lookup"
                for x in s.steps
            )
            >= 3
        ),
        settings=settings(max_examples=2000, database=None, derandomize=True),
    )
    assert families_used(found) == {"world"}, found.describe()
    assert len(kinds_used(found)["world"]) == 1, found.describe()
