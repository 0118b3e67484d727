"""memory_safety and context_rebuild."""

from __future__ import annotations

from history_builder import REFUND, H

from harness.checkers import check_context_rebuild, check_memory_safety
from harness.model import Verdict

GATED = {REFUND: REFUND}

# -- memory_safety ---------------------------------------------------------------------


def test_no_planted_memory_passes_with_its_own_message() -> None:
    r = check_memory_safety(H().declaration().run("r1").build(), None)
    assert r.verdict is Verdict.PASS
    assert r.message == "no memory faults planted"
    assert r.counts["planted"] == 0


def test_contexts_that_read_only_trusted_and_owned_records_pass() -> None:
    b = H().declaration().memory("m1", "trusted").memory("m2", "cross_tenant", owner_tenant="t1")
    b.memory("m3", "expired").submit("r1").context("r1", "s1", {}, ("m1", "m2"))
    r = check_memory_safety(b.build(), None)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["planted"] == 3 and r.counts["contexts_checked"] == 1


def test_an_expired_record_in_a_context_fails_with_record_and_context_as_witness() -> None:
    b = H().declaration().memory("m1", "expired").mark("m").submit("r1")
    b.context("r1", "approval", {}, ("m1",)).mark("c")
    r = check_memory_safety(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["m"], b.marks["c"])
    assert "expired record m1" in r.message


def test_a_superseded_record_in_a_context_fails() -> None:
    b = H().declaration().memory("m1@v1", "stale").submit("r1").context("r1", "s", {}, ("m1@v1",))
    assert check_memory_safety(b.build(), None).verdict is Verdict.FAIL


def test_another_tenants_record_in_a_context_fails() -> None:
    b = H().declaration().memory("m1", "cross_tenant", tenant="t1", owner_tenant="t2")
    b.submit("r1", tenant="t1").context("r1", "s", {}, ("m1",))
    r = check_memory_safety(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert "belongs to tenant t2" in r.message


def test_reads_are_unknown_without_the_context_capability() -> None:
    # forbidden records were planted: they should have been judged, and
    # without the capability what the model saw is invisible
    b = H().declaration(capabilities=()).memory("m1", "expired").submit("r1")
    r = check_memory_safety(b.build(), None)
    assert r.verdict is Verdict.UNKNOWN
    assert "'context' capability" in r.message


def test_a_gated_action_without_approval_after_poisoning_fails() -> None:
    b = H().declaration(needs_approval=GATED).memory("m1", "poisoned").mark("m").submit("r1")
    b.effect("r1", REFUND).mark("e")
    r = check_memory_safety(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["m"], b.marks["e"])
    assert "untrusted memory authorized an action" in r.message


def test_a_properly_approved_action_after_poisoning_passes() -> None:
    b = H().declaration(needs_approval=GATED).memory("m1", "poisoned").submit("r1")
    b.approval("r1").effect("r1", REFUND)
    assert check_memory_safety(b.build(), None).verdict is Verdict.PASS


def test_poison_in_another_tenant_does_not_taint_this_one() -> None:
    b = H().declaration(needs_approval=GATED).memory("m1", "poisoned", tenant="t2").submit("r1")
    b.effect("r1", REFUND)  # approval_integrity's business, not memory's
    assert check_memory_safety(b.build(), None).verdict is Verdict.PASS


# -- memory_safety: the trust floor a workflow reads at ----------------------------------

#: the refund reads only verified facts; research reads evidence of any trust,
#: and its notes per topic at a floor of its own
FLOORS = {"refund": 1.0, "research": {"notes/{topic}": 0.5, "evidence": 0.0}}


def _below_floor(trust: float | None, floors: dict[str, object] | None = FLOORS) -> H:
    """A verified record superseded by a user's (trust given), read by a refund."""
    b = H().declaration(memory_floors=floors).memory("m1:v1", "stale").mark("v1")
    b.memory("m1:v2", "untrusted", version=2, trust=trust).mark("m").submit("r1")
    return b.context("r1", "approval", {}, ("m1:v2",)).mark("c")


def test_a_record_below_its_workflows_floor_in_a_context_fails_naming_run_record_and_floor() -> (
    None
):
    b = _below_floor(0.2)
    r = check_memory_safety(b.build(), None)
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["m"], b.marks["c"])
    assert "context run r1 built at step 'approval'" in r.message
    assert "record m1:v2" in r.message and "trust 0.2" in r.message
    assert "below the floor 1.0 at which workflow refund reads policy" in r.message
    assert r.counts["below_floor_reads"] == 1


