"""The last pass of shrinking: the shrunk counterexample, one step shorter.

Hypothesis shrinks the choices a scenario was drawn from, not its steps,
and an episode (``harness.scenarios._strategies``) is drawn as one unit:
a step the failure does not need stays whenever the draws cannot lose it
without losing the steps around it -- an episode's ``RunWorker`` right
before the final ``Quiesce`` (a quiesce worker does the same work). A
targeted schedule is never shrunk at all, and some carry such a step: a
zombie schedule's ``ContinueWorker`` right before the ``Quiesce``, which
continues every paused worker first. So once Hypothesis is done, the
shrink phase deletes one step of each counterexample at a time, the last
first, and keeps a deletion when the shorter scenario, run like any
candidate, fails the same property
(:meth:`Shrink.drop_steps <._shrink.Shrink.drop_steps>`).

This module says which deletions are worth a run: :func:`deletions`
gives only scenarios the runner can run as written (:func:`runnable`),
and never takes away what every scenario of the search has (a
submission, the final quiesce).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..model import (
    Approve,
    Cancel,
    ContinueWorker,
    KillWorker,
    NetworkFault,
    Quiesce,
    RaceWorkers,
    ReleaseWorkers,
    RunWorker,
    Scenario,
    Step,
    Submit,
)
from ..nemesis import ScenarioError, validate
from ..vocabulary import Capability


def deletions(scenario: Scenario, capabilities: Iterable[Capability]) -> Iterator[Scenario]:
    """``scenario`` without one of its steps, the last first, each one the
    runner can run as written (:func:`runnable`) and that still passes
    :func:`harness.nemesis.validate` against ``capabilities``. A final
    ``Quiesce`` is never deleted: every scenario a search draws ends with
    one, and the properties judge a run once faults have stopped."""
    steps = scenario.steps
    caps = frozenset(capabilities)
    last = len(steps) - 1 if steps and isinstance(steps[-1], Quiesce) else len(steps)
    for i in reversed(range(last)):
        shorter = (*steps[:i], *steps[i + 1 :])
        if not runnable(shorter):
            continue
        candidate = scenario.model_copy(update={"steps": shorter})
        try:
            validate(candidate, caps)
        except ScenarioError:  # pragma: no cover - a deletion asks for no new capability
            continue
        yield candidate


def runnable(steps: tuple[Step, ...]) -> bool:
    """Whether the runner runs ``steps`` without a :class:`ScenarioError`
    whatever the runtime does, and they still make a workload: at least one
    run submitted, every run a step names (a decision's addressee and
    signer, a cancellation's run) submitted, and no worker started again
    while a pause of its own may still hold it (the runner refuses that:
    ``harness.runner._steps``). A pause armed by a ``RunWorker`` may hold
    it until a ``ContinueWorker``, ``KillWorker``, ``ReleaseWorkers``,
    ``NetworkFault`` or ``Quiesce`` lets it go."""
    submitted = {s.run.run_id for s in steps if isinstance(s, Submit)}
    if not submitted:
        return False
    held: set[str] = set()
    for step in steps:
        if not _named_runs(step) <= submitted:
            return False
        if isinstance(step, RunWorker):
            if step.worker_id in held:
                return False
            if step.crash is not None and step.crash.action == "pause":
                held.add(step.worker_id)
        elif isinstance(step, RaceWorkers):
            if held & set(step.worker_ids):
                return False
        elif isinstance(step, ContinueWorker | KillWorker | NetworkFault):
            held.discard(step.worker_id)
        elif isinstance(step, ReleaseWorkers):
            held -= set(step.worker_ids)
        elif isinstance(step, Quiesce):
            held.clear()
    return True


def _named_runs(step: Step) -> set[str]:
    """The run ids ``step`` names (that must be submitted for it to mean
    what it says)."""
    if isinstance(step, Approve):
        return {step.run_id} | ({step.signed_for} if step.signed_for else set())
    if isinstance(step, Cancel):
        return {step.run_id}
    return set()
