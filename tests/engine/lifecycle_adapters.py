"""Adapters with run-level hooks (issue 18): ``setup()`` starts what a whole
harness run shares; what it leaves must reach ``open()`` and the workers."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from examples.minimal_adapter.adapter import ToyAdapter, ToyEnvironment, worker_main
from harness.adapters import ForkServerWorker
from harness.model import CrashSpec


def _log(event: str, **data: Any) -> None:
    """Append one event to the file ``LIFECYCLE_LOG`` names (one JSON a line)."""
    with open(os.environ["LIFECYCLE_LOG"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"event": event, "pid": os.getpid(), **data}) + "\n")


def seeing_worker(args: dict[str, Any]) -> int:
    """The toy worker, after saying what it sees of the run's setup."""
    _log("worker", arg=args["token"], env=os.environ.get("LIFECYCLE_TOKEN"))
    return worker_main(args)


class _SeeingEnvironment(ToyEnvironment):
    def __init__(self, workdir: Path, keyed: bool, token: str) -> None:
        super().__init__(workdir, keyed)
        self.token = token

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        args = {**self.args, "worker_id": worker_id, "token": self.token}
        return self.workers.spawn(
            worker_id, f"{__name__}:seeing_worker", args, env={"LIFECYCLE_TOKEN": self.token}
        )


class SetupAdapter(ToyAdapter):
    """A fresh token per run, made in ``setup()`` (a server's URL, say)."""

    token: str | None = None

    def setup(self) -> None:
        assert self.token is None, "setup() is called once"
        self.token = uuid.uuid4().hex
        _log("setup", token=self.token)

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        _log("open", token=self.token)
        if self.token is None:
            raise RuntimeError("open() before setup()")
        return _SeeingEnvironment(workdir, self.keyed, self.token)

    def close(self) -> None:
        _log("close", token=self.token)


class SetupRaises(ToyAdapter):
    """``setup()`` fails halfway; ``close()`` must still run."""

    def setup(self) -> None:
        _log("setup")
        raise ConnectionRefusedError("the runtime's server did not start on port 7233")

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        _log("open")
        return super().open(workdir, seed=seed)

    def close(self) -> None:
        _log("close")
