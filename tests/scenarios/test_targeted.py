"""Targeted schedules: built from what an adapter declares and from the site
profile, never from a runtime's site names; small, deterministic, and within
the capabilities offered."""

from __future__ import annotations

from dataclasses import replace

from harness.adapters._contract import Capability, MemoryTarget, WorkflowSpec
from harness.adapters._loading import load_adapter
from harness.model import (
    AdvanceClock,
    Approve,
    ArmWorldFault,
    Cancel,
    CrashSpec,
    InjectMemory,
    ReleaseWorkers,
    RunWorker,
)
from harness.scenarios import (
    Commit,
    EffectSite,
    Universe,
    WorkflowProfile,
    profile_workflow,
    targeted,
)
from harness.scenarios._schedules._common import MEMORY_KINDS, schedule_kind
from harness.scenarios._schedules.world import OUTAGE_CALLS, WORLD_MODES
from harness.scenarios._universe import PLANTED_KEY

CAPS = frozenset(Capability) - {Capability.STORAGE_FAULTS}

PAY = WorkflowSpec(
    name="pay",
    inputs=({"x": 1},),
    needs_approval=True,
    effects=("bank.pay",),
    memory_targets=(MemoryTarget(namespace="rules", key="waive_below", value=10**9),),
)
LOOK = WorkflowSpec(
    name="look",
    inputs=({"topic": "t"},),
    effects=("mail.send",),
    memory_targets=(MemoryTarget(namespace="notes/{topic}", key="n-9", value={"claim": "x"}),),
)

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
    profiles = kw.pop("profiles", PROFILES)
    workflows = kw.pop("workflows", (LOOK, PAY))
    kw.setdefault("rollbacks", True)
    return Universe(
        workflows=workflows,  # type: ignore[arg-type]
        crash_points=("a", "b", "c", "d", "e", "f", "tx1", "tx2"),
        pause_points=("a", "b", "c", "d", "e", "f"),
        capabilities=caps,
        profiles=profiles,  # type: ignore[arg-type]
        site_hits={k: p.hits for k, p in PROFILES.items()},
        **kw,  # type: ignore[arg-type]
    )


def test_targeted_schedules_are_small_unique_and_deterministic() -> None:
    first, again = targeted(universe()), targeted(universe())
    assert [s.model_dump_json() for s in first] == [s.model_dump_json() for s in again]
    names = [s.name for s in first]
    assert len(names) == len(set(names))
    for s in first:
        # one run; two only where the same run is submitted twice
        twice = any(f"/{k}" in s.name for k in ("tenant_twin/", "run_twin/", "misdirected_"))
        assert len(s.runs) == (2 if twice else 1), s.name
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
    # the clock jumps past a gated run's wait for its decision, withheld
    assert "targeted/pay/deadline_passes/approval" in names


def test_the_first_round_holds_one_scenario_of_every_category() -> None:
    """Breadth-first: no class of bug waits for another class's sweep."""
    names = [s.name for s in targeted(universe())]
    kinds = [n.split("/")[2] for n in names]
    first_round = {
        "kill_after_apply",
        "duplicate_decision",
        "memory",
        "tenant_twin",
        "deliver_while_held",
        "memory_while_down",
        "upgrade_mid_run",
        "rollback",
        "outage_before",
        "deadline_passes",
        "kill_in_first_commit",
        "last_window",
        "cancel_while_held",
        "kill_before",
        "zombie_before",
        "apply_then_timeout",
        "service_down",
        "commit_ack_lost",
        # the model family (the test universe declares model_endpoint)
        "model_rate_limited_then_kill",
        "model_rate_limited",
        "tool_reply_missing_ref",
    }
    assert set(kinds[: len(first_round)]) == first_round
    # the systematic sweeps take two places a round: each begins by the third
    sweeps = {"memory_before_clock", "kill_after_commit", "barrier_race"}
    assert sweeps <= set(kinds[: 3 * len(first_round)])
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


