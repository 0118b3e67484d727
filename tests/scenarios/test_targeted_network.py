"""Targeted network schedules: a lost acknowledgement at each kind of commit
a fault-free run made (intent, result, decision, plain checkpoint) and a
reset inside a commit, told from the site profile alone; only for adapters
that declare ``network_faults`` and runs that switch the family on."""

from __future__ import annotations

from harness.adapters._contract import Capability, WorkflowSpec
from harness.model import CrashSpec, NetworkFault, RunWorker, Scenario
from harness.scenarios import EffectSite, Universe, WorkflowProfile, targeted
from harness.scenarios._schedules.connections import MAX_NETWORK
from harness.scenarios._universe import PROXY_NETWORK_KINDS

#: a made-up runtime: sites a..g between steps, t1..t3 inside a transaction
#: (t3 right before its COMMIT); the decision arrives before round 1
R0 = (("a", 1), ("t1", 1), ("t2", 1), ("t3", 1), ("b", 1))
R1 = (("a", 1), ("t1", 1), ("t2", 1), ("t3", 1), ("c", 1))
R1 += (("t1", 2), ("t2", 2), ("t3", 2), ("d", 1), ("e", 1))  # the intent, then the call at e
R1 += (("t1", 3), ("t2", 3), ("t3", 3), ("f", 1))  # the result
PAY = WorkflowSpec(name="pay", inputs=({"x": 1},), needs_approval=True, effects=("bank.pay",))
PROFILE = WorkflowProfile(
    "pay",
    hits={"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "t1": 3, "t2": 3, "t3": 3},
    rounds=(R0, R1),
    resume_round=1,
    effect_sites=(EffectSite("bank.pay", 1, "e", 1, approach=R1[:10]),),
)
CAPS = frozenset({Capability.CRASH_POINTS, Capability.APPROVALS, Capability.NETWORK_FAULTS})


def universe(caps: frozenset[Capability] = CAPS, **kw: object) -> Universe:
    return Universe(
        workflows=(PAY,),
        crash_points=("a", "b", "c", "d", "e", "f", "t1", "t2", "t3"),
        pause_points=("a", "b", "c", "d", "e", "f"),
        capabilities=caps,
        profiles={"pay": PROFILE},
        site_hits={"pay": PROFILE.hits},
        **kw,  # type: ignore[arg-type]
    )


def network(u: Universe) -> list[Scenario]:
    """The network category's schedules (the commit-fault pairs, which aim
    network faults at every kind of commit, are tested on their own)."""
    return [
        s
        for s in targeted(u)
        if any(isinstance(x, NetworkFault) for x in s.steps) and "/commit_fault/" not in s.name
    ]


def test_each_kind_of_commit_loses_its_acknowledgement_and_one_commit_is_reset() -> None:
    got = network(universe())
    assert [s.name for s in got] == [
        "targeted/pay/commit_ack_lost/decision/r1/t3@1",
        "targeted/pay/reset_mid_transaction/reset/r1/t2@1",
        "targeted/pay/commit_ack_lost/intent/r1/t3@2",
        "targeted/pay/commit_ack_lost/result/r1/t3@3",
        "targeted/pay/commit_ack_lost/checkpoint/r0/t3@1",
    ]
    intent = got[2].steps
    # the run brought to round 1 (a worker, then the decision), a worker
    # paused right before the intent's COMMIT, its acknowledgement lost
    assert [x.op for x in intent] == [
        "submit",
        "run_worker",
        "approve",
        "run_worker",
        "network_fault",
        "quiesce",
    ]
    paused = intent[3]
    assert isinstance(paused, RunWorker)
    assert paused.crash == CrashSpec(site="t3", nth=2, action="pause")
    assert intent[4] == NetworkFault(kind="commit_ack_lost", worker_id=paused.worker_id)
    # the reset: between two statements of the decision's commit
    reset = got[1].steps
    assert reset[4] == NetworkFault(kind="reset_mid_transaction", worker_id="n1")
    for s in got:
        assert len(s.steps) <= 8, s.name


def test_no_network_schedule_without_the_capability_or_with_the_family_off() -> None:
    assert network(universe(CAPS - {Capability.NETWORK_FAULTS})) == []
    assert network(universe(families=("crash",))) == []
    assert "network" not in universe(families=("crash",)).enabled()
    # without crash points to pause at, nothing can be aimed either
    bare = Universe(workflows=(PAY,), crash_points=(), capabilities=CAPS)
    assert "network" not in bare.enabled()
    assert network(bare) == []


def test_network_schedules_go_breadth_first_across_workflows_and_are_capped() -> None:
    other = WorkflowSpec(name="ship", inputs=({"y": 2},), effects=("post.send",))
    ship = WorkflowProfile(
        "ship",
        hits=PROFILE.hits,
        rounds=(R1,),
        effect_sites=(EffectSite("post.send", 0, "e", 1, approach=R1[:10]),),
    )
    u = Universe(
        workflows=(PAY, other),
        crash_points=("a", "b", "c", "d", "e", "f", "t1", "t2", "t3"),
        pause_points=("a", "b", "c", "d", "e", "f"),
        capabilities=CAPS,
        profiles={"pay": PROFILE, "ship": ship},
        site_hits={"pay": PROFILE.hits, "ship": ship.hits},
    )
    names = [s.name for s in network(u)]
    assert len(names) <= MAX_NETWORK
    # every variant on the first workflow before any on the second
    assert [n.split("/")[1] for n in names[:5]] == ["pay"] * 5
    assert "targeted/ship/commit_ack_lost/intent/r0/t3@2" in names


def test_with_the_clock_a_partition_before_the_first_effect_comes_third() -> None:
    got = network(universe(CAPS | {Capability.CLOCK}))
    names = [s.name for s in got]
    assert names[2] == "targeted/pay/partition/before/bank.pay/e@1", names
    steps = got[2].steps
    # brought to the round that calls (a worker, the decision), then held
    # at the boundary right before the call and partitioned
    assert [x.op for x in steps] == [
        "submit",
        "run_worker",
        "approve",
        "run_worker",
        "network_fault",
        "quiesce",
    ]
    paused = steps[3]
    assert isinstance(paused, RunWorker)
    assert paused.crash == CrashSpec(site="e", nth=1, action="pause")
    assert steps[4] == NetworkFault(kind="partition", worker_id="n1")


def test_without_signed_approvals_the_decision_is_still_delivered_between_rounds() -> None:
    # An adapter without the ``approvals`` capability (LangGraph's) still
    # takes the approver's valid decision: its fault-free profile was
    # resumed by one, so a schedule aimed at round 1 must deliver it too,
    # or the worker paused there finds the run waiting and never pauses.
    got = network(universe(CAPS - {Capability.APPROVALS}))
    assert [s.name for s in got] == [s.name for s in network(universe())]
    for s in got:
        ops = [x.op for x in s.steps]
        if "/r1/" in s.name:
            assert ops[:3] == ["submit", "run_worker", "approve"], s.name
    # every targeted schedule aimed past a round delivers that round's decision
    for s in targeted(universe(CAPS - {Capability.APPROVALS})):
        ops = [x.op for x in s.steps]
        workers = [i for i, op in enumerate(ops) if op == "run_worker"]
        if "/r1/" in s.name and workers:
            assert "approve" in ops[: workers[-1]], s.name


def test_on_a_proxy_the_first_commit_holds_its_reply_and_the_reset_point_cuts_one() -> None:
    """Issue 32: with Toxiproxy's kinds offered, the first commit aimed at
    (the decision's) has its reply held back past the lease, and the
    reset's position gets a fragmented and a cut reply; none on the kernel
    backend (the first test)."""
    names = [s.name for s in network(universe(network_kinds=PROXY_NETWORK_KINDS))]
    assert "targeted/pay/latency/r1/t3@1" in names, names
    assert "targeted/pay/slow_reply/r1/t2@1" in names, names
    assert "targeted/pay/cut_reply/r1/t2@1" in names, names
    # every kind comes before any kind's second commit (a short plan fires each)
    assert names.index("targeted/pay/cut_reply/r1/t2@1") < names.index(
        "targeted/pay/commit_ack_lost/intent/r1/t3@2"
    )


#: a runtime without crash points (Temporal, DBOS): two effects, no profile
REFUND = WorkflowSpec(
    name="refund", inputs=({"x": 1},), effects=("payments.refund", "email.notify")
)


def at_effects(**kw: object) -> Universe:
    caps = frozenset({Capability.NETWORK_FAULTS, Capability.CONCURRENT_WORKERS})
    return Universe(workflows=(REFUND,), crash_points=(), capabilities=caps, **kw)  # type: ignore[arg-type]


def test_without_crash_points_a_partition_follows_each_effect_on_a_proxy_only() -> None:
    """Issue 32: a runtime the harness cannot pause at a named site gets a
    partition right after the world applied each effect its workflow makes,
    when the backend can (Toxiproxy); on the kernel backend, no network
    schedule at all (and the family is off)."""
    got = network(at_effects(network_kinds=PROXY_NETWORK_KINDS))
    assert [s.name for s in got] == [
        "targeted/refund/partition_after_apply/payments.refund",
        "targeted/refund/partition_after_apply/email.notify",
    ]
    assert [x.op for x in got[0].steps] == ["submit", "network_fault", "quiesce"]
    fault = got[0].steps[1]
    assert isinstance(fault, NetworkFault)
    assert (fault.kind, fault.effect, fault.nth) == ("partition_after_apply", "payments.refund", 1)
    assert "network" in at_effects(network_kinds=PROXY_NETWORK_KINDS).enabled()
    kernel = at_effects(network_kinds=("commit_ack_lost", "reset_mid_transaction", "partition"))
    assert network(kernel) == [] and "network" not in kernel.enabled()
    # an adapter with crash points keeps its kinds (a partition at the crash
    # point after the call reaches the same place)
    proxied = universe(network_kinds=PROXY_NETWORK_KINDS)
    assert "partition_after_apply" not in proxied.offered_network_kinds()
    assert not [s for s in network(proxied) if "partition_after_apply" in s.name]


def test_through_proxies_without_the_clock_a_partition_is_held_inside_the_first_commit() -> None:
    """A routed worker (Toxiproxy's kinds offered) of a runtime without the
    clock (LangGraph) is partitioned inside the decision's commit, right
    before its COMMIT: no lease to outlive, no pause point needed. On the
    kernel backend, none without the clock."""
    got = network(universe(network_kinds=PROXY_NETWORK_KINDS))
    names = [s.name for s in got]
    assert names[2] == "targeted/pay/partition/r1/t3@1", names
    paused, fault = got[2].steps[3:5]
    assert isinstance(paused, RunWorker)
    assert paused.crash == CrashSpec(site="t3", nth=1, action="pause")
    assert fault == NetworkFault(kind="partition", worker_id="n1")
    assert not any("/partition/" in s.name for s in network(universe()))
