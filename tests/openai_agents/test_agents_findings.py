"""What the harness finds in the naive refund agent, and that the careful one passes.

One explicit scenario, the minimal counterexample a search shrinks to: the
worker is killed right after the payment service applied the refund, then
workers run until nothing moves. Run with its fault-free oracle and every
checker.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from oa_support import CAREFUL, KILL_AFTER_REFUND, NAIVE, execute, result, verdicts

from harness.history import History
from harness.model import Verdict

pytestmark = pytest.mark.slow


def test_a_kill_after_the_refund_makes_the_naive_agent_refund_twice(tmp_path: Path) -> None:
    ex = execute(NAIVE, KILL_AFTER_REFUND, tmp_path)
    once = result(ex, "exactly_once_effects")
    assert once.verdict is Verdict.FAIL
    assert "payments.refund" in once.message and "applied 2 times" in once.message
    history = History.load(ex.folder / "history.jsonl")
    refunds = [history.events[i].value for i in once.witness]
    assert [e["kind"] for e in refunds] == ["payments.refund"] * 2
    # No key on either attempt: nothing the service could deduplicate.
    assert {e["idempotency_key"] for e in refunds} == {None}


def test_resending_the_message_leaves_it_twice_in_the_naive_agents_session(
    tmp_path: Path,
) -> None:
    ex = execute(NAIVE, KILL_AFTER_REFUND, tmp_path)
    state = result(ex, "state_equivalence")
    assert state.verdict is Verdict.FAIL, state.message
    history = History.load(ex.folder / "history.jsonl")
    items = history.events[state.witness[0]].value["state"]
    users = [i for i in items if i.get("role") == "user"]
    assert len(users) == 2 and users[0] == users[1]
    assert items[-1]["role"] == "assistant"  # it did complete: only its history is wrong
    # The model was shown the message twice too.
    context = result(ex, "context_rebuild")
    assert context.verdict is Verdict.FAIL
    assert '"role": "user"' in context.message


def test_the_careful_agent_survives_the_same_kill(tmp_path: Path) -> None:
    ex = execute(CAREFUL, KILL_AFTER_REFUND, tmp_path)
    judged = verdicts(ex)
    assert Verdict.FAIL not in judged.values(), [r.message for r in ex.results]
    for name in ("exactly_once_effects", "resume_equivalence", "state_equivalence"):
        assert judged[name] is Verdict.PASS, name
    # The resumed turn sent the refund again, with the run's key: absorbed.
    assert "1 repeats were absorbed by idempotency" in result(ex, "exactly_once_effects").message
    assert "All 3 contexts equal" in result(ex, "context_rebuild").message