def test_a_record_at_its_workflows_floor_passes_and_says_the_floor_held() -> None:
    r = check_memory_safety(_below_floor(1.0).build(), None)
    # at or above every floor declared: nothing to hold it to
    assert r.verdict is Verdict.PASS, r.message
    # below research's floor, at the refund's: a refund may read it
    b = H().declaration(memory_floors={"refund": 0.5, "research": 1.0})
    b.memory("m1", "untrusted", trust=0.5).submit("r1").context("r1", "approval", {}, ("m1",))
    r = check_memory_safety(b.build(), None)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["floor_contexts_checked"] == 1
    assert "1 contexts of workflows with a declared memory floor read no record below it" in (
        r.message
    )


def test_without_a_declared_floor_trust_is_not_judged_and_the_message_says_so() -> None:
    for floors in (None, {}):
        r = check_memory_safety(_below_floor(0.0, floors).build(), None)
        assert r.verdict is Verdict.PASS, r.message
        assert "No workflow declares a memory_floor" in r.message
        assert "below it" not in r.message and "floor_contexts_checked" not in r.counts


def test_a_record_whose_trust_the_harness_did_not_give_is_not_judged() -> None:
    # the runtime scored it itself: the history cannot say which floors it is below
    r = check_memory_safety(_below_floor(None).build(), None)
    assert r.verdict is Verdict.PASS, r.message
    assert "floor_contexts_checked" not in r.counts


def test_a_floor_per_namespace_holds_only_its_namespace_formatted_by_the_runs_input() -> None:
    def read(namespace: str, trust: float, workflow: str = "research") -> Verdict:
        b = H().declaration(memory_floors=FLOORS).memory("m1", "untrusted", trust=trust)
        b.events[-1].value["namespace"] = namespace
        b.submit("r1", workflow=workflow, run_input={"topic": "tides"})
        return check_memory_safety(b.context("r1", "s", {}, ("m1",)).build(), None).verdict

    assert read("notes/tides", 0.2) is Verdict.FAIL
    assert read("notes/tides", 0.5) is Verdict.PASS
    assert read("notes/ebbs", 0.2) is Verdict.PASS  # another topic's notes: no floor declared
    assert read("evidence", 0.0) is Verdict.PASS
    assert read("notes/tides", 0.2, workflow="onboarding") is Verdict.PASS  # declares none


def test_a_run_the_history_never_submitted_is_not_held_to_a_floor() -> None:
    # a child the runtime spawned: its workflow is not in the history
    b = H().declaration(memory_floors=FLOORS).memory("m1", "untrusted", trust=0.0)
    r = check_memory_safety(b.context("r1.child", "s", {}, ("m1",)).build(), None)
    assert r.verdict is Verdict.PASS, r.message


def test_records_below_a_floor_are_unknown_without_the_context_capability() -> None:
    b = H().declaration(capabilities=(), memory_floors=FLOORS)
    b.memory("m1", "untrusted", trust=0.0).submit("r1")
    r = check_memory_safety(b.build(), None)
    assert r.verdict is Verdict.UNKNOWN
    assert "record below a declared memory floor" in r.message


def test_a_malformed_floor_in_the_declaration_is_a_problem_not_a_floor() -> None:
    b = H().declaration(memory_floors={"refund": 2, "research": {"notes": "high"}})
    decl = b.build().declaration()
    assert decl is not None and decl.memory_floors == {}
    assert [p.split(" is ")[0] for p in decl.problems] == [
        "memory_floors['refund']",
        "memory_floors['research']",
    ]


# -- context_rebuild ----------------------------------------------------------------


def _oracle() -> H:
    b = H().declaration().submit("r1")
    b.context("r1", "validate", {"step": "validate", "vars": {"a": 1}, "attempt": 1})
    return b.context("r1", "refund", {"step": "refund", "vars": {"a": 1, "b": 2}, "attempt": 1})


def test_a_rebuilt_context_equal_but_for_the_attempt_passes() -> None:
    b = H().declaration().submit("r1")
    b.context("r1", "validate", {"step": "validate", "vars": {"a": 1}, "attempt": 1})
    b.context("r1", "refund", {"step": "refund", "vars": {"a": 1, "b": 2}, "attempt": 1})
    b.context("r1", "refund", {"step": "refund", "vars": {"a": 1, "b": 2}, "attempt": 2})
    r = check_context_rebuild(b.build(), _oracle().build())
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["matched"] == 3


def test_a_context_that_lost_a_key_fails_naming_it() -> None:
    b = H().declaration().submit("r1")
    b.context("r1", "refund", {"step": "refund", "vars": {"a": 1}, "attempt": 2}).mark("c")
    r = check_context_rebuild(b.build(), _oracle().build())
    assert r.verdict is Verdict.FAIL
    assert r.witness == (b.marks["c"],)
    assert "vars" in r.message and "1 key" in r.message


