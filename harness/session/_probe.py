"""Checks of what an adapter declares against one fault-free run, before a search.

A search aims faults at what the adapter declares: world faults at each
workflow's effect kinds, decisions at workflows that need approval. A
declaration that does not match what the runtime does makes every such fault
miss, and the search then reports nothing against a runtime that may well be
broken (a user declared ``payments.charge`` while the app calls
``payments.refund``: thirty faults armed, none fired, a green report). So
before searching, each workflow runs once without faults, every example input
a run of its own, and the run is compared with the declaration. A mismatch is
a configuration error (exit 2) naming the workflow and the fix.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .._errors import UsageError
from ..adapters._contract import Adapter, WorkflowSpec
from ..checkers._base import final_state
from ..history import History
from ..model import EventF, RunSpec, Scenario, Submit


def probe_scenario(workflow: WorkflowSpec) -> Scenario:
    """One run per example input of ``workflow``, no faults, then quiesce."""
    submits = tuple(
        Submit(
            run=RunSpec(run_id=f"probe{i}", tenant="acme", workflow=workflow.name, input=dict(x))
        )
        for i, x in enumerate(workflow.inputs, 1)
    )
    return Scenario(name=f"probe/{workflow.name}", steps=submits).fault_free()


def check_declarations(adapter: Adapter, run_oracle: Callable[[Scenario], Path]) -> None:
    """Raise :class:`UsageError` when a workflow's fault-free run contradicts
    what the adapter declares about it. ``run_oracle`` runs a fault-free
    scenario and returns its history (the engine's cached oracle)."""
    problems: list[str] = []
    for wf in adapter.workflows():
        if not wf.inputs:
            problems.append(f"workflow {wf.name!r} declares no example inputs")
            continue
        scenario = probe_scenario(wf)
        history = History.load(run_oracle(scenario))
        problems += workflow_problems(wf, scenario, history)
    if problems:
        raise UsageError(
            f"adapter {adapter.name!r} declares what its runtime does not do "
            f"(checked with one fault-free run per example input): {'; '.join(problems)}"
        )


def workflow_problems(wf: WorkflowSpec, scenario: Scenario, history: History) -> list[str]:
    """What ``history`` (the fault-free run of ``scenario``, ``wf``'s inputs)
    contradicts in ``wf``."""
    return (
        effect_problems(wf, history)
        + finish_problems(wf, scenario, history)
        + approval_problems(wf, scenario, history)
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
        how = (
            "the runtime did not act on the decision delivered"
            if delivered
            else "approval_message() built no message for it"
        )
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
