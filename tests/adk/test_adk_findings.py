"""What the harness finds in the ADK refund apps, and that the careful one passes.

One explicit scenario each, the minimal counterexample a search shrinks to,
run with its fault-free oracle and every checker.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest
from adk_support import (
    KILL_AFTER_REFUND,
    KILL_BEFORE_END,
    execute,
    result,
    verdicts,
    world_fault,
)

from harness.history import History
from harness.model import Verdict

pytestmark = pytest.mark.slow


def test_a_kill_after_the_refund_makes_the_naive_app_refund_twice(tmp_path: Path) -> None:
    ex = execute("naive", KILL_AFTER_REFUND, tmp_path)
    once = result(ex, "exactly_once_effects")
    assert once.verdict is Verdict.FAIL
    assert "applied 2 times" in once.message
    history = History.load(ex.folder / "history.jsonl")
    refunds = [history.events[i].value for i in once.witness]
    assert {e["idempotency_key"] for e in refunds} == {None}


def test_the_careful_app_survives_the_kill_after_the_refund(tmp_path: Path) -> None:
    ex = execute("careful", KILL_AFTER_REFUND, tmp_path)
    judged = verdicts(ex)
    assert Verdict.FAIL not in judged.values(), [r.message for r in ex.results]
    for name in ("exactly_once_effects", "resume_equivalence", "state_equivalence"):
        assert judged[name] is Verdict.PASS, name
    # ADK resumed the call and the tool sent the session's key again: absorbed.
    assert "1 repeats were absorbed" in result(ex, "exactly_once_effects").message


def test_adk_1_a_tool_that_raised_is_not_run_again_by_the_resume(tmp_path: Path) -> None:
    ex = execute("raising", world_fault("apply_then_timeout"), tmp_path)
    resume = result(ex, "resume_equivalence")
    assert resume.verdict is Verdict.FAIL, resume.message
    # refunded once, never told: the run ended on the call nobody answered
    assert verdicts(ex)["exactly_once_effects"] is Verdict.PASS
    assert "state failed vs the oracle's completed" in resume.message
    final = History.load(ex.folder / "history.jsonl").events[resume.witness[0]].value
    assert final["error"] == "ADK ended the invocation on refund (unanswered)", final


def test_adk_2_a_kill_before_end_of_agent_asks_the_model_again(tmp_path: Path) -> None:
    ex = execute("call_keyed", KILL_BEFORE_END, tmp_path)
    once = result(ex, "exactly_once_effects")
    assert once.verdict is Verdict.FAIL, once.message
    history = History.load(ex.folder / "history.jsonl")
    keys = [history.events[i].value["idempotency_key"] for i in once.witness]
    assert len(set(keys)) == 2  # the model's second call had an id of its own


def test_the_careful_app_does_not_ask_its_model_again(tmp_path: Path) -> None:
    ex = execute("careful", KILL_BEFORE_END, tmp_path)
    judged = verdicts(ex)
    assert Verdict.FAIL not in judged.values(), [r.message for r in ex.results]
    assert judged["state_equivalence"] is Verdict.PASS


#: the first google-adk whose schema setup survives a kill (docs/findings.md, ADK 4)
ADK_4_FIXED = (2, 14, 1)


def test_adk_4_a_kill_in_the_first_setup_leaves_a_database_adk_refuses_before_2_14_1() -> None:
    """The reproduction as findings.md states it: the database refused for
    good on the versions with the flaw, used by the next process on those
    without (the `adk` extra allows both)."""
    installed = tuple(int(p) for p in importlib.metadata.version("google-adk").split(".")[:3])
    repro = Path(__file__).resolve().parents[2] / "examples/adk_refund/repro/schema_setup_kill.py"
    done = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True, timeout=120)
    if installed < ADK_4_FIXED:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "reproduced: Schema version not found" in done.stdout
    else:
        assert done.returncode == 1, done.stdout + done.stderr
        assert "not reproduced: the next process used the database" in done.stdout
