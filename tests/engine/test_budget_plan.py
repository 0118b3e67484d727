"""Planning a search on real time (issue 18): the targeted list's order, and
the upgrade mid-run of an adapter without crash points."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from upgrade_toy import UpgradeToy

from harness._settings import load_settings
from harness.adapters.reference import ReferenceAdapter
from harness.model import Verdict
from harness.scenarios import Universe, probe_universe, targeted
from harness.session import Engine

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


@pytest.fixture
def engine_for() -> Iterator[type[Engine]]:
    engines: list[Engine] = []

    def make(adapter: UpgradeToy) -> Engine:
        engine = Engine(adapter, load_settings("dev", seed=0))
        engines.append(engine)
        return engine

    yield make  # type: ignore[misc]
    for engine in engines:
        engine.close()


def _upgrades(u: Universe) -> list[str]:
    return [s.name for s in targeted(u) if s.name.split("/")[2] == "upgrade_mid_run"]


def test_without_crash_points_the_old_code_is_stopped_at_each_effect(
    reference_universe: Universe,
) -> None:
    u = probe_universe(UpgradeToy())
    assert not u.crash_points
    assert _upgrades(u) == [
        "targeted/order/upgrade_mid_run/kill_after_apply/payments.charge",
        "targeted/order/upgrade_mid_run/kill_after_apply/email.send",
        "targeted/order/upgrade_mid_run",
    ]
    # with crash points, the schedule is the one it was
    assert _upgrades(reference_universe) == [
        f"targeted/{wf}/upgrade_mid_run"
        for wf in ("refund", "onboarding", "research", "procurement")
    ]


def _failed(engine: Engine, name: str, u: Universe) -> list[str]:
    scenario = next(s for s in targeted(u) if s.name == name)
    example = engine.execute(scenario)
    return [r.name for r in example.results if r.verdict is Verdict.FAIL]


def test_a_reordering_release_is_found_only_when_old_code_stops_mid_run(engine_for) -> None:  # type: ignore[no-untyped-def]
    buggy = UpgradeToy("step")
    u = probe_universe(buggy)
    engine = engine_for(buggy)
    # old code run to its end, then the new release: nothing to see
    assert _failed(engine, "targeted/order/upgrade_mid_run", u) == []
    # old code killed right after its charge, resumed by the new release:
    # the charge again, under another key
    name = "targeted/order/upgrade_mid_run/kill_after_apply/payments.charge"
    failed = _failed(engine, name, u)
    assert "exactly_once_effects" in failed, failed
    # the same schedule against a release that keys calls by what they do
    careful = UpgradeToy("action")
    assert _failed(engine_for(careful), name, probe_universe(careful)) == []
