"""Adapters that misbehave the ways adapters under development do (issue 13,
defect 4): the harness must report each as an adapter error (exit 2), never
as a failed property (exit 1) or a Python traceback."""

from __future__ import annotations

import os
import signal
import time
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


# -- BaseException from adapter code (issue 27, defect 4) and wrong types
# (defect 9): one adapter, told by its options where to misbehave and how.

if os.environ.get("HOSTILE_IMPORT_EXIT"):
    raise SystemExit(0)


def _misbehave(what: str) -> Any:
    """Raise (or return) what ``what`` names, as adapter code might."""
    if what == "exit0":
        raise SystemExit(0)
    if what == "exit3":
        raise SystemExit(3)
    if what == "interrupt":
        raise KeyboardInterrupt
    if what == "generator-exit":
        raise GeneratorExit
    if what == "base":
        raise BaseException("a bare BaseException")
    if what == "sigint":  # the user's Ctrl-C, arriving while adapter code runs
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the harness's handler raises here
        return None
    raise AssertionError(f"unknown misbehaviour {what!r}")


_WRONG: dict[str, Any] = {
    "dict": {"delivery": {}},
    "nan": float("nan"),
    "inf": float("inf"),
    "none": None,
    "str": "yes",
}


class _Misbehaving(ToyEnvironment):
    def __init__(self, workdir: Path, keyed: bool, where: str, what: str) -> None:
        super().__init__(workdir, keyed)
        self.where, self.what = where, what

    def _maybe(self, where: str, result: Any) -> Any:
        if self.where != where:
            return result
        if self.what in _WRONG:
            return _WRONG[self.what]
        if self.what == "nan-inside":
            return _nan_inside(result)
        return _misbehave(self.what)

    def declarations(self) -> Any:
        return self._maybe("declarations", super().declarations())

    def observe(self) -> Any:
        return self._maybe("observe", super().observe())

    def now(self) -> Any:
        return self._maybe("now", super().now())

    def submit(self, run: Any) -> None:
        super().submit(run)
        self._maybe("submit", None)

    def crash_points(self) -> Any:
        return self._maybe("crash_points", super().crash_points())

    def start_worker(self, worker_id: str, **kwargs: Any) -> Any:
        return self._maybe("start_worker", super().start_worker(worker_id, **kwargs))

    def close(self) -> None:
        super().close()
        self._maybe("env.close", None)


def _nan_inside(obs: Any) -> Any:
    """An observation whose runs' outputs hold NaN (a number the history
    cannot record)."""
    runs = tuple(r.model_copy(update={"output": {"total": float("nan")}}) for r in obs.runs)
    return obs.model_copy(update={"runs": runs})


class Misbehaving(ToyAdapter):
    """``--adapter-opt where=HOOK --adapter-opt what=HOW``: ``HOOK`` (``init``,
    ``setup``, ``open``, ``describe``, ``close``, or an environment's
    ``declarations``, ``observe``, ``now``, ``submit``, ``crash_points``,
    ``env.close``) exits, raises a BaseException or returns the wrong type."""

    def __init__(self, where: str = "", what: str = "exit0") -> None:
        super().__init__()
        self.where, self.what = where, what
        if where == "init":
            _misbehave(what)

    def setup(self) -> None:
        if self.where == "setup":
            _misbehave(self.what)

    def open(self, workdir: Path, *, seed: int) -> Any:
        if self.where == "open":
            return _WRONG[self.what] if self.what in _WRONG else _misbehave(self.what)
        return _Misbehaving(workdir, self.keyed, self.where, self.what)

    def describe(self) -> Any:
        if self.where == "describe":
            return _WRONG[self.what] if self.what in _WRONG else _misbehave(self.what)
        return super().describe()

    def close(self) -> None:
        if self.where == "close":
            _misbehave(self.what)


class ExitingCapabilities(ToyAdapter):
    """Adapter code outside any call the boundary wraps: a property."""

    @property  # type: ignore[override]
    def capabilities(self) -> Any:
        raise SystemExit(0)
