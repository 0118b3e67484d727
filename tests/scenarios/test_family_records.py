"""The fault families' records (``harness.vocabulary``) are the one place a
family is named: the tables derived from them, the sampled search's
episodes, the targeted schedules, the runner's step handlers and the docs
must all agree with them. A family's parts register themselves from the
modules its record names (``handlers``, ``schedules``): these tests fail
when one is missing or sits elsewhere."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_targeted import universe

from harness.model import Approve, ArmModelFault, NetworkFault, NetworkKind, Scenario, Step
from harness.nemesis import FIRED_EVENTS, HANDLERS, fires_at, handles, needs
from harness.outcome import KIND_FAMILY
from harness.report import CAPABILITY_GAPS
from harness.runner._steps import STEPS
from harness.scenarios import FAMILIES
from harness.scenarios._schedules._common import _aim
from harness.scenarios._schedules._registry import categories, category, episode_of, episodes
from harness.scenarios._strategies import (
    EPISODES,
    FAMILY_KINDS,
    ONCE_PER_SCENARIO,
    Swarm,
    episode,
    run_specs,
)
from harness.vocabulary import (
    FAMILY,
    FAULT_FAMILIES,
    PROXY_NETWORK_KINDS,
    Capability,
    FaultFamily,
    family_table,
)
from harness.world import MODEL

ROOT = Path(__file__).resolve().parents[2]
SCHEDULES = "harness.scenarios._schedules."
NEMESIS = "harness.nemesis."
#: a made-up universe that offers every capability, so every family is on
EVERYTHING = universe(frozenset(Capability))


def test_every_family_has_an_episode_and_every_step_a_handler() -> None:
    assert set(EPISODES) == set(FAMILIES)
    assert tuple(EPISODES) == FAMILIES  # in the records' order
    step_types = typing.get_args(typing.get_args(Step)[0])
    assert step_types, "the Step union was not read"
    assert set(STEPS) == set(step_types)
    # the runner performs the client steps; every other step is a fault
    # step that a family's handler module registered
    client = {t.__name__ for t in set(step_types) - set(HANDLERS)}
    assert client == {"Submit", "RunWorker", "Quiesce"}


@pytest.mark.parametrize("family", FAULT_FAMILIES, ids=lambda f: f.name)
def test_a_family_registers_its_parts_from_the_modules_its_record_names(
    family: FaultFamily,
) -> None:
    ep = episodes()[family.name]
    assert ep.draw.__module__ == SCHEDULES + family.schedules
    own = [c for c in [*categories(), *categories(sweeps=True)] if c.family == family.name]
    assert own, f"{family.name} has no targeted schedules"
    assert {c.schedules.__module__ for c in own} == {SCHEDULES + family.schedules}
    if family.once_per_scenario:
        # how a scenario is seen to hold one already
        assert ep.marks, f"{family.name} comes once a scenario but marks none of its steps"
    if family.handlers is not None:
        mine = [t for t, h in HANDLERS.items() if h.__module__ == NEMESIS + family.handlers]
        assert mine, f"{NEMESIS}{family.handlers} registers no handler"


def test_every_handler_and_fired_rule_reader_is_a_family_module_s() -> None:
    named = {NEMESIS + f.handlers for f in FAULT_FAMILIES if f.handlers}
    assert {h.__module__ for h in HANDLERS.values()} <= named
    assert {r.__module__ for r in FIRED_EVENTS.values()} <= named
    assert FIRED_EVENTS[MODEL].__module__ == f"{NEMESIS}{FAMILY['model'].handlers}"


def _steps_of(scenario: Scenario) -> set[type]:
    return {type(s) for s in scenario.steps}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_step_a_family_makes_has_a_handler(family: str) -> None:
    """A family's step types are those its episode and its targeted
    schedules make (on a universe that offers everything): each has one."""
    made: set[type] = set()
    aim = _aim(EVERYTHING)
    for c in [*categories(), *categories(sweeps=True)]:
        if c.family == family:
            for s in c.schedules(aim):
                made |= _steps_of(s)
    swarm = Swarm(families=(family,))

    @settings(
        max_examples=40,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def draw(data: st.DataObject) -> None:
        runs = data.draw(run_specs(EVERYTHING))
        made.update(type(s) for s in data.draw(episode(EVERYTHING, runs, 0, swarm)))

    draw()
    assert made, f"{family} made no step"
    assert made <= set(STEPS), f"{family}: no handler for {made - set(STEPS)}"


def test_a_second_handler_episode_or_place_is_refused_where_it_is_declared() -> None:
    taken = categories()[0]
    with pytest.raises(RuntimeError, match=f"place {taken.place} in the plan"):
        category("crash", place=taken.place)(lambda a: [])
    with pytest.raises(RuntimeError, match="already has an episode"):
        episode_of("model")(lambda *a: [])
    with pytest.raises(ValueError, match="unknown fault family 'tsunami'"):
        episode_of("tsunami")
    with pytest.raises(RuntimeError, match="ArmModelFault already has a handler"):
        handles(ArmModelFault)(lambda ctx, step: None)
    with pytest.raises(RuntimeError, match="already read"):
        fires_at(MODEL)(lambda f: ("", {}))
    with pytest.raises(ValueError, match="names no schedules module"):
        FaultFamily("tsunami", "a wave", None, reported=("wave",))


def test_the_derived_tables_come_from_the_records() -> None:
    assert tuple(f.name for f in FAULT_FAMILIES) == FAMILIES
    reported = [k for f in FAULT_FAMILIES for k in f.reported]
    assert len(reported) == len(set(reported)), "a fault kind reported by two families"
    assert {k: KIND_FAMILY[k] for k in reported} == dict(KIND_FAMILY)
    assert {f.name for f in FAULT_FAMILIES if f.variants} == set(FAMILY_KINDS)
    assert {"network"} == ONCE_PER_SCENARIO
    assert set(CAPABILITY_GAPS) == set(Capability)
    # every network kind a step may ask for is a variant of the family
    assert set(typing.get_args(NetworkKind)) == set(PROXY_NETWORK_KINDS)
    # every message an Approve step delivers is a variant of the message
    # family (while_held is an episode's shape: a valid decision, held)
    approve = typing.get_args(Approve.model_fields["variant"].annotation)
    assert set(approve) == set(FAMILY["message"].variants) - {"while_held"}


def test_each_step_says_which_capability_it_needs() -> None:
    from harness.model import AdvanceClock, Cancel, Quiesce

    assert needs(AdvanceClock(seconds=1.0)) == (
        Capability.CLOCK,
        "advancing the clock needs the clock capability",
    )
    assert needs(Cancel(run_id="r")) == (
        Capability.CANCEL,
        "cancelling a run needs the cancel capability",
    )
    network = needs(NetworkFault(kind="partition", worker_id="w"))
    assert network is not None and network[0] is Capability.NETWORK_FAULTS
    assert needs(Quiesce()) is None


def test_docs_faults_md_holds_the_table_the_records_render() -> None:
    text = (ROOT / "docs" / "faults.md").read_text()
    held = re.search(
        r"<!-- family table: begin -->\n(.*?)<!-- family table: end -->", text, re.DOTALL
    )
    assert held is not None, "docs/faults.md lost its table markers"
    assert held.group(1) == family_table(), (
        "docs/faults.md's table differs from the records: regenerate it "
        "(the command is in docs/faults.md)"
    )


def test_the_readme_counts_the_families() -> None:
    words = {10: "ten", 11: "eleven", 12: "twelve", 13: "thirteen", 14: "fourteen"}
    readme = (ROOT / "README.md").read_text()
    assert f"{words[len(FAMILIES)]} fault families" in readme


def test_an_older_release_quiesce_needs_version_switch_and_keeps_old_json() -> None:
    from harness.model import Quiesce, Scenario

    # scenario files and example databases written before it stay the same
    assert Quiesce().model_dump_json() == '{"op":"quiesce","approve_waits":true}'
    older = Quiesce(code_version=1)
    assert needs(older) == (
        Capability.VERSION_SWITCH,
        "the older release's workers need the version_switch capability",
    )
    assert needs(Quiesce()) is None
    again = Scenario.model_validate_json(Scenario(name="s", steps=(older,)).model_dump_json())
    assert again.steps == (older,)
