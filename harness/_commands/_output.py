"""How a command speaks: one flushed line at a time, counts and durations
in words, a run's summary (verdicts, faults, counterexamples and their
replay commands), summary.md for GitHub's step summary, and the exit code
of a verdict."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

from ..model import Verdict
from ..report import Report


def _line(out: TextIO, text: str) -> None:
    print(text, file=out, flush=True)


def exit_code(verdict: str) -> int:
    """0: every property the adapter allows was exercised and held; 1: a
    property failed; 3: inconclusive (the report says why)."""
    return {Verdict.FAIL.value: 1, Verdict.UNKNOWN.value: 3}.get(verdict, 0)


def _count(n: int, noun: str) -> str:
    """``1 fault``, ``2 faults``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _duration(seconds: float) -> str:
    """``42 s``, ``3 min 5 s``, ``1 h 2 min``."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def _step_summary(report_dir: Path) -> None:
    """Append summary.md to $GITHUB_STEP_SUMMARY when it is set (GitHub Actions)."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    with open(target, "a", encoding="utf-8") as f:
        f.write((report_dir / "summary.md").read_text(encoding="utf-8"))


def _minimal(fully_shrunk: bool) -> str:
    if fully_shrunk:
        return "minimal counterexample"
    return "counterexample (not fully shrunk: shrinking stopped at --shrink-budget)"


def _summary(out: TextIO, report: Report, report_dir: Path, *, wall: float | None = None) -> None:
    """The run's summary on ``out``; ``wall``: the seconds since the command
    started (loading the adapter and probing it before the search), when
    known."""
    whole = (
        f" ({_duration(wall)} since harness started)"
        if wall is not None and wall >= report.duration_seconds + 1
        else ""
    )
    _line(
        out,
        f"harness: {_count(report.scenarios, 'scenario')} in "
        f"{report.duration_seconds:.1f} s{whole}; verdict: {report.verdict.upper()}",
    )
    plan = report.plan_line()
    if plan is not None:
        _line(out, f"  {plan}")
    if report.shard is not None:
        whole = f" of a {report.shard.plan}-scenario plan" if report.shard.plan is not None else ""
        _line(
            out,
            f"  shard {report.shard.k} of {report.shard.n}{whole}: merge the shards' report "
            "folders with harness merge DIR... --report-dir OUT",
        )
    for p in report.properties:
        why = f" ({p.reason})" if p.reason and p.verdict != "fail" else ""
        seen = f", exercised in {p.exercised} of {p.scenarios}" if p.verdict == "pass" else ""
        mine = " (your invariant)" if p.user else ""
        _line(out, f"  {p.verdict:10} {p.name}{mine}{seen}{why}")
    fired = {k: v.fired for k, v in report.faults.items()}
    _line(out, "  faults fired: " + (", ".join(f"{k}={v}" for k, v in fired.items()) or "none"))
    # never armed there, with why: the runtime left the fault nothing to aim
    # at (said even where the kind was armed or fired elsewhere)
    moot = [
        f"{k} ({'; '.join(c.not_tested())})"
        for k, c in sorted(report.faults.items())
        if c.not_tested()
    ]
    if moot:
        _line(out, "  not tested: " + ", ".join(moot))
    excused = report.excused_line()
    if excused is not None:
        _line(out, f"  {excused}")
    model = report.model_line()
    if model is not None:
        _line(out, f"  {model}")
    for i, text in enumerate(report.commit_fault_lines()):
        _line(out, f"  {'  ' if i else ''}{text}")
    for reason in report.inconclusive:
        _line(out, f"inconclusive: {reason}")
    ce = report.counterexample
    if ce is not None:
        serves = ", ".join(ce.counterexample_for or ce.failed_properties)
        _line(out, f"{_minimal(ce.fully_shrunk)} for {serves}:")
        for i, step in enumerate(ce.steps, 1):
            _line(out, f"  {i}. {step}")
        _line(out, f"replay: {ce.replay}")
    for n, other in enumerate(report.other_failures, 1):
        serves = ", ".join(other.counterexample_for or other.failed_properties)
        _line(
            out,
            f"{_minimal(other.fully_shrunk)} for {serves}, "
            f"kept in {report_dir / (other.folder or f'failures/{n}')}:",
        )
        for i, step in enumerate(other.steps, 1):
            _line(out, f"  {i}. {step}")
        if other.replay:
            _line(out, f"replay: {other.replay}")
    _line(out, f"report: {report_dir / 'report.json'} (and report.html, junit.xml, summary.md)")
