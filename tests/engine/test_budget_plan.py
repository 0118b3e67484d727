"""Planning a search on real time (issue 18): the targeted list's order."""

from __future__ import annotations

import pytest

from harness.adapters.reference import ReferenceAdapter
from harness.scenarios import Universe, probe_universe, targeted

#: the category of a targeted schedule, by the kind its name carries
#: (``targeted/WORKFLOW/KIND/...``)
CATEGORY = {
    "kill_after_apply": "world kills",
    "duplicate_decision": "messages",
    "forged_decision": "messages",
    "wrong_role_decision": "messages",
    "wrong_params_decision": "messages",
    "forged_rejection": "messages",
    "memory": "memory",
    "upgrade_mid_run": "upgrades",
    "outage_before": "outages",
    "kill_in_first_commit": "first commit",
    "cancel_while_held": "operator",
    "kill_before": "kills before",
    "zombie_before": "zombies",
    "storage_cut_in_commit": "storage",
    "storage_cut_idle": "storage",
    "apply_then_timeout": "world modes",
    "timeout_before_apply": "world modes",
    "reject": "world modes",
    "kill_before_apply": "world modes",
    "slow": "world modes",
    "service_down": "service outages",
    "memory_before_clock": "memory and clock",
    "memory_after_clock": "memory and clock",
    "kill_after_handoff": "commit kills",
    "kill_after_commit": "commit kills",
    "barrier_race": "barriers",
}


@pytest.fixture(scope="module")
def reference_universe() -> Universe:
    return probe_universe(ReferenceAdapter())


def test_every_category_gets_its_first_round_before_any_gets_a_second(
    reference_universe: Universe,
) -> None:
    names = [s.name for s in targeted(reference_universe)]
    cats = [CATEGORY[n.split("/")[2]] for n in names]
    first = {c: cats.index(c) for c in set(cats)}
    # the first commit's kills are two categories (its ends, its middle)
    seconds = [
        i for i, c in enumerate(cats) if i != first[c] and not (c == "first commit" and i < 20)
    ]
    assert len(first) >= 14, sorted(first)  # every category the reference offers
    assert max(first.values()) < min(seconds), (names[: len(first) + 2], sorted(first.items()))


def test_the_order_is_the_same_each_time(reference_universe: Universe) -> None:
    again = probe_universe(ReferenceAdapter())
    first, second = targeted(reference_universe), targeted(again)
    assert [s.model_dump_json() for s in first] == [s.model_dump_json() for s in second]
