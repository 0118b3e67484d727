"""How a deployment's workers start: the reference runtime's worker target,
the fork server's preloads, and the spawners."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, Protocol

from ...procs import ForkServer
from .._workers import shared_fork_server

#: Where virtual time starts; any fixed value keeps histories reproducible.
EPOCH = 1_700_000_000.0
WORKER_TARGET = "reference_runtime._worker:main"
#: the most runs one worker claims in its life. A scenario's worker claims
#: a few dozen times at most (a ci run's longest history holds 14 step
#: contexts); one that claims 200 is claiming the same run again and again
#: (a commit refused for ever), and exits so that the quiesce judges the
#: run by what it did, instead of recording thousands of identical
#: contexts or, on Postgres, outliving the worker timeout. A long but
#: moving workload loses nothing: the quiesce starts another worker
MAX_CLAIMS = 200

#: Imported once in the fork server, so a worker pays a fork, not imports.
#: Importing opens no connection and starts no thread.
PRELOAD = (
    "pydantic",
    "sqlite3",
    "reference_runtime",
    "reference_runtime._worker",
    "reference_runtime.store.sqlite",
    "reference_runtime.store.redis_queue",
    "harness.adapters.reference._services",
    # last: warms what every worker serializes (see the module)
    "harness.adapters.reference._warm",
)
#: What only some deployments' workers use: preloaded (when installed) in the
#: fork server of the deployments that use them, and only there. A worker
#: forked from a smaller server copies fewer pages of it (measured with
#: benchmarks/kill_resume.py: about a tenth less CPU per SQLite worker than
#: with the Postgres driver and the Redis client in its server).
OPTIONAL_PRELOAD = (
    (
        "postgres",
        "psycopg",
        # the codec every host name is resolved with (see _warm_drivers)
        ("psycopg", "psycopg_pool", "reference_runtime.store.postgres", "encodings.idna"),
    ),
    ("redis", "redis", ("redis", "harness.adapters.reference._warm_drivers")),
)


def _preload(backend: str = "sqlite", queue: str = "store") -> tuple[str, ...]:
    """The fork server's preloads for workers of ``backend`` and ``queue``."""
    uses = {backend, queue}
    extra = tuple(
        module
        for use, probe, modules in OPTIONAL_PRELOAD
        if use in uses and importlib.util.find_spec(probe) is not None
        for module in modules
    )
    return PRELOAD + extra


def fork_server(
    extra: tuple[str, ...] = (), *, backend: str = "sqlite", queue: str = "store"
) -> ForkServer:
    """The started fork server for the workers of ``backend`` and ``queue``
    (shared by the process with every deployment of that kind)."""
    return shared_fork_server(_preload(backend, queue) + extra)


@dataclass(frozen=True)
class Exit:
    """How a worker process ended: ``code`` for an exit, ``signal`` for a kill."""

    code: int | None
    signal: int | None

    @property
    def killed(self) -> bool:
        return self.signal is not None


class Spawner(Protocol):
    def run(self, args: dict[str, Any], env: dict[str, str], timeout: float) -> Exit:
        """Run ``reference_runtime._worker.main(args)`` in a new process to its end."""
        ...


class ForkServerSpawner:
    """Workers forked from the harness's preloading fork server (the default):
    a worker costs a fork, not an interpreter start."""

    def __init__(self, backend: str = "sqlite", queue: str = "store") -> None:
        self.backend, self.queue = backend, queue

    def run(self, args: dict[str, Any], env: dict[str, str], timeout: float) -> Exit:
        # As with a fresh interpreter: the process environment first, then the
        # worker's own overrides from args["env"].
        merged = {**env, **(args.get("env") or {})}
        server = fork_server(backend=self.backend, queue=self.queue)
        worker = server.spawn(WORKER_TARGET, args={**args, "env": merged}, env=env)
        got = worker.wait(timeout)
        return Exit(got.code, got.signal)