def test_every_world_fault_mode_is_aimed_at_every_declared_effect() -> None:
    scenarios = targeted(universe())
    armed = {
        (s.runs[0].workflow, f"{x.service}.{x.action}", x.mode)
        for s in scenarios
        for x in s.steps
        if isinstance(x, ArmWorldFault) and x.calls == 1
    }
    for wf in (LOOK, PAY):
        for effect in wf.effects:
            for mode in (*WORLD_MODES, "kill_after_apply"):
                assert (wf.name, effect, mode) in armed
    # all modes at one effect before the same mode at another
    modes = [n.split("/")[2] for n in (s.name for s in scenarios)]
    pay = [n for n, s in zip(modes, scenarios, strict=True) if s.name.endswith("/bank.pay")]
    assert [m for m in pay if m in WORLD_MODES] == list(WORLD_MODES)


def test_the_lookup_reconciling_each_effect_is_refused_where_its_service_offers_one() -> None:
    wf = WorkflowSpec(
        name="acct",
        inputs=({"x": 1},),
        effects=("provisioning.create_account", "email.send", "payments.charge"),
    )
    scenarios = targeted(Universe(workflows=(wf,), crash_points=(), capabilities=CAPS))
    lookups = [s for s in scenarios if "/lookup_" in s.name]
    # both modes at one effect before the next's; none where there is no lookup
    assert [s.name for s in lookups] == [
        "targeted/acct/lookup_reject/provisioning.create_account",
        "targeted/acct/lookup_timeout_before_apply/provisioning.create_account",
        "targeted/acct/lookup_reject/payments.charge",
        "targeted/acct/lookup_timeout_before_apply/payments.charge",
    ]
    for s in lookups:
        kill, lookup = [x for x in s.steps if isinstance(x, ArmWorldFault)]
        service, action = s.name.rsplit("/", 1)[1].split(".")
        assert (kill.service, kill.action, kill.mode) == (service, action, "kill_after_apply")
        mode = s.name.split("/")[2].removeprefix("lookup_")
        assert (lookup.service, lookup.action, lookup.mode) == (service, "lookup", mode)


def test_a_persistent_outage_turns_every_call_of_each_service_away() -> None:
    outages = [s for s in targeted(universe()) if "/service_down/" in s.name]
    assert [s.name for s in outages] == [
        "targeted/pay/service_down/bank",
        "targeted/look/service_down/mail",
    ]
    for s in outages:
        [arm] = [x for x in s.steps if isinstance(x, ArmWorldFault)]
        assert (arm.mode, arm.action, arm.calls) == ("unavailable", None, OUTAGE_CALLS)


def test_every_memory_kind_is_planted_before_and_after_the_clock_at_read_and_written_keys() -> None:
    look = replace(PROFILES["look"], memory_keys=(("notes/t", "n-0"),))
    u = universe(profiles={**PROFILES, "look": look})
    seen = set()
    for s in targeted(u):
        if "_clock/" not in s.name:
            continue
        ops = [type(x) for x in s.steps]
        plant = next(x for x in s.steps if isinstance(x, InjectMemory))
        when = "before" if ops.index(InjectMemory) < ops.index(AdvanceClock) else "after"
        assert f"memory_{when}_clock" in s.name
        # the run starts only once both have happened
        assert ops.index(RunWorker) > max(ops.index(InjectMemory), ops.index(AdvanceClock))
        written = (plant.namespace, plant.key) == ("notes/t", "n-0")
        assert plant.at_written_key == written
        if plant.kind == "expired":
            # before: live when planted, lapsed once the clock moved
            assert (plant.expires_in is not None) == (when == "before")
        seen.add((plant.kind, when, written))
    for kind in MEMORY_KINDS:
        for when in ("before", "after"):
            assert (kind, when, False) in seen
            assert (kind, when, True) in seen


def test_commits_and_hand_offs_are_told_from_the_trace_alone() -> None:
    # a worker commits (tx1, tx2), its loop comes round again ('a') and works
    # another run: that commit handed work over; the last one did not.
    trace = (("a", 1), ("tx1", 1), ("tx2", 1), ("b", 1), ("a", 2), ("tx1", 2), ("tx2", 2))
    trace += (("c", 1), ("a", 3))
    p = WorkflowProfile("w", rounds=(trace,))
    assert p.commits(frozenset({"tx1", "tx2"})) == (
        Commit(0, ("tx2", 1), ("b", 1), handoff=True),
        Commit(0, ("tx2", 2), ("c", 1), handoff=False),
    )
    assert p.commits(frozenset()) == ()


