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
- ``.github/workflows/resilience.yml``: docs/ci.md's single job, but
  installing the harness from where this one came from
  (:func:`harness_source`), and the project's ``requirements.txt`` or
  package only if it has one.

Files are created exclusively (``O_EXCL``, never through a link): if any
exists, nothing is written and the command exits 2 naming it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

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

A variant of your runtime (a fix behind a switch, say) is an option: name
it in OPTIONS, then ``--adapter-opt safe=1``; the report records it and
``harness replay`` runs the same variant.

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

#: Your job kinds: the effects each performs, in order (``harness list
#: services`` names them), and an example payload. A job of several steps
#: names each: ``(("payments.charge", "email.send"), {...})``.
JOBS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "charge": (("payments.charge",), {"customer_id": "c-1", "amount_cents": 500}),
}

#: What each effect kind of JOBS promises, one entry per kind:
#: ``exactly_once`` needs an idempotency key or a lookup the service offers
#: (``check-adapter`` refuses it otherwise: an email takes neither, so
#: ``at_least_once`` is its honest promise).
DELIVERY = {"payments.charge": "exactly_once"}

#: The adapter's options and their defaults, as strings: a variant of your
#: runtime to test, e.g. ``{"safe": "0"}``, then ``--adapter-opt safe=1``
#: (in pytest: ``resilience_suite(..., safe="1")``). The calls below get
#: them as ``options``; an option not named here is refused.
OPTIONS: dict[str, str] = {}

#: Your job statuses, as the harness knows them, and the legal moves.
STATES = {"pending": RunState.PENDING, "running": RunState.RUNNING, "done": RunState.COMPLETED}
TRANSITIONS = {
    "pending": ["running", "done"],
    "running": ["running", "pending", "done"],
    "done": [],
}


def open_queue(path: str, options: dict[str, str]) -> Any:
    """Open (creating it if missing) your queue's store at ``path``: one
    deployment's own database file. Called in the harness and in workers,
    with the adapter's ``options`` (OPTIONS, as this run set them)."""
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
    queue: Any,
    world: WorldClient,
    now: Callable[[], float],
    worker_id: str,
    options: dict[str, str],
) -> None:
    """One worker: run every job it can claim at ``now()``, then return.
    Your handlers call their services through ``world``. A variant reads
    its option here, e.g. ``keyed = options["safe"] == "1"``: send the job's
    id as the charge's idempotency key only in the safe variant."""
    raise NotImplementedError("fill in harness_adapter.run_worker: run your worker loop")


# --- The adapter: nothing to change below ----------------------------------


def _effects(kinds: str | tuple[str, ...]) -> tuple[str, ...]:
    # ("payments.charge") is a string, not a 1-tuple: one effect, not letters
    return (kinds,) if isinstance(kinds, str) else tuple(kinds)


def worker_main(args: dict[str, Any]) -> int:
    """A worker process (forked by the harness, SIGKILLed at will)."""
    clock = FileClock(args["clock"])
    world = WorldClient(args["world"], clock=clock.now)
    # another process: the adapter's options reach it in its arguments
    options: dict[str, str] = args["options"]
    queue = open_queue(args["queue"], options)
    run_worker(queue, world, clock.now, args["worker_id"], options)
    return 0


