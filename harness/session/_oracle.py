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
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ..history import History
from ..model import Event, EventF, Quiesce, Scenario, Step, Submit

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