def test_a_kill_lands_right_after_every_commit_hand_offs_first() -> None:
    trace = (("a", 1), ("tx1", 1), ("tx2", 1), ("b", 1), ("a", 2), ("tx1", 2), ("tx2", 2))
    trace += (("c", 1), ("a", 3))
    look = replace(PROFILES["look"], rounds=(trace,))
    kills = [
        s
        for s in targeted(universe(profiles={**PROFILES, "look": look}))
        if "/kill_after_handoff/" in s.name or "/kill_after_commit/" in s.name
    ]
    assert kills[0].name == "targeted/look/kill_after_handoff/r0/tx2@1"
    crash = [x.crash for x in kills[0].steps if isinstance(x, RunWorker)]
    assert crash == [CrashSpec(site="b", nth=1)]
    names = {s.name for s in kills}
    # pay: one commit in round 0, one in round 1 (after its decision)
    assert {
        "targeted/pay/kill_after_commit/r0/tx2@1",
        "targeted/pay/kill_after_commit/r1/tx2@1",
    } <= names
    assert "targeted/look/kill_after_commit/r0/tx2@2" in names


def test_the_clock_passes_a_wait_deadline_with_what_it_waits_for_withheld() -> None:
    trace = (("a", 1), ("tx1", 1), ("tx2", 1), ("b", 1), ("a", 2), ("tx1", 2), ("tx2", 2))
    trace += (("c", 1), ("a", 3))
    look = replace(PROFILES["look"], rounds=(trace,))
    waits = [
        s
        for s in targeted(universe(profiles={**PROFILES, "look": look}))
        if "/deadline_passes/" in s.name
    ]
    names = [s.name for s in waits]
    # the gated workflow's wait for its decision; the hand-off (the run
    # yielded, waiting on what it handed over), killed right after, only
    assert set(names) == {
        "targeted/pay/deadline_passes/approval",
        "targeted/look/deadline_passes/r0/tx2@1",
    }
    look_wait = waits[names.index("targeted/look/deadline_passes/r0/tx2@1")]
    assert [x.crash for x in look_wait.steps if isinstance(x, RunWorker)] == [
        CrashSpec(site="b", nth=1)
    ]
    # the jump comes after the kill, before anything else runs
    assert isinstance(look_wait.steps[2], AdvanceClock) and look_wait.steps[2].seconds > 86_400
    pay_wait = waits[names.index("targeted/pay/deadline_passes/approval")]
    assert [type(x).__name__ for x in pay_wait.steps] == [
        "Submit",
        "RunWorker",
        "AdvanceClock",
        "RunWorker",
        "Quiesce",
    ]
    # without a clock, no such schedule
    assert not [
        s for s in targeted(universe(CAPS - {Capability.CLOCK})) if "/deadline_passes/" in s.name
    ]


def test_workers_held_at_a_barrier_are_released_together_alongside_pause_points() -> None:
    u = universe()
    assert "race" in u.enabled()  # pause points no longer switch it off
    races = [s for s in targeted(u) if "/barrier_race/" in s.name]
    assert [s.name for s in races] == [
        "targeted/pay/barrier_race/r0/a@1",
        "targeted/pay/barrier_race/r1/a@1",
        "targeted/look/barrier_race/r0/a@1",
    ]
    steps = races[1].steps
    held = [x for x in steps if isinstance(x, RunWorker) and x.crash is not None]
    assert [(x.worker_id, x.crash) for x in held] == [
        ("b1", CrashSpec(site="a", nth=1, action="pause")),
        ("b2", CrashSpec(site="a", nth=1, action="pause")),
    ]
    assert steps[-2] == ReleaseWorkers(worker_ids=("b1", "b2"))
    without = universe(CAPS - {Capability.CONCURRENT_WORKERS})
    assert not [s for s in targeted(without) if "/barrier_race/" in s.name]


