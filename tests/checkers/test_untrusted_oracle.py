"""An oracle whose workload's fault-free runs disagreed is not trusted.

It carries a ``DISAGREEMENT`` note (``harness.session._oracle.mark``); the
properties that compare a run with it read ``unknown`` (counted as
``oracle_disagreed``), never ``fail`` and never ``pass``; a duplicate effect,
which needs no oracle to prove, still fails.
"""

from __future__ import annotations

from history_builder import CHARGE, NOTIFY, SEND, H

from harness.checkers import check_exactly_once_effects, check_resume_equivalence
from harness.checkers._base import DISAGREED, DISAGREEMENT
from harness.model import EventF, Verdict

DECL = {CHARGE: "exactly_once", NOTIFY: "at_least_once", SEND: "at_most_once"}
WHY = "run r1's output differs in tool: 'a' vs 'b'. To fix: script the model"


def _untrusted(b: H) -> H:
    return b.add("info", EventF.NOTE, {"text": "oracle: disagree", DISAGREEMENT: WHY})


def test_a_divergence_from_an_untrusted_oracle_is_unknown_with_the_first_difference() -> None:
    oracle = _untrusted(H().declaration(DECL).run("r1", (CHARGE, "h1"))).build()
    h = H().declaration(DECL).run("r1", (CHARGE, "h2")).build()
    r = check_resume_equivalence(h, oracle)
    assert r.verdict is Verdict.UNKNOWN
    assert WHY.rstrip(".") in r.message and "script the model" in r.message
    assert "Against the first of them it would fail" in r.message
    assert r.counts[DISAGREED] == 1


def test_an_agreement_with_an_untrusted_oracle_is_not_a_pass() -> None:
    oracle = _untrusted(H().declaration(DECL).run("r1", (CHARGE, "h1"))).build()
    h = H().declaration(DECL).run("r1", (CHARGE, "h1")).build()
    assert check_resume_equivalence(h, oracle).verdict is Verdict.UNKNOWN
    # The same histories against an oracle without the note: a pass.
    trusted = H().declaration(DECL).run("r1", (CHARGE, "h1")).build()
    assert check_resume_equivalence(h, trusted).verdict is Verdict.PASS


def test_a_drop_against_an_untrusted_oracle_is_unknown_but_a_duplicate_still_fails() -> None:
    oracle = _untrusted(H().declaration(DECL).run("r1", (SEND, "m1"))).build()
    b = H().declaration(DECL).submit("r1")
    b.effect("r1", SEND, "m1", applied=False, outcome="killed_before_apply")
    r = check_exactly_once_effects(b.final("r1", "completed").build(), oracle)
    assert r.verdict is Verdict.UNKNOWN, r.message
    assert "proves no drop" in r.message and r.counts[DISAGREED] == 1
    twice = H().declaration(DECL).submit("r1").effect("r1").effect("r1").final("r1", "completed")
    assert check_exactly_once_effects(twice.build(), oracle).verdict is Verdict.FAIL


def test_an_invariant_that_reads_the_oracle_is_unknown_against_an_untrusted_one() -> None:
    from harness.checkers import ScenarioView, invariant, violated

    @invariant
    def same_effects_as_the_oracle(view: ScenarioView) -> object:
        assert view.oracle is not None
        if len(view.oracle.effects(applied=True)) != len(view.effects):
            return violated("not as many effects as in the oracle")
        return True

    @invariant
    def at_most_one_effect(view: ScenarioView) -> object:
        return len(view.effects) <= 1 or violated("more than one effect")

    oracle = _untrusted(H().declaration(DECL).run("r1", (CHARGE, "h1"))).build()
    two = H().declaration(DECL).run("r1", (CHARGE, "h1"), (NOTIFY, "n1")).build()
    r = same_effects_as_the_oracle.judge(two, oracle)
    assert r.verdict is Verdict.UNKNOWN and r.counts[DISAGREED] == 1, r.message
    # One that never reads the oracle keeps its verdict.
    assert at_most_one_effect.judge(two, oracle).verdict is Verdict.FAIL
