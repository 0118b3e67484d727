"""A :class:`Scenario` (a workload and a fault schedule, as steps) and
:func:`describe_step`, a step as a readable line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import (
    BaseModel,
    Field,
)

from ._records import (
    SCHEMA_VERSION,
    RunSpec,
    _Frozen,
)
from ._steps import (
    AdvanceClock,
    Approve,
    ArmWorldFault,
    Cancel,
    ContinueWorker,
    InjectMemory,
    KillAfter,
    KillWorker,
    NetworkFault,
    Quiesce,
    RaceWorkers,
    ReleaseWorkers,
    RunWorker,
    Step,
    StorageFault,
    Submit,
    _Step,
)


class Scenario(_Frozen):
    """A workload and a fault schedule: everything needed to replay a run."""

    schema_version: int = Field(SCHEMA_VERSION, ge=1)
    name: str = "scenario"
    seed: int = 0
    steps: tuple[Step, ...]

    @property
    def runs(self) -> tuple[RunSpec, ...]:
        return tuple(s.run for s in self.steps if isinstance(s, Submit))

    def fault_free(
        self,
        migrate: Callable[[RunSpec], dict[str, Any]] | None = None,
        *,
        keep_releases: bool = False,
    ) -> Scenario:
        """The oracle: the same submissions, no faults, then quiesce (which
        delivers each run's planned decision when it waits for one).

        Every run is submitted to the current code: a run accepted by an older
        release and carried across the upgrade must end as if today's code
        had taken it, so the oracle is the run that never saw an older
        release. ``migrate`` gives such a run's input as today's code holds
        it after the upgrade (what the older release could not record is
        lost: see the adapter's optional ``migrated_input``); without it the
        input is taken as is.

        With ``keep_releases`` (the adapter's ``keeps_definitions``: a run
        finishes on the definition it started on), such a run is submitted
        to the older release that accepted it, as is, and today's code
        finishes it with no fault: the run on the definition it started on.
        """
        submits: list[Step] = []
        for step in self.steps:
            if not isinstance(step, Submit):
                continue
            run = step.run
            if run.code_version is not None and not keep_releases:
                new_input = run.input if migrate is None else migrate(run)
                run = run.model_copy(update={"code_version": None, "input": dict(new_input)})
            submits.append(Submit(run=run))
        return Scenario(name=f"{self.name}/oracle", seed=self.seed, steps=(*submits, Quiesce()))

    def describe(self) -> list[str]:
        """The steps as short readable lines (used in counterexamples)."""
        return [describe_step(s) for s in self.steps]


def describe_step(step: BaseModel) -> str:
    own = step.describe() if isinstance(step, _Step) else None
    if own is not None:
        return own
    if isinstance(step, Submit):
        r = step.run
        old = f" under code v{r.code_version}" if r.code_version is not None else ""
        return f"submit {r.workflow} run {r.run_id} for {r.tenant} with {r.input}{old}"
    if isinstance(step, RunWorker):
        extra = ""
        if step.crash is not None:
            c = step.crash
            extra = f", {c.action} it at hit {c.nth} of {c.site}"
        if step.code_version is not None:
            extra += f", running code v{step.code_version}"
        return f"start worker {step.worker_id}{extra}"
    if isinstance(step, ContinueWorker):
        return f"continue paused worker {step.worker_id}"
    if isinstance(step, KillWorker):
        return f"SIGKILL worker {step.worker_id}"
    if isinstance(step, KillAfter):
        return f"start worker {step.worker_id}, SIGKILL it after {step.delay * 1000:.0f} ms"
    if isinstance(step, RaceWorkers):
        return f"start workers {', '.join(step.worker_ids)} at once"
    if isinstance(step, ReleaseWorkers):
        return f"release paused workers {', '.join(step.worker_ids)} at once"
    if isinstance(step, Approve):
        copies = f" x{step.copies}" if step.copies > 1 else ""
        fresh = f" (+{step.fresh_copies} more messages)" if step.fresh_copies else ""
        what = f"a {step.variant} decision"
        if step.variant == "cross_tenant":
            what = "another tenant's message (a decision it signed, or the event waited on)"
        if step.variant == "changed_mind":
            what = "the planned decision, then at once the approver's opposite one,"
        if step.variant == "misdirected":
            what = f"a decision genuinely signed for {step.signed_for}'s approval"
        return f"deliver {what} for {step.run_id}{copies}{fresh}"
    if isinstance(step, AdvanceClock):  # a boundary (``until``) describes itself
        return f"advance the clock {step.seconds:g} s"
    if isinstance(step, ArmWorldFault):
        action = f".{step.action}" if step.action else ""
        delay = f" ({step.delay:g} s)" if step.delay else ""
        calls = f"calls {step.nth}..{step.nth + step.calls - 1}" if step.calls > 1 else None
        where = calls or f"call {step.nth}"
        if step.action == "lookup":  # harness.world.LOOKUP: the service's lookups
            where = where.replace("call", "lookup")
            return f"arm world fault {step.mode} on {where} of {step.service}"
        return f"arm world fault {step.mode}{delay} on {where} of {step.service}{action}"
    if isinstance(step, InjectMemory):
        lapse = f" expiring in {step.expires_in:g} s" if step.expires_in else ""
        return f"plant {step.kind} memory {step.namespace}/{step.key} for {step.tenant}{lapse}"
    if isinstance(step, StorageFault):
        return f"storage fault {step.kind}"
    if isinstance(step, NetworkFault):
        what = {
            "commit_ack_lost": "its COMMIT's acknowledgement is lost",
            "reset_mid_transaction": "its connection is reset mid-transaction",
            "partition": "partitioned from the store past its lease while another "
            "worker takes over, then healed",
            "latency": "its store traffic delayed",
            "slow_reply": "its store's replies arrive in fragments",
            "cut_reply": "its store's next reply is cut after a few bytes",
            "commit_lost": "its COMMIT is lost on the way (never applied) and the connection ends",
        }[step.kind]
        return f"network fault on paused worker {step.worker_id}: {what}; it goes on"
    if isinstance(step, Cancel):
        return f"an operator cancels run {step.run_id}"
    if isinstance(step, Quiesce):
        return "stop faults and run workers until nothing moves"
    return repr(step)