def test_another_tenant_names_the_run_in_a_decision_and_in_the_event_it_waits_on() -> None:
    trace = (("a", 1), ("tx1", 1), ("tx2", 1), ("b", 1), ("a", 2), ("tx1", 2), ("tx2", 2))
    look = replace(PROFILES["look"], rounds=(trace,))
    plan = targeted(universe(profiles={**PROFILES, "look": look}))
    cross = {s.name: s for s in plan if "/cross_tenant_" in s.name}
    assert set(cross) == {
        "targeted/pay/cross_tenant_decision",
        "targeted/look/cross_tenant_event/r0/tx2@1",
    }
    for s in cross.values():
        approve = [x for x in s.steps if isinstance(x, Approve)]
        # the opposite of the approver's decision: a runtime that takes it
        # does what the approver refused
        assert [(a.variant, a.decision) for a in approve] == [("cross_tenant", "opposite")]
    # the event: delivered while the run waits, right after the hand-off
    event = cross["targeted/look/cross_tenant_event/r0/tx2@1"]
    assert [type(x).__name__ for x in event.steps] == ["Submit", "RunWorker", "Approve", "Quiesce"]
    assert event.steps[1].crash == CrashSpec(site="b", nth=1)  # type: ignore[union-attr]
    # no message family: none of them
    fams = tuple(f for f in universe().families if f != "message")
    assert not [s for s in targeted(universe(families=fams)) if "cross_tenant_" in s.name]


def test_memory_is_planted_where_the_workflow_says_its_runs_read() -> None:
    plants = {
        s.name: x
        for s in targeted(universe())
        for x in s.steps
        if isinstance(x, InjectMemory) and "/memory/" in s.name
    }
    assert plants["targeted/pay/memory/poisoned"].namespace == "rules"
    assert plants["targeted/pay/memory/poisoned"].key == "waive_below"
    # the namespace's {topic} is the run's input field
    assert plants["targeted/look/memory/stale"].namespace == "notes/t"
    assert plants["targeted/look/memory/stale"].key == "n-9"


def test_undeclared_memory_is_aimed_at_what_the_fault_free_run_read_or_not_at_all() -> None:
    bare = (replace_spec(LOOK), replace_spec(PAY))
    # nothing declared, nothing read: no plant would be read, so none is made
    u = universe(workflows=bare)
    assert "memory" not in u.enabled()
    assert not [s for s in targeted(u) if any(isinstance(x, InjectMemory) for x in s.steps)]
    # the fault-free run of look read notes/t/n-0: a new key there is aimed at
    read = {**PROFILES, "look": replace(PROFILES["look"], memory_keys=(("notes/t", "n-0"),))}
    u = universe(workflows=bare, profiles=read)
    assert "memory" in u.enabled()
    plants = [x for s in targeted(u) for x in s.steps if isinstance(x, InjectMemory)]
    assert plants
    assert {x.namespace for x in plants} == {"notes/t"}
    assert {x.key for x in plants} == {PLANTED_KEY, "n-0"}  # n-0: at the key it writes


def replace_spec(wf: WorkflowSpec) -> WorkflowSpec:
    return wf.model_copy(update={"memory_targets": ()})


def test_a_run_is_repeated_for_a_second_tenant_once_the_first_has_ended() -> None:
    twins = [s for s in targeted(universe()) if "/tenant_twin/" in s.name]
    assert [s.name for s in twins] == [
        "targeted/pay/tenant_twin/globex",
        "targeted/look/tenant_twin/globex",
    ]
    first, second = twins[0].runs
    assert (first.tenant, second.tenant) == ("acme", "globex")
    assert first.input == second.input and first.workflow == second.workflow
    # no fault: the first run is quiesced (decided, ended) before the twin arrives
    assert [x.op for x in twins[0].steps] == [
        "submit",
        "quiesce",
        "submit",
        "run_worker",
        "quiesce",
    ]
    # only where cross-tenant isolation is tested
    assert not [s for s in targeted(universe(families=("crash", "world"))) if "twin" in s.name]


