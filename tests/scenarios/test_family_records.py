"""The fault families' records (``harness.vocabulary``) are the one place a
family is named: the tables derived from them, the sampled search's
episodes, the runner's step handlers and the docs must all agree with them."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from harness.model import Approve, NetworkKind, Step
from harness.nemesis import needs
from harness.outcome import KIND_FAMILY
from harness.report import CAPABILITY_GAPS
from harness.runner._steps import STEPS
from harness.scenarios import FAMILIES
from harness.scenarios._strategies import EPISODES, FAMILY_KINDS, ONCE_PER_SCENARIO
from harness.vocabulary import (
    FAMILY,
    FAULT_FAMILIES,
    PROXY_NETWORK_KINDS,
    Capability,
    family_table,
)

ROOT = Path(__file__).resolve().parents[2]


def test_every_family_has_an_episode_and_every_step_a_handler() -> None:
    assert set(EPISODES) == set(FAMILIES)
    step_types = typing.get_args(typing.get_args(Step)[0])
    assert step_types, "the Step union was not read"
    assert set(STEPS) == set(step_types)


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
    from harness.model import AdvanceClock, Cancel, NetworkFault, Quiesce

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
