"""The realistic-mistakes corpus (``benchmarks/_realistic_mistakes.py``) stays
applicable to today's runtime.

``benchmarks/realistic.py`` runs the ``ci`` profile on a copy of the runtime
carrying each mistake; that takes a machine's hour and is a benchmark, not a
test. What a test can keep cheaply is the corpus itself: every mistake's
edits still apply (each old text is found exactly once) and the mutated
modules still compile, so a change to the runtime that moves the code a
mistake edits fails here, and the mistake is rewritten instead of silently
measuring nothing. One mistake is also run end to end on one scenario, to
show that the copies carry their mistake into the workers.
"""

from __future__ import annotations

import py_compile
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.history import History

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import _mutants  # noqa: E402  (benchmarks/ is a folder of scripts)
import _realistic_mistakes  # noqa: E402

sys.path.remove(str(BENCHMARKS))

MISTAKES = _realistic_mistakes.MISTAKES


def test_the_corpus_has_at_least_fifteen_mistakes_with_distinct_names_and_stories() -> None:
    assert len(MISTAKES) >= 15
    assert len({m.name for m in MISTAKES}) == len(MISTAKES)
    assert all(m.story and m.harm and m.edits for m in MISTAKES)


def test_every_mistake_applies_to_the_current_runtime_and_compiles(tmp_path: Path) -> None:
    # One copy per mistake (the edits of two mistakes may touch one line);
    # a copy of the runtime is about 70 small files.
    broken = []
    for m in MISTAKES:
        copy = _mutants.copy_runtime(tmp_path / m.name) / _mutants.PACKAGE
        try:
            for edit in m.edits:
                before = (copy / edit.path).read_text(encoding="utf-8")
                edit.apply(copy)
                after = (copy / edit.path).read_text(encoding="utf-8")
                assert after != before, (m.name, edit.path)
                py_compile.compile(str(copy / edit.path), doraise=True)
        except (_mutants.EditDoesNotApply, py_compile.PyCompileError) as exc:
            broken.append(f"{m.name}: {exc}")
    assert not broken, "\n".join(broken)


def test_an_edit_whose_text_is_gone_fails_loudly(tmp_path: Path) -> None:
    copy = _mutants.copy_runtime(tmp_path) / _mutants.PACKAGE
    gone = _mutants.Edit("_approvals.py", "text no runtime holds", "x")
    with pytest.raises(_mutants.EditDoesNotApply, match="occurs 0 times"):
        gone.apply(copy)


def _emails_applied(h: History) -> int:
    return sum(
        1
        for e in h.by_f("effect")
        if e.value.get("kind") == "email.send" and e.value.get("applied") is True
    )


#: the research run's report e-mail (at most once, no key, no lookup) is
#: applied, then its worker is killed before the result is recorded
_EMAIL_KILLED_AFTER_APPLY: dict[str, Any] = {
    "name": "demo/sent-mark-only-on-resends",
    "steps": [
        {
            "op": "submit",
            "run": {
                "run_id": "r1",
                "tenant": "acme",
                "workflow": "research",
                "input": {"topic": "tides", "sources": 2, "requester": "u-1"},
            },
        },
        {
            "op": "arm_world_fault",
            "service": "email",
            "action": "send",
            "nth": 1,
            "mode": "kill_after_apply",
        },
        {"op": "run_worker", "worker_id": "w1"},
        {"op": "quiesce", "approve_waits": True},
    ],
}


def test_a_mistake_runs_in_the_workers_of_its_copy(tmp_path: Path) -> None:
    # The correct runtime marks the e-mail sent before the call: after the
    # kill it asks an operator (who answers: applied) and never sends again.
    # Without the mark on a first attempt, the bare intent reads as never
    # sent, and the e-mail goes twice.
    m = _realistic_mistakes.BY_NAME["sent-mark-only-on-resends"]
    sent = {}
    for label, edits in (("correct", ()), ("mistake", m.edits)):
        copy = _mutants.mutated_copy(tmp_path / label / "src", edits)
        run = _mutants.execute(copy, _EMAIL_KILLED_AFTER_APPLY, tmp_path / label / "work")
        sent[label] = (_emails_applied(History.load(run.history)), bool(run.failed))
    assert sent == {"correct": (1, False), "mistake": (2, True)}, m.harm