def test_a_record_lapses_while_the_run_is_down_between_two_commits() -> None:
    down = [s for s in targeted(universe()) if "/memory_while_down/" in s.name]
    assert [s.name for s in down] == [
        "targeted/pay/memory_while_down/expired/rules/waive_below",
        "targeted/look/memory_while_down/expired/notes/t/n-9",
    ]
    steps = down[1].steps
    # killed right after the first commit (tx2@1, then b@1), the clock past
    # the lease, a record that expired just now, then a worker resumes
    assert [x.op for x in steps] == [
        "submit",
        "run_worker",
        "advance_clock",
        "inject_memory",
        "run_worker",
        "quiesce",
    ]
    killed = steps[1]
    assert isinstance(killed, RunWorker) and killed.crash == CrashSpec(site="b", nth=1)
    plant = steps[3]
    assert isinstance(plant, InjectMemory)
    assert (plant.kind, plant.expires_in, plant.namespace) == ("expired", None, "notes/t")
    # not without the clock
    assert not [s for s in targeted(universe(CAPS - {Capability.CLOCK})) if "while_down" in s.name]


def test_identical_twins_of_one_tenant_where_a_service_deduplicates_by_key() -> None:
    keyed = PAY.model_copy(update={"name": "refund", "effects": ("payments.refund",)})
    profiles = {**PROFILES, "refund": replace(PROFILES["pay"], workflow="refund")}
    u = universe(workflows=(LOOK, PAY, keyed), profiles=profiles)
    twins = [s for s in targeted(u) if "/run_twin/" in s.name]
    # only where the world's service answers a repeated key with the first
    # application (payments, not bank.pay or mail.send)
    assert [s.name for s in twins] == ["targeted/refund/run_twin/acme"]
    first, second = twins[0].runs
    assert first.model_copy(update={"run_id": "r2"}) == second
    assert [x.op for x in twins[0].steps] == ["submit", "submit", "run_worker", "quiesce"]
    assert not [s for s in targeted(universe(families=("crash",))) if "run_twin" in s.name]


def test_a_decision_is_delivered_between_the_inbox_read_and_its_acknowledgement() -> None:
    held = [s for s in targeted(universe()) if "/deliver_while_held/" in s.name]
    # the resume round passes a, c, then commits (tx1, tx2): held at c, the
    # last pause point before that commit; only a gated workflow waits
    assert [s.name for s in held] == ["targeted/pay/deliver_while_held/r1/c@1"]
    steps = held[0].steps
    assert [x.op for x in steps] == [
        "submit",
        "run_worker",
        "approve",
        "run_worker",
        "approve",
        "continue_worker",
        "quiesce",
    ]
    ignored, decision = (x for x in steps if isinstance(x, Approve))
    assert (ignored.variant, ignored.decision) == ("forged", "planned")
    assert (decision.variant, decision.decision) == ("valid", "planned")
    paused = [x for x in steps if isinstance(x, RunWorker) and x.crash is not None]
    assert [x.crash for x in paused] == [CrashSpec(site="c", nth=1, action="pause")]
    assert not [s for s in targeted(universe(families=("crash",))) if "deliver_while" in s.name]


def test_a_kill_lands_after_the_last_write_before_the_run_is_recorded_ended() -> None:
    last = [s for s in targeted(universe()) if "/last_window/" in s.name]
    # the last commit of each fault-free run, killed at the crash point
    # right before its transaction begins
    assert [s.name for s in last] == [
        "targeted/pay/last_window/r1/c@1",
        "targeted/look/last_window/r0/a@1",
    ]
    kills = [x.crash for x in last[0].steps if isinstance(x, RunWorker) and x.crash is not None]
    assert kills == [CrashSpec(site="c", nth=1)]
    assert not [s for s in targeted(universe(families=("world",))) if "last_window" in s.name]


