"""Targeted schedules: built from what an adapter declares and from the site
profile, never from a runtime's site names; small, deterministic, and within
the capabilities offered."""

from __future__ import annotations

from harness.adapters._contract import Capability, WorkflowSpec
from harness.adapters._loading import load_adapter
from harness.model import Cancel, InjectMemory, RunWorker
from harness.scenarios import EffectSite, Universe, WorkflowProfile, profile_workflow, targeted

CAPS = frozenset(Capability) - {Capability.STORAGE_FAULTS}

PAY = WorkflowSpec(name="pay", inputs=({"x": 1},), needs_approval=True, effects=("bank.pay",))
LOOK = WorkflowSpec(name="look", inputs=({"topic": "t"},), effects=("mail.send",))

#: a made-up runtime: sites named a..h, 'tx*' inside a transaction
ROUND0 = (("a", 1), ("tx1", 1), ("tx2", 1), ("b", 1))
ROUND1 = (("a", 1), ("c", 1), ("tx1", 1), ("tx2", 1), ("d", 1), ("e", 1), ("f", 1))
PROFILES = {
    "pay": WorkflowProfile(
        "pay",
        hits={"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "tx1": 1, "tx2": 1},
        rounds=(ROUND0, ROUND1),
        resume_round=1,
        effect_sites=(EffectSite("bank.pay", 1, "f", 1, approach=ROUND1),),
    ),
    "look": WorkflowProfile(
        "look",
        hits={"a": 1, "b": 1, "tx1": 1, "tx2": 1},
        rounds=(ROUND0,),
        effect_sites=(EffectSite("mail.send", 0, "b", 1, approach=ROUND0),),
    ),
}


def universe(caps: frozenset[Capability] = CAPS, **kw: object) -> Universe:
    return Universe(
        workflows=(LOOK, PAY),
        crash_points=("a", "b", "c", "d", "e", "f", "tx1", "tx2"),
        pause_points=("a", "b", "c", "d", "e", "f"),
        capabilities=caps,
        profiles=PROFILES,
        site_hits={k: p.hits for k, p in PROFILES.items()},
        **kw,  # type: ignore[arg-type]
    )


def test_targeted_schedules_are_small_unique_and_deterministic() -> None:
    first, again = targeted(universe()), targeted(universe())
    assert [s.model_dump_json() for s in first] == [s.model_dump_json() for s in again]
    names = [s.name for s in first]
    assert len(names) == len(set(names))
    for s in first:
        assert len(s.runs) == 1, s.name
        assert len(s.steps) <= 8, s.name


def test_schedules_are_aimed_by_the_profile_and_gated_workflows_come_first() -> None:
    names = [s.name for s in targeted(universe())]
    assert names[0] == "targeted/pay/kill_after_apply/bank.pay"
    # the first commit after the decision, statement by statement
    assert "targeted/pay/kill_in_first_commit/tx1@1" in names
    assert "targeted/pay/kill_in_first_commit/tx2@1" in names
    # zombies at the last pausable boundaries before the effect, nearest first
    zombies = [n for n in names if n.startswith("targeted/pay/zombie_before/")]
    assert zombies == [f"targeted/pay/zombie_before/bank.pay/{s}@1" for s in ("f", "e", "d", "c")]
    # the operator cancels while the worker waits right before its last commit
    assert "targeted/pay/cancel_while_held/bank.pay/c@1" in names
    # a long outage only where an approval could expire
    assert "targeted/pay/outage_before/bank.pay" in names
    assert not [n for n in names if n.startswith("targeted/look/outage")]


def test_the_first_round_holds_one_scenario_of_every_category() -> None:
    """Breadth-first: no class of bug waits for another class's sweep."""
    names = [s.name for s in targeted(universe())]
    kinds = [n.split("/")[2] for n in names]
    first_round = {
        "kill_after_apply",
        "duplicate_decision",
        "memory",
        "upgrade_mid_run",
        "outage_before",
        "kill_in_first_commit",
        "cancel_while_held",
        "kill_before",
        "zombie_before",
    }
    assert set(kinds[: len(first_round)]) == first_round
    # within a category, the variants before the same variant elsewhere
    assert [n for n in names if "_decision" in n][:4] == [
        f"targeted/pay/{v}_decision" for v in ("duplicate", "forged", "wrong_role", "wrong_params")
    ]


def test_no_schedule_needs_a_capability_the_adapter_lacks() -> None:
    caps = CAPS - {Capability.CANCEL, Capability.MEMORY_INJECTION, Capability.VERSION_SWITCH}
    scenarios = targeted(universe(caps))
    steps = [step for s in scenarios for step in s.steps]
    assert not [x for x in steps if isinstance(x, (Cancel, InjectMemory))]
    assert not [x for x in steps if isinstance(x, RunWorker) and x.code_version is not None]
    # without crash points or profiles: only what the world and messages can do
    bare = Universe(workflows=(LOOK, PAY), crash_points=(), capabilities=caps)
    for s in targeted(bare):
        assert all(not (isinstance(x, RunWorker) and x.crash) for x in s.steps), s.name


def test_the_profile_of_a_real_runtime_finds_the_site_right_before_each_effect() -> None:
    adapter = load_adapter("reference", {})
    onboarding = next(w for w in adapter.workflows() if w.name == "onboarding")
    profile = profile_workflow(adapter, onboarding)
    assert profile.resume_round == 1  # one approval: the second worker resumes
    effects = {es.effect: es for es in profile.effect_sites}
    assert set(effects) == set(onboarding.effects)
    # identity.verify comes before the approval (round 0); the first effect
    # after it is the account's creation
    assert effects["identity.verify"].round == 0
    first = effects["provisioning.create_account"]
    assert first.round == 1
    assert first.approach[-1] == (first.site, first.nth)
    # the approach is the resume round's trace up to that site
    assert profile.resume_sites()[: len(first.approach)] == first.approach