class QueueEnvironment(BaseEnvironment):
    """One deployment: the queue's store, a world, a clock, the workers."""

    def __init__(self, workdir: Path, options: dict[str, str]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.clock = FileClock(workdir / "clock", start=EPOCH)
        self.world = World(workdir / "world.db", clock=self.clock.now).create()
        self.args = {
            "queue": str(workdir / "queue.db"),
            "world": self.world.path,
            "clock": str(workdir / "clock"),
            "options": dict(options),
        }
        self.queue = open_queue(str(workdir / "queue.db"), options)
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
    """Our job queue, for the harness (its options: OPTIONS)."""

    name = "queue"
    lease_seconds = LEASE_SECONDS
    capabilities = frozenset({Capability.CLOCK})

    def __init__(self, **options: str) -> None:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError(
                f"{__name__}.OPTIONS names no option {', '.join(map(repr, unknown))} (it has "
                f"{', '.join(map(repr, OPTIONS)) or 'none'}): add yours there, with its default"
            )
        self.options = {**OPTIONS, **{k: str(v) for k, v in options.items()}}

    def workflows(self) -> list[WorkflowSpec]:
        return [
            WorkflowSpec(name=kind, inputs=(payload,), effects=_effects(effects))
            for kind, (effects, payload) in JOBS.items()
        ]

    def open(self, workdir: Path, *, seed: int) -> QueueEnvironment:
        return QueueEnvironment(workdir, self.options)

    def describe(self) -> dict[str, Any]:
        # every option, defaults too: the report names the variant it ran
        return dict(self.options)
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

    pytest --harness-profile ci

runs the ci profile, as the workflow does; plain ``pytest`` runs the dev
profile (a quick look) unless $CI is set. ``--adapter-opt KEY=VALUE`` is
a keyword here: ``resilience_suite("{spec}", KEY="VALUE")``.
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
      HARNESS_PACKAGE: @PACKAGE@  # @PACKAGE_NOTE@
      HARNESS_EXAMPLE_DB: ${{ secrets.HARNESS_EXAMPLE_DB }}  # optional: redis://host:6379/0
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with: { python-version: "3.11" }
      - name: install (the harness, then your requirements.txt or project if there is one)
        run: |
          pip install "${HARNESS_PACKAGE:?set HARNESS_PACKAGE above: see docs/ci.md}"
          if [ -f requirements.txt ]; then pip install -r requirements.txt; fi
          if [ -f pyproject.toml ] || [ -f setup.py ]; then pip install -e .; fi
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

#: what CI may install the harness from, when ``harness init`` cannot tell
_NO_SOURCE = "a git URL (stateful-agent-harness @ git+https://...@COMMIT) or a vendored copy's path"


def harness_source() -> str | None:
    """Where CI can install this harness from, as a pip requirement: the
    git URL and commit pip recorded when it was installed from one (PEP
    610's ``direct_url.json``), else the origin and commit of the git
    checkout it runs from; None when neither tells (a local folder or
    wheel with no remote): the workflow then asks for it."""
    try:
        recorded = distribution("stateful-agent-harness").read_text("direct_url.json")
    except PackageNotFoundError:
        recorded = None
    found = _from_direct_url(recorded) if recorded else None
    return found or _from_checkout(Path(__file__).resolve().parents[1])


def _from_direct_url(text: str) -> str | None:
    try:
        record = json.loads(text)
        url, vcs = record["url"], record.get("vcs_info")
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(url, str) or url.startswith("file:"):
        return None  # a folder or file on this machine: CI has neither
    if isinstance(vcs, dict) and vcs.get("vcs") == "git" and vcs.get("commit_id"):
        return f"stateful-agent-harness @ git+{_public(url)}@{vcs['commit_id']}"
    return f"stateful-agent-harness @ {_public(url)}" if "archive_info" in record else None


def _from_checkout(root: Path) -> str | None:
    if not (root / ".git").exists():
        return None
    # only this checkout's own answer: no GIT_DIR or the like from the caller
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}

    def git(*words: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "-C", str(root), *words],
                env=env,
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        out = proc.stdout.strip()
        return out if proc.returncode == 0 and out else None

    url, commit = git("remote", "get-url", "origin"), git("rev-parse", "HEAD")
    if url is None or commit is None:
        return None
    # CI has no key for an SSH remote: the same repository over HTTPS
    scp = re.fullmatch(r"[\w.-]+@([\w.-]+):(.+)", url)
    if scp:
        url = f"https://{scp.group(1)}/{scp.group(2)}"
    elif url.startswith("ssh://"):
        url = "https://" + url.removeprefix("ssh://").split("@", 1)[-1]
    if not url.startswith(("https://", "http://")):
        return None  # a path on this machine
    return f"stateful-agent-harness @ git+{_public(url)}@{commit}"


def _public(url: str) -> str:
    # a token in a remote's URL (https://user:token@host/...) must not land
    # in a workflow file the user commits
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http"):
        return url  # ssh://git@host/...: the user is the account, not a secret
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def workflow_for(spec: str, package: str | None) -> str:
    """docs/ci.md's single job for adapter ``spec``, installing the harness
    from ``package`` (a pip requirement; None: the workflow asks for it)."""
    if package is None:
        value, note = "", f"set it to where CI installs the harness from: {_NO_SOURCE}"
    else:
        value, note = package, "where CI installs the harness from: the one harness init ran"
    return (
        WORKFLOW.replace("myproject.adapter:MyAdapter", spec)
        .replace("@PACKAGE@", json.dumps(value))  # a YAML double-quoted string too
        .replace("@PACKAGE_NOTE@", note)
    )


def next_steps(shape: str) -> list[str]:
    """What ``harness init`` prints after writing the files for ``shape``."""
    spec = "harness_adapter:QueueAdapter" if shape == "queue" else "harness_adapter:Adapter"
    lines = [
        "next: fill in what harness_adapter.py marks, then "
        f"`PYTHONPATH=. harness check-adapter {spec}` and "
        f"`PYTHONPATH=. harness run --adapter {spec} --profile ci`"
    ]
    if harness_source() is None:
        lines.append(
            "set HARNESS_PACKAGE in .github/workflows/resilience.yml to where CI installs the "
            f"harness from ({_NO_SOURCE}): this one came from no git remote CI could use"
        )
    return lines


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
        ".github/workflows/resilience.yml": workflow_for(spec, harness_source()),
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