def test_a_rollback_order_shows_the_older_code_what_this_release_wrote() -> None:
    rollbacks = [s for s in targeted(universe()) if "/rollback/" in s.name]
    # per gated workflow, a run the previous release accepted; for the first,
    # one this release accepted too (its definition is from the future), and
    # one the previous release alone then serves for a while
    assert [s.name for s in rollbacks] == [
        "targeted/pay/rollback/submitted_by_older_release",
        "targeted/pay/rollback/submitted_by_this_release",
        "targeted/pay/rollback/older_release_stays",
    ]
    older, this, stays = rollbacks
    # the run is the older release's own, this release runs it until it
    # waits, the decision, then only older workers until nothing moves
    assert [r.code_version for r in stays.runs] == [1]
    assert [x.op for x in stays.steps] == ["submit", "run_worker", "approve", "quiesce", "quiesce"]
    assert [getattr(x, "code_version", None) for x in stays.steps[3:]] == [1, None]
    assert [r.code_version for r in (*older.runs, *this.runs)] == [1, None]
    # this release runs it until it waits, the decision, the previous
    # release's worker, this release's again
    workers = [x for x in older.steps if isinstance(x, RunWorker)]
    assert [(x.worker_id, x.code_version) for x in workers] == [
        ("n1", None),
        ("o1", 1),
        ("n2", None),
    ]
    assert [x.op for x in older.steps][2:4] == ["approve", "run_worker"]
    assert not [
        s for s in targeted(universe(families=("crash", "message"))) if "rollback" in s.name
    ]


def test_no_rollback_order_unless_the_adapter_promises_one() -> None:
    # An app whose previous release fails a run this one touched breaks no
    # promise unless it said old workers may meet such runs (rolls_back):
    # the correct LangGraph example failed migration_safety on a rollback.
    assert not [s for s in targeted(universe(rollbacks=False)) if "/rollback/" in s.name]
    assert [s for s in targeted(universe(rollbacks=True)) if "/rollback/" in s.name]


def test_a_decision_signed_for_another_approval_of_the_tenant_is_addressed_to_the_run() -> None:
    mis = [s for s in targeted(universe()) if "/misdirected_" in s.name]
    assert [s.name for s in mis] == ["targeted/pay/misdirected_decision"]
    run, twin = mis[0].runs
    # the twin: same tenant, workflow and input, so the same role and
    # parameters; the run's approver rejects, the twin's approves
    assert (run.run_id, run.decision, twin.run_id, twin.decision) == (
        "r1",
        "rejected",
        "r2",
        "approved",
    )
    assert run.model_copy(update={"run_id": "r2", "decision": "approved"}) == twin
    (approve,) = (x for x in mis[0].steps if isinstance(x, Approve))
    assert (approve.run_id, approve.variant, approve.signed_for) == ("r1", "misdirected", "r2")
    # it carries the decision the twin's approver gives
    assert approve.decision == "opposite"
    assert not [s for s in targeted(universe(families=("crash",))) if "misdirected" in s.name]


def test_a_verified_version_is_planted_under_a_newer_one_that_lapsed() -> None:
    shapes = [s for s in targeted(universe()) if s.name.endswith("_newest")]
    # at the first workflow's first memory target (gated first), once each;
    # each a kind of its own
    assert [s.name for s in shapes] == [
        "targeted/pay/memory/lapsed_newest",
        "targeted/pay/memory/untrusted_newest",
    ]
    assert [schedule_kind(s.name) for s in shapes] == [
        "memory/lapsed_newest",
        "memory/untrusted_newest",
    ]
    for s in shapes:
        (plant,) = (x for x in s.steps if isinstance(x, InjectMemory))
        assert (plant.provenance, plant.namespace, plant.key) == (
            "system_verified",
            "rules",
            "waive_below",
        )
        assert s.name.endswith(plant.kind)
    # not swept with the clock: the memory/clock sweep keeps its own kinds
    assert not [s for s in targeted(universe()) if "clock/" in s.name and "_newest" in s.name]
    assert not [s for s in targeted(universe(families=("crash",))) if "_newest" in s.name]


def test_the_report_says_rollback_orders_were_not_tested_and_why() -> None:
    from harness.report import not_tested

    class Releases:
        capabilities = frozenset({Capability.VERSION_SWITCH})
        rolls_back = False

    (gap,) = [g["what"] for g in not_tested(Releases()) if "rollback" in g["what"]]  # type: ignore[arg-type]
    assert "rolls_back = True" in gap
    assert not [g for g in not_tested(Releases(), asked=("crash",)) if "rollback" in g["what"]]  # type: ignore[arg-type]
    Releases.rolls_back = True
    assert not [g for g in not_tested(Releases()) if "rollback" in g["what"]]  # type: ignore[arg-type]
