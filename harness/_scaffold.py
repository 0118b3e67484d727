"""``harness init``: the files that point the harness at your runtime.

In the way of Hypothesis's ghostwriter: it writes a start, runnable as
written, and says what to fill in. Three files, never over one of yours:

- an adapter module (``harness_adapter.py``) for the runtime's shape:
  ``queue`` -- a job queue with leases, on the kit, with the four calls
  into your queue marked *fill in* (until they are, ``check-adapter``
  says which one to write); ``langgraph``, ``dbos``, ``temporal`` -- the
  built-in adapter of that framework, given your app (``--app
  module:attr``);
- ``tests/test_resilience.py``: one pytest test per property;
- ``.github/workflows/resilience.yml``: docs/ci.md's single job.

Files are created exclusively (``O_EXCL``, never through a link): if any
exists, nothing is written and the command exits 2 naming it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ._errors import UsageError

SHAPES = ("queue", "langgraph", "dbos", "temporal")

#: built-in framework adapters, and the extra each needs
FRAMEWORKS = {
    "langgraph": ("harness.adapters.langgraph:LangGraphAdapter", "langgraph"),
    "dbos": ("harness.adapters.dbos:DBOSAdapter", "dbos"),
    "temporal": ("harness.adapters.temporal:TemporalAdapter", "temporal"),
}

QUEUE_ADAPTER = '''\
"""The harness's adapter for our job queue (written by ``harness init``).

A queue with leases recovers by time: a job whose worker died is claimed
again when its lease expires. The adapter gives the runtime a clock the
harness moves (``FileClock``) and reports a leased job as ``RUNNING`` with
``wake_at`` = its lease expiry, so the harness moves time on and the repeat
the lease hides is made -- and judged.

Fill in the four functions under "Your runtime" (``check-adapter`` names
the next one to write), then:

    PYTHONPATH=. harness check-adapter harness_adapter:QueueAdapter
    PYTHONPATH=. harness run --adapter harness_adapter:QueueAdapter --profile ci

Your job's side effects must go through ``world`` (a ``WorldClient``): it
is where the harness counts effects and injects the services' faults.
Give each call ``Caller(run_id=job id, ...)`` and, if your provider takes
one, an idempotency key: the harness judges what your code sends.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.adapters import (
    BaseEnvironment,
    Capability,
    Declarations,
    ForkServerWorker,
    Observation,
    RunView,
    WorkflowSpec,
)
from harness.adapters.kit import EPOCH, FileClock, RunRegistry, WorkerSet
from harness.model import CrashSpec, RunSpec, RunState
from harness.world import World, WorldClient

# --- Your runtime: fill in these four functions ---------------------------

#: How long a worker's claim on a job lasts, in your queue's seconds.
LEASE_SECONDS = 30.0

#: Your job kinds: the effect each performs (``harness list services``
#: names them) and an example payload.
JOBS: dict[str, tuple[str, dict[str, Any]]] = {
    "charge": ("payments.charge", {"customer_id": "c-1", "amount_cents": 500}),
}

#: What each effect promises: ``exactly_once`` needs an idempotency key or
#: a lookup the service offers (``check-adapter`` refuses it otherwise: an
#: email takes neither, so ``at_least_once`` is its honest promise).
DELIVERY = {"payments.charge": "exactly_once"}

#: Your job statuses, as the harness knows them, and the legal moves.
STATES = {"pending": RunState.PENDING, "running": RunState.RUNNING, "done": RunState.COMPLETED}
TRANSITIONS = {
    "pending": ["running", "done"],
    "running": ["running", "pending", "done"],
    "done": [],
}


def open_queue(path: str) -> Any:
    """Open (creating it if missing) your queue's store at ``path``: one
    deployment's own database file. Called in the harness and in workers."""
    raise NotImplementedError("fill in harness_adapter.open_queue: open your queue's store")


def submit_job(queue: Any, job_id: str, tenant: str, kind: str, payload: dict[str, Any]) -> None:
    """Enqueue one job, as your application does."""
    raise NotImplementedError("fill in harness_adapter.submit_job: enqueue one job")


def list_jobs(queue: Any) -> list[dict[str, Any]]:
    """Every job, as dicts with ``id``, ``tenant``, ``status`` (a key of
    STATES), ``result`` (a dict or None) and ``lease_until`` (a time on
    the clock your workers were given, or None)."""
    raise NotImplementedError("fill in harness_adapter.list_jobs: list every job")


def run_worker(
    queue: Any, world: WorldClient, now: Callable[[], float], worker_id: str
) -> None:
    """One worker: run every job it can claim at ``now()``, then return.
    Your handlers call their services through ``world``."""
    raise NotImplementedError("fill in harness_adapter.run_worker: run your worker loop")


# --- The adapter: nothing to change below ----------------------------------


def worker_main(args: dict[str, Any]) -> int:
    """A worker process (forked by the harness, SIGKILLed at will)."""
    clock = FileClock(args["clock"])
    world = WorldClient(args["world"], clock=clock.now)
    run_worker(open_queue(args["queue"]), world, clock.now, args["worker_id"])
    return 0


