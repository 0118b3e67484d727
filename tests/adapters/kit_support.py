"""Worker targets and adapters for ``test_kit``: real code the fork server
imports (this folder is on ``sys.path`` under pytest, and the fork server
inherits ``sys.path``)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from examples.minimal_adapter.adapter import ToyAdapter, ToyEnvironment
from harness.adapters import Observation
from harness.adapters.kit import (
    DedupInbox,
    FileClock,
    IdlePolicy,
    RunRegistry,
    work_until_idle,
)

#: the process that imported this module: the fork server when preloaded
IMPORTED_BY = os.getpid()


def report_preload(args: dict[str, Any]) -> int:
    """Say whether this module was imported before the fork, and print to the log."""
    print(f"hello from {args['worker_id']}", flush=True)
    print("and from stderr", file=sys.stderr, flush=True)
    preloaded = os.getpid() != IMPORTED_BY
    Path(args["out"]).write_text(json.dumps({"preloaded": preloaded}))
    return 0


def read_clock(args: dict[str, Any]) -> int:
    """Append the clock's time, as this worker reads it, to ``out``."""
    with open(args["out"], "a") as out:
        out.write(f"{FileClock(args['clock']).now()!r}\n")
    return 0


def record_many(args: dict[str, Any]) -> int:
    """Record ``n`` transitions of one run, alternating two statuses."""
    registry = RunRegistry(args["registry"])
    for i in range(int(args["n"])):
        to = "running" if i % 2 == 0 else "waiting"
        registry.record(args["run_id"], to, actor=args["worker_id"], action=f"step {i}")
    return 0


def deliver_then_sleep(args: dict[str, Any]) -> None:
    """Deliver a message, say whether it was new, then sleep until killed."""
    fresh = DedupInbox(args["inbox"]).deliver({"message_id": args["message_id"], "run_id": "r1"})
    Path(args["out"]).write_text(json.dumps({"fresh": fresh}))
    while True:
        time.sleep(1)


def background_runtime(args: dict[str, Any]) -> int:
    """A runtime that recovers in a background thread: it bumps a counter
    file ``steps`` times (``pause`` seconds apart), or forever if ``steps``
    is negative. The worker waits with :func:`work_until_idle`."""
    counter = Path(args["counter"])
    counter.write_text("0")

    def recover() -> None:
        n = 0
        while args["steps"] < 0 or n < args["steps"]:
            time.sleep(args["pause"])
            n += 1
            counter.write_text(str(n))

    threading.Thread(target=recover, daemon=True).start()
    policy = IdlePolicy(quiet=args["quiet"], interval=args["interval"], give_up=args["give_up"])
    return work_until_idle(counter.read_text, policy)


class ClosingToy(ToyAdapter):
    """The toy, with the optional ``close()`` hook: it appends a line to
    ``marker`` each time it is called."""

    def __init__(self, keyed: str = "true", marker: str = "") -> None:
        super().__init__(keyed)
        self.marker = marker

    def close(self) -> None:
        with open(self.marker, "a") as f:
            f.write("closed\n")


class _ObserveBreaks(ToyEnvironment):
    def observe(self) -> Observation:
        raise ZeroDivisionError("observe is broken")


class BrokenClosingToy(ClosingToy):
    """Its observe() raises, and so does its close()."""

    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return _ObserveBreaks(workdir, self.keyed)

    def close(self) -> None:
        super().close()
        raise OSError("the server would not stop")


def built_here() -> str:
    """A factory for ``WorkerSet(prebuild=...)``: says which process built it."""
    return f"built by {os.getpid()}"


def write_prebuilt(args: dict[str, Any]) -> None:
    """Write ``kit.prebuilt`` of :func:`built_here`, and this worker's pid, to ``args["out"]``."""
    from harness.adapters.kit import prebuilt

    text = prebuilt("kit_support:built_here")
    Path(args["out"]).write_text(json.dumps({"text": text, "pid": os.getpid()}))
