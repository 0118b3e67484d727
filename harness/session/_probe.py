"""The fault-free probe: one run per example input of each workflow, before a search.

A search aims faults at what the adapter declares: world faults at each
workflow's effect kinds, decisions at workflows that need approval. A
declaration that does not match what the runtime does makes every such fault
miss, and the search then reports nothing against a runtime that may well be
broken (a user declared ``payments.charge`` while the app calls
``payments.refund``: thirty faults armed, none fired, a green report). So
before searching, each workflow runs once without faults, every example input
a run of its own, and the run is read for two kinds of problem:

- **the user's configuration** (exit 2, :class:`UsageError`): a workflow
  without example inputs; effect kinds performed but not declared; a run
  waiting for an approval the adapter built no message for.
- **a finding about the runtime** (exit 1, :func:`probe_outcome`): a run
  that did not end (stuck, lost), a submission the runtime refused, a
  decision delivered and not acted on, a declared effect kind never
  performed (the runs failed or still wait first, or completed without
  it: the runtime skipped it, or the declaration is wrong; only
  ``harness check-adapter``, a diagnostic, calls that exit 2).
  The runtime (or the adapter's mapping of it) cannot finish a fault-free
  run: that is a verdict, with the probe's one-run scenario as its
  counterexample (replayable), and the workers' log when one crashed.

What the adapter itself raises during the probe (``open``, ``observe``,
``start_worker``: a misspelled worker target) stays an adapter error (exit
2): the harness cannot tell the adapter's code from the runtime's there,
and ``harness check-adapter`` diagnoses it. ``submit`` and ``deliver`` are
the runtime's answers, recorded in the history: what they raise is a
finding.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from .._errors import UsageError
from ..adapters._contract import Adapter, WorkflowSpec
from ..checkers._base import final_state
from ..history import History
from ..model import EventF, PropertyResult, RunSpec, RunState, Scenario, Submit, Verdict
from ..outcome import Example, Outcome
from ..scenarios import Universe
from ._engine import Engine


def probe_scenario(workflow: WorkflowSpec) -> Scenario:
    """One run per example input of ``workflow``, no faults, then quiesce."""
    submits = tuple(
        Submit(
            run=RunSpec(run_id=f"probe{i}", tenant="acme", workflow=workflow.name, input=dict(x))
        )
        for i, x in enumerate(workflow.inputs, 1)
    )
    return Scenario(name=f"{PROBE_PREFIX}{workflow.name}", steps=submits).fault_free()


@dataclass(frozen=True)
class ProbeFinding:
    """A workflow whose fault-free run the runtime could not finish."""

    workflow: str
    scenario: Scenario
    #: what went wrong, one sentence per run or cause
    problems: tuple[str, ...]
    #: the end of the workers' log when a worker crashed (else empty)
    log_tail: tuple[str, ...] = ()


def check_declarations(
    adapter: Adapter, run_oracle: Callable[[Scenario], Path]
) -> list[ProbeFinding]:
    """Run each workflow's probe (:func:`probe_scenario`) with ``run_oracle``
    (the engine's cached fault-free run, returning its history) and judge it.

    Raise :class:`UsageError` when a declaration is wrong in a way only the
    user can cause (see the module docstring); return the workflows whose
    fault-free run the runtime could not finish (empty: all is well), for
    :func:`probe_outcome` to report as a failure."""
    problems: list[str] = []
    findings: list[ProbeFinding] = []
    for wf in adapter.workflows():
        if not wf.inputs:
            problems.append(f"workflow {wf.name!r} declares no example inputs")
            continue
        scenario = probe_scenario(wf)
        path = run_oracle(scenario)
        history = History.load(path)
        found = runtime_problems(wf, scenario, history)
        if found:
            findings.append(
                ProbeFinding(
                    wf.name, scenario, tuple(found), crash_log(history, path.parent / "env")
                )
            )
        problems += declaration_problems(wf, scenario, history, runtime_failed=bool(found))
    if problems:
        raise UsageError(
            f"adapter {adapter.name!r} declares what its runtime does not do "
            f"(checked with one fault-free run per example input): {'; '.join(problems)}"
        )
    return findings


def workflow_problems(wf: WorkflowSpec, scenario: Scenario, history: History) -> list[str]:
    """What ``history`` (the fault-free run of ``scenario``, ``wf``'s inputs)
    contradicts in ``wf``, whoever is to blame."""
    return (
        effect_problems(wf, history)
        + finish_problems(wf, scenario, history)
        + approval_problems(wf, scenario, history)
    )


def declaration_problems(
    wf: WorkflowSpec, scenario: Scenario, history: History, *, runtime_failed: bool
) -> list[str]:
    """The problems of ``wf``'s fault-free run only a wrong declaration can
    cause: an effect kind the runtime performed that ``wf`` does not
    declare (named with any declared kind it never performed, which is
    then most likely the same mistake), and a run waiting for an approval
    the adapter built no message for. A declared kind never performed,
    alone, is not certainly the declaration's: a runtime may skip an effect
    and still complete, or fail first (:func:`runtime_problems`).
    ``runtime_failed``: the runtime's problems were found (kept for the
    callers; the effect check does not depend on it)."""
    del runtime_failed
    out: list[str] = []
    _, undeclared = _effect_gaps(wf, history)
    if undeclared:
        out += effect_problems(wf, history)
    out += [p for p in approval_problems(wf, scenario, history) if NO_MESSAGE in p]
    return out


def runtime_problems(wf: WorkflowSpec, scenario: Scenario, history: History) -> list[str]:
    """The problems of ``wf``'s fault-free run that are the runtime's (or
    the adapter's mapping of it): runs that never ended (or whose
    submission was refused), decisions delivered and not acted on, runs
    that ended without completing before their declared effects were
    performed, and runs that all completed without performing a declared
    effect kind (the runtime skipped it, or the declaration names one it
    never makes: the message says both) -- unless the runtime also
    performed an undeclared kind, which is the declaration's mistake."""
    out = finish_problems(wf, scenario, history)
    out += [p for p in approval_problems(wf, scenario, history) if NO_MESSAGE not in p]
    never, undeclared = _effect_gaps(wf, history)
    if never and not out and not undeclared:
        unfinished = _unfinished_runs(scenario, history)
        for run_id, shown in unfinished:
            out.append(
                f"run {run_id} of workflow {wf.name!r} ended {shown} without faults, before "
                f"performing its declared effect kind(s) {', '.join(never)}"
            )
        if not unfinished:
            out.append(
                f"every run of workflow {wf.name!r} completed without faults but without "
                f"performing its declared effect kind(s) {', '.join(never)} (it performed: "
                f"{', '.join(sorted(performed_effects(history))) or 'none'}): the runtime "
                "skipped them, or WorkflowSpec.effects declares kinds it never makes (then "
                "fix the declaration: harness check-adapter names it)"
            )
    return out


def _effect_gaps(wf: WorkflowSpec, history: History) -> tuple[list[str], list[str]]:
    """(declared, never performed), (performed, not declared)."""
    performed, declared = performed_effects(history), set(wf.effects)
    return sorted(declared - performed), sorted(performed - declared)


def _unfinished_runs(scenario: Scenario, history: History) -> list[tuple[str, str]]:
    """The runs of ``scenario`` that did not complete: (run id, how they ended)."""
    out = []
    finals = history.finals()
    for run in scenario.runs:
        final = finals.get(run.run_id)
        state = final_state(final) if final is not None else None
        if state is RunState.COMPLETED:
            continue
        if final is None:
            out.append((run.run_id, "with no final state"))
            continue
        error = final.value.get("error")
        why = f" (error: {error})" if error else ""
        out.append((run.run_id, f"in state {final.value.get('state')}{why}"))
    return out


#: the words that mark an approval problem as the adapter's (no message built)
NO_MESSAGE = "approval_message() built no message for it"


def crash_log(history: History, env_dir: Path) -> tuple[str, ...]:
    """The end of the workers' log in ``env_dir`` when a worker of
    ``history`` crashed (ended other than by exiting 0); else nothing."""
    crashed = any(
        e.type == "fail" or (e.type == "info" and e.value.get("signal") is not None)
        for e in history.by_f(EventF.WORKER)
    )
    if not crashed:
        return ()
    log = worker_log(env_dir)
    if log is None:
        return ()
    lines = log.read_text(encoding="utf-8", errors="replace").rstrip().splitlines()
    return last_error(lines)


#: lines of a crashed worker's log shown
LOG_LINES = 12


def last_error(lines: list[str]) -> tuple[str, ...]:
    """The log's last traceback when one starts in its last lines (its end,
    at most :data:`LOG_LINES` lines), else its last lines."""
    recent = lines[-4 * LOG_LINES :]
    starts = [i for i, line in enumerate(recent) if line.startswith("Traceback (most recent")]
    if starts:
        recent = recent[starts[-1] :]
    return tuple(recent[-LOG_LINES:])


def worker_log(env_dir: Path) -> Path | None:
    """The workers' log the deployment left in its folder: ``workers.log``
    (the convention of the kit and the built-in adapters), else the most
    recently written ``*.log``."""
    if not env_dir.is_dir():
        return None
    logs = [p for p in env_dir.rglob("*.log") if p.is_file() and p.stat().st_size]
    if not logs:
        return None
    named = [p for p in logs if p.name == "workers.log"]
    return max(named or logs, key=lambda p: p.stat().st_mtime)


def probe_outcome(engine: Engine, universe: Universe, findings: Sequence[ProbeFinding]) -> Outcome:
    """The run's outcome when the runtime could not finish a fault-free run:
    no search (every fault would be judged against a runtime that fails
    without any), and ``progress`` failed with the first such workflow's
    probe as its counterexample, run again as an example (so its folder,
    history and replay command are those of any counterexample). The
    other properties keep what that run shows them."""
    outcome = engine.new_outcome(universe)
    first = findings[0]
    example = engine.execute(first.scenario)
    example = judge_probe(engine.adapter, example, first, findings[1:])
    engine.account(outcome, example)
    outcome.counterexamples[PROGRESS] = example
    for r in example.results:
        if r.verdict is Verdict.FAIL and r.name != PROGRESS:
            outcome.counterexamples.setdefault(r.name, example)
    outcome.searched = 1
    outcome.seconds = time.monotonic() - outcome.started
    engine.keep_last(example)
    return outcome.freeze()


PROGRESS = "progress"

#: how a probe scenario's name begins: ``probe/WORKFLOW/oracle``
PROBE_PREFIX = "probe/"


def judge_probe(
    adapter: Adapter,
    example: Example,
    seen: ProbeFinding | None = None,
    others: Sequence[ProbeFinding] = (),
) -> Example:
    """``example`` with the probe's judgement when its scenario is a probe
    (``probe/WORKFLOW/oracle``, see :func:`probe_scenario`): ``progress`` fails
    when the runtime could not finish the fault-free run (the problems of
    :func:`runtime_problems`, read from ``example``'s own history). This is
    how ``harness replay`` of such a counterexample reproduces it: what it
    shows (a run failed or still waiting before its declared effects) is a
    failure only against what the adapter declares, which the properties do
    not read. ``seen`` is what the probe itself saw, kept when this run of
    the same scenario shows nothing (a runtime that fails only sometimes);
    ``others``: the other workflows the probe found failing, named."""
    name = example.scenario.name
    if not name.startswith(PROBE_PREFIX):
        return example
    # probe/WORKFLOW/oracle: Scenario.fault_free names it so
    wanted = name[len(PROBE_PREFIX) :].removesuffix("/oracle")
    wf = next((w for w in adapter.workflows() if w.name == wanted), None)
    if wf is None or not wf.inputs:
        return example
    history = History.load(example.folder / "history.jsonl")
    found = runtime_problems(wf, example.scenario, history)
    if found:
        seen = ProbeFinding(
            wf.name,
            example.scenario,
            tuple(found),
            crash_log(history, example.folder / "env"),
        )
    if seen is None:
        return example
    results = [_progress_failed(r, seen, others) for r in example.results]
    if not any(r.name == PROGRESS for r in results):
        results.append(_progress_failed(None, seen, others))
    example = replace(example, results=results)
    _witness_runs(example, example.scenario)
    return example


def _witness_runs(example: Example, scenario: Scenario) -> None:
    """Point ``progress``'s witness at how each probe run ended (its final
    event, or its refused submission) when the checker gave none."""
    history = History.load(example.folder / "history.jsonl")
    finals = history.finals()
    witness = []
    for run in scenario.runs:
        final = finals.get(run.run_id)
        if final is not None:
            witness.append(final.index)
        witness += [
            e.index
            for e in history.by_run(run.run_id)
            if e.f is EventF.SUBMIT and e.value.get("error")
        ]
    example.results = [
        r.model_copy(update={"witness": tuple(sorted(witness))})
        if r.name == PROGRESS and not r.witness
        else r
        for r in example.results
    ]


def _progress_failed(
    result: PropertyResult | None, finding: ProbeFinding, others: Sequence[ProbeFinding]
) -> PropertyResult:
    """``progress`` failed with what the probe of ``finding`` showed (the
    other results as they are)."""
    if result is not None and result.name != PROGRESS:
        return result
    text = (
        f"the fault-free run of workflow {finding.workflow!r} never completed its work: "
        f"{'; '.join(finding.problems)}"
    )
    if finding.log_tail:
        text += " -- a worker crashed; the end of the workers' log: " + " | ".join(
            line.strip() for line in finding.log_tail if line.strip()
        )
    if others:
        text += "; and the same for workflow(s) " + ", ".join(repr(f.workflow) for f in others)
    text += (
        ". No fault was injected: a runtime that cannot finish a run without faults "
        "cannot be judged under them, so no search ran"
    )
    if result is not None and result.verdict is Verdict.FAIL:
        text += f" ({result.message})"
    return PropertyResult(
        name=PROGRESS,
        verdict=Verdict.FAIL,
        message=text,
        witness=() if result is None else result.witness,
    )


def approval_problems(wf: WorkflowSpec, scenario: Scenario, history: History) -> list[str]:
    """The runs of ``scenario`` still waiting for an approval after the
    fault-free run's end, where the harness offers every waiting run its
    approver's decision: the adapter built no message for it
    (``approval_message()`` returned None) or the runtime did not act on the
    one delivered. Such a run never gets past its approval, so nothing after
    it would ever be tested, and the report would not say so."""
    out: list[str] = []
    finals = history.finals()
    for run in scenario.runs:
        final = finals.get(run.run_id)
        if final is None or final.value.get("state") != "waiting_approval":
            continue
        delivered = [
            e
            for e in history.by_run(run.run_id)
            if e.f is EventF.DELIVER and e.type == "invoke" and e.value.get("variant") == "valid"
        ]
        how = "the runtime did not act on the decision delivered" if delivered else NO_MESSAGE
        out.append(
            f"workflow {wf.name!r} with input {run.input!r} still waits for an approval after "
            f"the harness offered its approver's decision ({how}): implement "
            "approval_message() and deliver() (docs/adapters.md, 'Approval messages'), or "
            "the run's steps after the approval are never tested"
        )
    return out


def performed_effects(history: History) -> set[str]:
    """The effect kinds (``service.action``) the world received in ``history``."""
    return {str(e.value.get("kind")) for e in history.by_f(EventF.EFFECT) if e.value.get("kind")}


def effect_problems(wf: WorkflowSpec, history: History) -> list[str]:
    """Where the effect kinds ``wf`` declares differ from those its fault-free
    run (``history``) performed."""
    out: list[str] = []
    performed = performed_effects(history)
    declared = set(wf.effects)
    never = sorted(declared - performed)
    if never:
        out.append(
            f"workflow {wf.name!r} declares effect kind(s) {', '.join(never)} that its "
            "fault-free run never performed (it performed: "
            f"{', '.join(sorted(performed)) or 'none'}); faults aimed there would never fire: "
            "fix WorkflowSpec.effects"
        )
    undeclared = sorted(performed - declared)
    if undeclared:
        out.append(
            f"workflow {wf.name!r} performed effect kind(s) {', '.join(undeclared)} that it "
            "does not declare, so no fault is aimed at them: add them to WorkflowSpec.effects"
        )
    return out


def finish_problems(wf: WorkflowSpec, scenario: Scenario, history: History) -> list[str]:
    """The runs of ``scenario`` that ended neither terminal nor in a
    legitimate wait in its fault-free run (``history``)."""
    out: list[str] = []
    finals = history.finals()
    for run in scenario.runs:
        final = finals.get(run.run_id)
        state = final_state(final) if final is not None else None
        if state is None or not (state.terminal or state.legitimate_wait):
            shown = "no final state" if final is None else f"state {final.value.get('state')}"
            raw = "" if final is None else f", raw status {final.value.get('raw_status')!r}"
            refused = [
                e.value.get("error")
                for e in history.by_run(run.run_id)
                if e.f is EventF.SUBMIT and e.value.get("error")
            ]
            error = final.value.get("error") if final is not None else None
            if refused:
                error = f"submit raised {refused[0]}"
            why = f", {error}" if error else ""
            out.append(
                f"workflow {wf.name!r} with input {run.input!r} did not finish without "
                f"faults ({shown}{raw}{why}): a run that cannot finish fault-free cannot be "
                "judged under faults; check the input and the adapter's observe()"
            )
    return out