class QueueEnvironment(BaseEnvironment):
    """One deployment: the queue's store, a world, a clock, the workers."""

    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.clock = FileClock(workdir / "clock", start=EPOCH)
        self.world = World(workdir / "world.db", clock=self.clock.now).create()
        self.args = {
            "queue": str(workdir / "queue.db"),
            "world": self.world.path,
            "clock": str(workdir / "clock"),
        }
        self.queue = open_queue(self.args["queue"])
        self.workers = WorkerSet(workdir, [__name__])  # output in workdir/workers.log
        self.registry = RunRegistry(workdir / "registry.db", clock=self.clock.now)

    def declarations(self) -> Declarations:
        return Declarations(delivery=dict(DELIVERY), transitions=TRANSITIONS)

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        args = {**self.args, "worker_id": worker_id}
        return self.workers.spawn(worker_id, f"{__name__}:worker_main", args)

    def submit(self, run: RunSpec) -> None:
        submit_job(self.queue, run.run_id, run.tenant, run.workflow, run.input)

    def observe(self) -> Observation:
        views = []
        for job in list_jobs(self.queue):
            state = STATES[job["status"]]
            views.append(
                RunView(
                    run_id=job["id"],
                    tenant=job["tenant"],
                    state=state,
                    raw_status=job["status"],
                    output=job.get("result"),
                    # a leased job wakes when its lease expires: say when
                    wake_at=job.get("lease_until") if state is RunState.RUNNING else None,
                )
            )
        return self.registry.observation(views)

    def now(self) -> float:
        return self.clock.now()

    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def close(self) -> None:
        self.workers.close()
        self.registry.close()
        close = getattr(self.queue, "close", None)
        if callable(close):
            close()
        self.world.close()


class QueueAdapter:
    """Our job queue, for the harness."""

    name = "queue"
    lease_seconds = LEASE_SECONDS
    capabilities = frozenset({Capability.CLOCK})

    def workflows(self) -> list[WorkflowSpec]:
        return [
            WorkflowSpec(name=kind, inputs=(payload,), effects=(effect,))
            for kind, (effect, payload) in JOBS.items()
        ]

    def open(self, workdir: Path, *, seed: int) -> QueueEnvironment:
        return QueueEnvironment(workdir)

    def describe(self) -> dict[str, Any]:
        return {}  # the options this adapter was given: none
'''

FRAMEWORK_ADAPTER = '''\
"""The harness's adapter for our {shape} app (written by ``harness init``).

The built-in {shape} adapter drives the app named below; its options
(``harness list adapters``, docs/adapters.md) go in OPTIONS.

    pip install 'stateful-agent-harness[{extra}]'
    PYTHONPATH=. harness check-adapter harness_adapter:Adapter
    PYTHONPATH=. harness run --adapter harness_adapter:Adapter --profile ci
"""

from __future__ import annotations

from typing import Any

from {module} import {cls}

OPTIONS: dict[str, Any] = {{"app": {app!r}}}


class Adapter({cls}):
    """{cls} on our app."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**{{**OPTIONS, **options}})
'''

SUITE = '''\
"""The harness's resilience suite: one test per property (``harness init``).

    pytest tests/test_resilience.py --harness-profile ci
"""

from harness.testing import resilience_suite

TestResilience = resilience_suite("{spec}")
'''

WORKFLOW = """\
name: resilience
on: [push, pull_request]
jobs:
  harness:
    runs-on: ubuntu-latest
    env:
      HARNESS_PACKAGE: "stateful-agent-harness @ git+https://github.com/YOUR-ORG/stateful-agent-harness"
      HARNESS_EXAMPLE_DB: ${{ secrets.HARNESS_EXAMPLE_DB }}  # optional: redis://host:6379/0
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with: { python-version: "3.11" }
      - name: install
        run: pip install "$HARNESS_PACKAGE" && pip install -e .
      - name: check the adapter (a fault-free run of each workflow)
        run: PYTHONPATH=. harness check-adapter myproject.adapter:MyAdapter
      - name: search (exit 1 a property failed, 3 inconclusive)
        run: |
          PYTHONPATH=. harness run --adapter myproject.adapter:MyAdapter --profile ci \\
            --report-dir harness-report ${HARNESS_EXAMPLE_DB:+--example-db "$HARNESS_EXAMPLE_DB"}
      - uses: actions/upload-artifact@v4
        if: always()
        with: { name: harness-report, path: harness-report, include-hidden-files: true }
"""

_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def files_for(shape: str, app: str | None) -> dict[str, str]:
    """The files ``harness init`` writes for ``shape``, by path."""
    if shape not in SHAPES:
        raise UsageError(f"unknown shape {shape!r}; choose one of {', '.join(SHAPES)}")
    if shape == "queue":
        if app is not None:
            raise UsageError("--app is for a framework shape (langgraph, dbos, temporal)")
        adapter, spec = QUEUE_ADAPTER, "harness_adapter:QueueAdapter"
    else:
        if app is None or not _SPEC.match(app):
            raise UsageError(
                f"--shape {shape} needs --app module:attr, the {shape} app the adapter drives "
                f"(e.g. --app myproject.graph:APP); got {app!r}"
            )
        module, cls = FRAMEWORKS[shape][0].split(":")
        adapter = FRAMEWORK_ADAPTER.format(
            shape=shape, extra=FRAMEWORKS[shape][1], module=module, cls=cls, app=app
        )
        spec = "harness_adapter:Adapter"
    return {
        "harness_adapter.py": adapter,
        "tests/test_resilience.py": SUITE.format(spec=spec),
        ".github/workflows/resilience.yml": WORKFLOW.replace("myproject.adapter:MyAdapter", spec),
    }


def write_scaffold(root: Path, shape: str, app: str | None = None) -> list[Path]:
    """Write :func:`files_for` under ``root``; refuses (UsageError) before
    writing anything when one of them exists, and never follows a link."""
    files = files_for(shape, app)
    taken = [p for p in files if os.path.lexists(root / p)]
    if taken:
        raise UsageError(
            f"{', '.join(str(root / p) for p in taken)} already exist(s): harness init never "
            "overwrites a file; move it aside, or run it in another folder"
        )
    written: list[Path] = []
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        written.append(path)
    return written