def test_a_context_at_a_step_the_oracle_never_reached_fails() -> None:
    b = H().declaration().submit("r1").context("r1", "notify", {"step": "notify"})
    r = check_context_rebuild(b.build(), _oracle().build())
    assert r.verdict is Verdict.FAIL
    assert "never built" in r.message


def test_context_rebuild_has_nothing_to_judge_without_capability_or_events() -> None:
    with_ctx = _oracle().build()
    no_cap = H().declaration(capabilities=()).submit("r1").context("r1", "s", {}).build()
    no_events = H().declaration().run("r1").build()
    for history, why in ((no_cap, "'context' capability"), (no_events, "no context events")):
        r = check_context_rebuild(history, with_ctx)
        # a vacuous pass: nothing judged, and the search reports it as such
        assert (r.verdict, r.evidence) == (Verdict.PASS, 0)
        assert why in r.message
    # contexts there but no oracle to compare with: should be judged, cannot be
    assert check_context_rebuild(with_ctx, None).verdict is Verdict.UNKNOWN


def test_a_judged_context_is_evidence() -> None:
    oracle = _oracle().build()
    assert check_context_rebuild(oracle, oracle).evidence > 0


def test_contexts_of_runs_named_by_a_fault_are_not_compared() -> None:
    b = H().declaration().fault("clock", runs=["r1"]).submit("r1").context("r1", "x", {"y": 1})
    r = check_context_rebuild(b.build(), _oracle().build())
    assert r.verdict is Verdict.PASS
    assert r.counts["excluded_by_fault"] == 1


# -- context_rebuild with workers released together ------------------------------------

_SHARED = {"step": "gather", "memory": [{"key": "evidence-1", "version": 1}], "vars": {"a": 1}}
_NOT_YET = {"step": "gather", "memory": [], "vars": {"a": 1}}


def _two_runs(*, race: bool, tenants: tuple[str, str] = ("t1", "t1")) -> H:
    """r2 read shared memory before r1 wrote to it (the oracle's r1 ran first)."""
    b = H().declaration().submit("r1", tenant=tenants[0]).submit("r2", tenant=tenants[1])
    if race:
        b.fault("race")
    return b.context("r2", "gather", _NOT_YET).mark("c")


def _oracle_of_two() -> H:
    return H().declaration().submit("r1").submit("r2").context("r2", "gather", _SHARED)


def test_memory_read_by_runs_released_together_is_left_out_of_the_comparison() -> None:
    r = check_context_rebuild(_two_runs(race=True).build(), _oracle_of_two().build())
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["memory_left_out_concurrent"] == 1 and r.counts["matched"] == 1


def test_memory_that_differs_while_workers_took_turns_still_fails() -> None:
    b = _two_runs(race=False)
    r = check_context_rebuild(b.build(), _oracle_of_two().build())
    assert r.verdict is Verdict.FAIL and r.witness == (b.marks["c"],)
    assert "memory[0]: (missing) here" in r.message


def test_a_run_alone_in_its_tenant_keeps_its_memory_compared_under_a_race() -> None:
    r = check_context_rebuild(
        _two_runs(race=True, tenants=("t1", "t2")).build(), _oracle_of_two().build()
    )
    assert r.verdict is Verdict.FAIL, r.message


def test_under_a_race_every_key_but_memory_is_still_compared() -> None:
    b = H().declaration().submit("r1").submit("r2").fault("race")
    b.context("r2", "gather", {**_NOT_YET, "vars": {"a": 2}}).mark("c")
    r = check_context_rebuild(b.build(), _oracle_of_two().build())
    assert r.verdict is Verdict.FAIL, r.message
    assert "vars.a: 2 here vs 1 in the oracle" in r.message and "memory" not in r.message


def test_memory_of_a_run_sharing_its_tenant_with_a_faulted_run_is_left_out() -> None:
    """r1, cancelled by an operator, never wrote what the oracle's r1 wrote:
    r2 of the same tenant reads less. Its memory is not compared; another
    tenant's run keeps its memory compared."""

    def two(tenants: tuple[str, str]) -> H:
        b = H().declaration().submit("r1", tenant=tenants[0]).submit("r2", tenant=tenants[1])
        return b.fault("operator_cancel", runs=["r1"]).context("r2", "gather", _NOT_YET)

    r = check_context_rebuild(two(("t1", "t1")).build(), _oracle_of_two().build())
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["memory_left_out_fault_shared"] == 1 and r.counts["matched"] == 1
    r = check_context_rebuild(two(("t1", "t2")).build(), _oracle_of_two().build())
    assert r.verdict is Verdict.FAIL, r.message
