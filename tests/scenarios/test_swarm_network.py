"""The sampled search draws network faults too, when the adapter declares
``network_faults`` and the family is on: a worker paused inside a commit
(right before its COMMIT for a lost acknowledgement, between statements for
a reset), at most one such episode a scenario (each costs a timeout)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.adapters import Capability, WorkflowSpec
from harness.model import NetworkFault, RunWorker, Scenario
from harness.nemesis import validate
from harness.scenarios import Universe, WorkflowProfile, scenarios
from harness.scenarios._strategies import Swarm
from harness.scenarios._universe import NETWORK_KINDS, PROXY_NETWORK_KINDS
from harness.vocabulary import AT_EFFECT_NETWORK_KINDS

FLOW = WorkflowSpec(name="pay", inputs=({"x": 1},), effects=("bank.pay",))
TRACE = (("a", 1), ("t1", 1), ("t2", 1), ("t3", 1), ("b", 1))
TRACE += (("t1", 2), ("t2", 2), ("t3", 2), ("c", 1))
PROFILE = WorkflowProfile(
    "pay", hits={"a": 1, "b": 1, "c": 1, "t1": 2, "t2": 2, "t3": 2}, rounds=(TRACE,)
)
CAPS = frozenset({Capability.CRASH_POINTS, Capability.NETWORK_FAULTS, Capability.CLOCK})


def universe(caps: frozenset[Capability] = CAPS) -> Universe:
    return Universe(
        workflows=(FLOW,),
        crash_points=("a", "b", "c", "t1", "t2", "t3"),
        pause_points=("a", "b", "c"),
        capabilities=caps,
        profiles={"pay": PROFILE},
        site_hits={"pay": PROFILE.hits},
        families=("crash", "network"),
    )


def network_steps(s: Scenario) -> list[tuple[NetworkFault, RunWorker]]:
    out = []
    for i, step in enumerate(s.steps):
        if isinstance(step, NetworkFault):
            paused = s.steps[i - 1]
            assert isinstance(paused, RunWorker) and paused.worker_id == step.worker_id
            out.append((step, paused))
    return out


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_network_episodes_pause_inside_a_commit_and_come_once_a_scenario(
    data: st.DataObject,
) -> None:
    u = universe()
    assert u.enabled() == ("crash", "network")
    scenario: Scenario = data.draw(scenarios(u))
    validate(scenario, CAPS)
    faults = network_steps(scenario)
    assert len(faults) <= 1, scenario.describe()
    for fault, paused in faults:
        assert paused.crash is not None and paused.crash.action == "pause"
        # the last in-transaction point of a commit for a lost ack, a middle
        # one for a reset, between steps (holding the lease) for a partition
        want = {"commit_ack_lost": {"t3"}, "reset_mid_transaction": {"t1", "t2"}}.get(
            fault.kind, {"a", "b", "c"}
        )
        assert paused.crash.site in want, scenario.describe()
        assert 1 <= paused.crash.nth <= PROFILE.hits[paused.crash.site]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_a_network_swarm_draws_both_kinds_and_none_without_the_capability(
    data: st.DataObject,
) -> None:
    swarm = Swarm(families=("network",), weights=(1,))
    scenario: Scenario = data.draw(scenarios(universe(), swarm=swarm))
    assert network_steps(scenario), scenario.describe()
    bare = universe(CAPS - {Capability.NETWORK_FAULTS})
    assert "network" not in bare.enabled()
    assert not network_steps(data.draw(scenarios(bare)))


def test_every_kind_is_drawn() -> None:
    seen: set[str] = set()

    @settings(max_examples=60, deadline=None, database=None)
    @given(scenarios(universe(), swarm=Swarm(families=("network",), weights=(1,))))
    def collect(s: Scenario) -> None:
        seen.update(f.kind for f, _ in network_steps(s))

    collect()
    assert seen == {"commit_ack_lost", "reset_mid_transaction", "partition"}
    # without the clock, no partition (it outlasts a lease on the clock)
    seen.clear()
    no_clock = Universe(**{**universe().__dict__, "capabilities": CAPS - {Capability.CLOCK}})
    swarm = Swarm(families=("network",), weights=(1,))

    @settings(max_examples=60, deadline=None, database=None)
    @given(scenarios(no_clock, swarm=swarm))
    def collect_without(s: Scenario) -> None:
        seen.update(f.kind for f, _ in network_steps(s))

    collect_without()
    assert "partition" not in seen and seen


def test_on_a_proxy_a_held_fragmented_or_cut_reply_is_drawn_where_it_can_hit() -> None:
    """Issue 32: with Toxiproxy as the backend (the universe's network kinds
    say so), the swarm draws a reply held back (paused right before a
    COMMIT, like a lost acknowledgement) and a reply fragmented or cut
    (between statements, like a reset); on the kernel backend, none."""
    proxied = Universe(**{**universe().__dict__, "network_kinds": PROXY_NETWORK_KINDS})
    # the kinds a drawn swarm takes from the universe (see swarms)
    swarm = Swarm(("network",), (1,), {"network": proxied.offered_network_kinds()})
    where: dict[str, set[str]] = {}

    @settings(max_examples=150, deadline=None, database=None)
    @given(scenarios(proxied, swarm=swarm))
    def collect(s: Scenario) -> None:
        validate(s, CAPS)
        for fault, paused in network_steps(s):
            assert paused.crash is not None
            where.setdefault(fault.kind, set()).add(paused.crash.site)

    collect()
    # a partition after an effect is for adapters without crash points (below)
    assert set(where) == set(PROXY_NETWORK_KINDS) - set(AT_EFFECT_NETWORK_KINDS), where
    assert where["latency"] | where["commit_lost"] <= {"t3"}, where
    assert where["slow_reply"] | where["cut_reply"] <= {"t1", "t2"}, where
    kernel = Universe(**{**universe().__dict__, "network_kinds": NETWORK_KINDS})
    assert kernel.offered_network_kinds() == NETWORK_KINDS


def test_without_crash_points_the_swarm_draws_a_partition_after_an_effect() -> None:
    """Issue 32: a runtime the harness cannot pause at a named site (no
    crash points), its workers routed through Toxiproxy: the network
    family's only kind is partition_after_apply, aimed at an effect the
    runs make; no worker paused at a crash point."""
    caps = frozenset({Capability.NETWORK_FAULTS})
    u = Universe(
        workflows=(FLOW,),
        crash_points=(),
        capabilities=caps,
        families=("world", "network"),
        network_kinds=PROXY_NETWORK_KINDS,
    )
    assert u.enabled() == ("world", "network")
    assert u.offered_network_kinds() == AT_EFFECT_NETWORK_KINDS
    seen: list[NetworkFault] = []

    @settings(max_examples=60, deadline=None, database=None)
    @given(scenarios(u, swarm=Swarm(("network",), (1,), {"network": AT_EFFECT_NETWORK_KINDS})))
    def collect(s: Scenario) -> None:
        validate(s, caps)
        assert not any(isinstance(x, RunWorker) and x.crash for x in s.steps)
        seen.extend(x for x in s.steps if isinstance(x, NetworkFault))

    collect()
    assert seen and {(f.kind, f.effect) for f in seen} == {("partition_after_apply", "bank.pay")}
    assert {f.nth for f in seen} <= {1, 2}


def test_through_proxies_a_partition_is_drawn_without_the_clock() -> None:
    """A worker routed through proxies of its own is partitioned by closing
    its sessions: a runtime without the clock (LangGraph) has no lease left
    to outlive, so the swarm draws the partition there too; on the kernel
    backend, still none without the clock."""
    caps = CAPS - {Capability.CLOCK}
    proxied = Universe(
        **{**universe().__dict__, "capabilities": caps, "network_kinds": PROXY_NETWORK_KINDS}
    )
    swarm = Swarm(("network",), (1,), {"network": ("partition",)})
    seen: set[str] = set()

    @settings(max_examples=20, deadline=None, database=None)
    @given(scenarios(proxied, swarm=swarm))
    def collect(s: Scenario) -> None:
        validate(s, caps)
        seen.update(f.kind for f, _ in network_steps(s))

    collect()
    assert seen == {"partition"}, seen
    kernel = Universe(**{**proxied.__dict__, "network_kinds": NETWORK_KINDS})
    seen.clear()

    @settings(max_examples=20, deadline=None, database=None)
    @given(scenarios(kernel, swarm=swarm))
    def collect_kernel(s: Scenario) -> None:
        seen.update(f.kind for f, _ in network_steps(s))

    collect_kernel()
    assert seen == {"commit_ack_lost"}, seen
