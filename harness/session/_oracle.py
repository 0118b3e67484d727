"""The oracle, one deployment per tenant: split a workload, merge the histories.

The oracle is the workload run without faults. Run in one deployment, it
shares every mistake the runtime makes between tenants with the faulted run
(a write skipped because another tenant already wrote the same content, a
cache keyed without the tenant): both runs make the same mistake, agree, and
the check passes. Run with each tenant's runs in a deployment of their own,
a run's fault-free result depends on its own tenant alone, so a faulted run
whose result another tenant's data changed differs from it.

The checkers take one oracle :class:`~harness.history.History`. Every
consumer looks the oracle up run by run (a run's final state, its effects,
contexts and durable state; see ``harness.checkers``), and a run belongs to
one tenant, so the merge is sound for them: each run's oracle events come,
whole and in order, from its own tenant's deployment. What the merged history
does *not* promise: an order between events of different tenants, or one
virtual clock (each deployment has its own; ``time`` is per tenant). A part's
unreadable lines or index gaps stay problems of the merged history (written
as lines that are not events), so a checker still answers *unknown* where
the oracle has a hole.

**Fault-free runs must agree before they are trusted** (:class:`Agreement`).
Every property that compares with the oracle takes it for *the* fault-free
result of its workload. An app whose fault-free runs differ from one run to
the next (a model that is not scripted, a timestamp in an output, a random
id) would make each of them fail against a run that merely went the other
way -- a failure that proves nothing -- or pass by luck. So the first
fault-free run of each workflow (the probe's, before any search) is run
``determinism_runs`` times in all, each in a fresh deployment, and the runs
are compared as the oracle-comparing properties compare a run with its
oracle (:func:`disagreement`). A workflow whose runs disagree is
*unstable*: every oracle holding one of its runs carries a note saying so
(:data:`~harness.checkers.DISAGREEMENT`: the first difference and how to
fix it), and the properties that compare with it read ``unknown``, never
``fail`` (``harness.checkers._base.untrusted``), which makes the run
inconclusive (exit 3).

Checked once per workflow, not per workload: a second run of every oracle
would cost about a fifth of a ``ci`` run (32 oracles to 150 scenarios on the
reference runtime), while what makes a fault-free run differ is almost
always the workflow's own (its model, its clock, its ids), which its first
runs show. What the check cannot see: a difference that only some inputs or
some mixes of runs bring out, or one the ``determinism_runs`` runs happened
not to show (a 50/50 choice agrees by chance in half of the pairs of runs:
raise ``--determinism-runs`` to lower that).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..checkers import CHECKERS
from ..checkers._base import DISAGREEMENT
from ..history import History
from ..model import Event, EventF, Quiesce, Scenario, Step, Submit, Verdict

#: The note that opens a merged oracle history.
SPLIT_NOTE = "oracle: each tenant's runs ran in a deployment of their own"


def tenant_parts(free: Scenario) -> list[tuple[str, Scenario]]:
    """``free`` (a fault-free scenario: submissions, then a quiesce) split by
    tenant, in order of each tenant's first submission: one scenario per
    tenant, with that tenant's submissions in their order, the same seed,
    then ``free``'s quiesce. One tenant (or none): ``free`` itself."""
    by_tenant: dict[str, list[Step]] = {}
    for step in free.steps:
        if isinstance(step, Submit):
            by_tenant.setdefault(step.run.tenant, []).append(step)
    if len(by_tenant) <= 1:
        return [(next(iter(by_tenant), ""), free)]
    quiesce = next((s for s in free.steps if isinstance(s, Quiesce)), Quiesce())
    return [
        (
            tenant,
            Scenario(name=f"{free.name}/{tenant}", seed=free.seed, steps=(*submits, quiesce)),
        )
        for tenant, submits in by_tenant.items()
    ]


def merge_histories(parts: Sequence[tuple[str, Path]], target: Path) -> Path:
    """Write one history at ``target`` from each tenant's oracle history
    (``(tenant, path)`` in order), and return ``target``.

    Events keep their order within each part and are numbered afresh, part
    after part, after a note naming the tenants. The first part's
    declaration is kept; a later part's identical declaration is dropped (a
    differing one is kept, and :meth:`History.declaration` reports the
    difference). Each problem of a part becomes one line that is not an
    event, so the merged history has a problem for it.
    """
    lines: list[str] = []
    index = 0

    def add(event: Event) -> None:
        nonlocal index
        lines.append(event.model_copy(update={"index": index}).model_dump_json())
        index += 1

    add(
        Event(
            index=0,
            time=0.0,
            process="runner",
            type="info",
            f=EventF.NOTE,
            value={"text": SPLIT_NOTE, "tenants": [tenant for tenant, _ in parts]},
        )
    )
    declared: dict[str, object] | None = None
    for tenant, path in parts:
        part = History.load(path)
        for problem in part.problems:
            lines.append(json.dumps({"oracle_of_tenant": tenant, "problem": problem}))
        for event in part.events:
            if event.f is EventF.DECLARATION:
                if declared is None:
                    declared = event.value
                elif event.value == declared:
                    continue
            add(event)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return target


