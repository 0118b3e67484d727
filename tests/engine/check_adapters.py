"""Adapters that ``harness check-adapter`` must refuse, each for one cause
(the toy of docs/adapters.md, broken one way each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from examples.minimal_adapter.adapter import ToyAdapter, ToyEnvironment
from harness.adapters import (
    Declarations,
    ForkServerWorker,
    Observation,
    WorkflowSpec,
    shared_fork_server,
)
from harness.adapters.kit import WorkerSet
from harness.adapters.reference import ReferenceAdapter
from harness.model import CrashSpec, RunState

#: what every worker of :class:`CrashingWorker` dies of
CRASH = "cannot reach the job queue at 10.0.0.7:5672 (connection refused)"


class _OwnWorkers(ToyEnvironment):
    """The toy's deployment with workers this module starts itself, logged
    to ``workers.log`` in the deployment's folder."""

    def __init__(self, workdir: Path, keyed: bool) -> None:
        super().__init__(workdir, keyed)
        self.folder = workdir
        self.own: list[ForkServerWorker] = []

    def spawn(self, worker_id: str, target: str, args: dict[str, Any]) -> ForkServerWorker:
        proc = shared_fork_server(["examples.minimal_adapter.adapter"]).spawn(
            target, args=args, log=self.folder / "workers.log"
        )
        self.own.append(ForkServerWorker(worker_id, proc))
        return self.own[-1]

    def close(self) -> None:
        for worker in self.own:
            worker.kill()
            worker.proc.wait(10.0)
        super().close()


class _Crashing(_OwnWorkers):
    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        return self.spawn(worker_id, "harness.procs._selftest:raise_error", {"message": CRASH})


class CrashingWorker(ToyAdapter):
    """Every worker it starts raises at once (exit 1, a traceback in its log)."""

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _Crashing(workdir, self.keyed)


class _Misspelled(_OwnWorkers):
    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        return self.spawn(worker_id, "examples.minimal_adapter.adapter:wroker_main", {})


class MisspelledTarget(ToyAdapter):
    """Its workers' target is ``...:wroker_main``: the module has ``worker_main``."""

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _Misspelled(workdir, self.keyed)


class _BackwardsStates(ToyEnvironment):
    def declarations(self) -> Declarations:
        declared = super().declarations()
        # "completed" may only go back to "pending": the toy's pending ->
        # completed is then illegal by its own declared table.
        table = {"pending": [], "completed": ["pending"]}
        return Declarations(delivery=dict(declared.delivery), transitions=table)


class DeclaresWrongStates(ToyAdapter):
    """Declares a state machine its runtime does not follow."""

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _BackwardsStates(workdir, self.keyed)


class _Silent(ToyEnvironment):
    def observe(self) -> Observation:
        return super().observe().model_copy(update={"transitions": ()})


class ReportsNoTransitions(ToyAdapter):
    """Its observe() never hands out a transition."""

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _Silent(workdir, self.keyed)


__all__ = [
    "ChattyToy",
    "CrashingWorker",
    "DeclaresWrongStates",
    "MisspelledTarget",
    "NeverApproved",
    "ReportsNoTransitions",
]


def chatty_main(args: dict[str, Any]) -> int:
    """The toy's worker, saying on stderr what it is about to do."""
    import sys

    from examples.minimal_adapter.adapter import worker_main

    print(f"{CHATTY} ({args['worker_id']})", file=sys.stderr, flush=True)
    return worker_main(args)


#: what every worker of :class:`ChattyToy` prints before it works
CHATTY = "toy worker: charging every pending run"


class _Chatty(ToyEnvironment):
    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        return self.workers.spawn(
            worker_id, "check_adapters:chatty_main", {**self.args, "worker_id": worker_id}
        )


class ChattyToy(ToyAdapter):
    """The toy, whose workers print a line each on stderr."""

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _Chatty(workdir, self.keyed)


class _AwaitsApproval(ToyEnvironment):
    """Every run waits for an approval this deployment cannot be given (no
    ``approval_message()``): its workers do nothing."""

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        return self.workers.spawn(worker_id, "harness.procs._selftest:noop", {})

    def observe(self) -> Observation:
        obs = super().observe()
        runs = tuple(r.model_copy(update={"state": RunState.WAITING_APPROVAL}) for r in obs.runs)
        return obs.model_copy(update={"runs": runs})


class NeverApproved(ToyAdapter):
    """A workflow gated by an approval the adapter gives the harness no way
    to deliver."""

    def workflows(self) -> list[WorkflowSpec]:
        return [
            w.model_copy(update={"effects": (), "needs_approval": True})
            for w in super().workflows()
        ]

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _AwaitsApproval(workdir, self.keyed)


class RefundNamesNoMemory(ReferenceAdapter):
    """The reference runtime, its refund workflow alone and declared without
    memory targets: it can inject memory, but its fault-free run's contexts
    list no memory record, so no run would read a planted one."""

    def workflows(self) -> list[WorkflowSpec]:
        (refund,) = [w for w in super().workflows() if w.name == "refund"]
        return [refund.model_copy(update={"memory_targets": ()})]


class DeclaresAFloorAboveTheScale(ToyAdapter):
    """Its workflow reads memory at a trust floor of 1.5: the scale ends at 1.0."""

    def workflows(self) -> list[WorkflowSpec]:
        charge = {"customer_id": "c-1", "amount_cents": 500}
        return [
            WorkflowSpec(
                name="charge", inputs=(charge,), effects=("payments.charge",), memory_floor=1.5
            )
        ]


class CopiesInAFloorOfNoNumber(ToyAdapter):
    """Its workflow's floor set by ``model_copy``, which validates nothing:
    a namespace's floor given as a word."""

    def workflows(self) -> list[WorkflowSpec]:
        return [
            w.model_copy(update={"memory_floor": {"policy": "verified"}})
            for w in super().workflows()
        ]


class _HyphenatedPromise(ToyEnvironment):
    def declarations(self) -> Declarations:
        declared = super().declarations()
        promises = {kind: "exactly-once" for kind in declared.delivery}
        return Declarations(delivery=promises, transitions=declared.transitions)


class DeclaresAHyphenatedPromise(ToyAdapter):
    """Promises ``exactly-once`` (a hyphen where the harness spells
    ``exactly_once``): a word the checkers do not know."""

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _HyphenatedPromise(workdir, self.keyed)


def lazy_main(args: dict[str, Any]) -> int:
    """The toy's worker, importing a framework's worth of modules first (as
    a framework that imports itself lazily, on first use, does)."""
    import email.mime.multipart  # noqa: F401
    import http.cookiejar  # noqa: F401
    import xml.dom.minidom
    import xml.etree.ElementTree  # noqa: F401

    from examples.minimal_adapter.adapter import worker_main

    return worker_main(args)


class _Lazy(ToyEnvironment):
    def __init__(self, workdir: Path, keyed: bool, preload: str | None) -> None:
        super().__init__(workdir, keyed)
        listed = [f"@{preload}"] if preload else []
        self.workers = WorkerSet(workdir, ["examples.minimal_adapter.adapter", *listed])

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        return self.workers.spawn(
            worker_id, "check_adapters:lazy_main", {**self.args, "worker_id": worker_id}
        )


class LazyToy(ToyAdapter):
    """The toy, whose workers import dozens of modules after the fork.
    Option ``preload``: a list file (``check-adapter --preload-out``) the
    fork server imports first."""

    def __init__(self, keyed: str = "true", preload: str | None = None) -> None:
        super().__init__(keyed)
        self.preload = preload

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _Lazy(workdir, self.keyed, self.preload)
