"""Adapters that misbehave the ways adapters under development do (issue 13,
defect 4): the harness must report each as an adapter error (exit 2), never
as a failed property (exit 1) or a Python traceback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from examples.minimal_adapter.adapter import ToyAdapter, ToyEnvironment
from harness.adapters import ForkServerWorker, Observation
from harness.adapters.reference import ReferenceAdapter
from harness.adapters.reference._adapter import ReferenceEnvironment
from harness.model import CrashSpec

if os.environ.get("HOSTILE_IMPORT_BOOM"):
    raise RuntimeError("the adapter module's own code failed at import")


class CtorBoom(ToyAdapter):
    def __init__(self, keyed: str = "true") -> None:
        raise KeyError("missing configuration 'api_key'")


class WorkflowsGarbage(ToyAdapter):
    def workflows(self) -> Any:
        return ["charge"]


class OpenRaises(ToyAdapter):
    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        raise ConnectionRefusedError("cannot reach the runtime's database")


class _ObserveRaises(ToyEnvironment):
    def observe(self) -> Observation:
        raise ZeroDivisionError("observe is broken")


class ObserveRaises(ToyAdapter):
    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _ObserveRaises(workdir, self.keyed)


class _ObserveNaN(ToyEnvironment):
    def observe(self) -> Observation:
        obs = super().observe()
        runs = tuple(r.model_copy(update={"wake_at": float("nan")}) for r in obs.runs)
        return obs.model_copy(update={"runs": runs})


class ObserveNaN(ToyAdapter):
    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _ObserveNaN(workdir, self.keyed)


class _ObserveGarbage(ToyEnvironment):
    def observe(self) -> Any:
        return {"runs": []}


class ObserveGarbage(ToyAdapter):
    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _ObserveGarbage(workdir, self.keyed)


class _CloseRaises(ToyEnvironment):
    def close(self) -> None:
        super().close()
        raise OSError("close failed")


class CloseRaises(ToyAdapter):
    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _CloseRaises(workdir, self.keyed)


class AdapterCloseRaises(ToyAdapter):
    """Its optional ``close()`` hook, called when the whole run ends, raises."""

    def close(self) -> None:
        raise RuntimeError("cannot stop the runtime's server")


class _BadTarget(ToyEnvironment):
    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        return self.workers.spawn(worker_id, "examples.minimal_adapter.adapter:wroker_main", {})


class MisspelledTarget(ToyAdapter):
    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _BadTarget(workdir, self.keyed)


class _Stuck(ToyEnvironment):
    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        # a worker that never exits
        return self.workers.spawn(worker_id, "harness.procs._selftest:sleep_forever", {})


class StuckWorker(ToyAdapter):
    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _Stuck(workdir, self.keyed)


class _DeliverRaises(ReferenceEnvironment):
    def deliver(self, message: dict[str, Any]) -> bool:
        raise ValueError("the runtime refuses every decision")


class DeliverRaises(ReferenceAdapter):
    """A runtime broken on its fault-free path (found by a generated mutant):
    it raised out of the site profile as a traceback (exit 1 without a
    report), then was refused as an adapter error (exit 2); it is a finding."""

    def open(self, workdir: Path, *, seed: int) -> ReferenceEnvironment:
        return _DeliverRaises(self, workdir)