#: the properties whose verdict is a comparison of a run with its oracle, in
#: the order :func:`disagreement` asks them (``exactly_once_effects`` only
#: looks at the oracle for silently dropped effects, which
#: ``resume_equivalence`` sees too)
COMPARING = ("resume_equivalence", "state_equivalence", "context_rebuild")

#: how to make a workflow's fault-free runs agree
FIX = (
    "make the fault-free run deterministic: script the model (serve the world's model "
    "endpoint with a script or a cassette, docs/adapters.md 'Test your app as it is'), "
    "list the field that changes from run to run in DurableState.volatile (ids, "
    "timestamps), or derive ids and times from the run's input and the harness's clock"
)


def disagreement(first: History, other: History) -> str | None:
    """The first difference between two fault-free runs of one workload, as
    the properties that compare with the oracle see it: ``other`` judged by
    each of :data:`COMPARING` with ``first`` as its oracle, run by run (in
    the order ``first`` ended them), the first failure's message. None:
    they agree (every comparison passed, or had nothing to compare)."""
    runs: list[str | None] = [*first.finals()] or [None]
    for run_id in runs:
        mine, theirs = _only(other, run_id), _only(first, run_id)
        for name in COMPARING:
            result = CHECKERS[name](mine, theirs)
            if result.verdict is Verdict.FAIL:
                said = re.sub(r"^\d+ violations?: ", "", result.message).rstrip(".")
                if len(said) > SHOWN:
                    said = said[: SHOWN - 3] + "..."
                return f"{said} ({name})"
    return None


#: how much of a difference a message shows
SHOWN = 400


def _only(history: History, run_id: str | None) -> History:
    """``history``'s events of run ``run_id`` and those of no run (None: all)."""
    if run_id is None:
        return history
    kept = [e for e in history.events if e.value.get("run_id") in (None, run_id)]
    return History(kept, history.problems)


class Agreement:
    """Whether each workflow's fault-free runs agree (see the module
    docstring): :meth:`settle` repeats the first fault-free run of a
    workflow and compares, and marks every oracle of an unstable workflow.

    ``checked`` (workflow -> the first difference, or None when its runs
    agreed) is plain data: a job of ``--jobs N`` takes its parent's, and
    never checks again what the parent checked."""

    def __init__(self, runs: int, log: Callable[[str], None] | None = None) -> None:
        #: fault-free runs compared, the first included (1: none repeated)
        self.runs = runs
        self.checked: dict[str, str | None] = {}
        self._log = log or (lambda _line: None)

    @property
    def unstable(self) -> dict[str, str]:
        """The workflows whose fault-free runs disagreed, with the first difference."""
        return {wf: why for wf, why in self.checked.items() if why is not None}

    def settle(self, free: Scenario, first: Path, again: Callable[[int], Path]) -> Path:
        """The oracle history at ``first`` (the fault-free run of ``free``),
        marked if a workflow of its runs is unstable. When one of them was
        never checked, ``free`` runs again (``again(k)``: its k-th run, in a
        fresh deployment, the path of its history), up to ``runs`` runs in
        all or until one differs from the first, and the workflows are
        recorded as agreeing or not."""
        workflows = list(dict.fromkeys(run.workflow for run in free.runs))
        unchecked = [wf for wf in workflows if wf not in self.checked]
        if unchecked and self.runs > 1:
            found = None
            oracle = History.load(first)
            for k in range(2, self.runs + 1):
                diff = disagreement(oracle, History.load(again(k)))
                if diff is not None:
                    found = (
                        f"two fault-free runs of workflow {', '.join(map(repr, unchecked))} "
                        f"with the same input differ (run {k} of {self.runs}, 'here', against "
                        f"run 1, 'the oracle'): {diff}. To fix: {FIX}"
                    )
                    self._log(
                        f"harness: the fault-free runs of workflow {', '.join(unchecked)} "
                        "disagree: the properties that compare with them will read unknown, "
                        f"never fail. {found}"
                    )
                    break
            for wf in unchecked:
                self.checked[wf] = found
        return mark(first, {wf: self.unstable[wf] for wf in workflows if wf in self.unstable})

    def save(self) -> dict[str, str | None]:
        """What a job of ``--jobs N`` takes (:meth:`load`)."""
        return dict(self.checked)

    def load(self, checked: Mapping[str, str | None]) -> None:
        """Take what the parent checked (:meth:`save`)."""
        self.checked.update(checked)


def mark(path: Path, unstable: Mapping[str, str]) -> Path:
    """Append to the history at ``path`` one note per unstable workflow
    (:data:`~harness.checkers.DISAGREEMENT`), after its last event (no index
    moves); returns ``path``. Nothing to mark: the file is left as it is."""
    if not unstable:
        return path
    events = History.load(path).events
    index = events[-1].index + 1 if events else 0
    at = events[-1].time if events else 0.0
    lines = []
    for n, (workflow, why) in enumerate(unstable.items()):
        note = Event(
            index=index + n,
            time=at,
            process="runner",
            type="info",
            f=EventF.NOTE,
            value={
                "text": f"oracle: the fault-free runs of workflow {workflow!r} disagree",
                "workflow": workflow,
                DISAGREEMENT: why,
            },
        )
        lines.append(note.model_dump_json())
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))
    return path
