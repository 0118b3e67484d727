"""A LangGraph application behind the adapter contract.

Each environment has its own checkpointer storage (a ``SqliteSaver`` file,
or a ``PostgresSaver`` schema on a running Postgres) -- and, for an app that
asks for one, a long-term store beside it -- its own run registry and its own
world. Workers are real processes forked from a fork server
preloaded with LangGraph and the application (see ``_worker``).

What LangGraph cannot offer is declared, not faked: no crash points on
SQLite (the harness kills workers at the world's effect boundaries instead;
on ``PostgresSaver`` the adapter's workers pass named sites inside its
checkpoint writes, see ``_points``, and name the connection they write on:
the ``crash_points`` and ``network_faults`` capabilities), no clock,
no memory injection, no model contexts, no signed approvals (decisions go in
through ``Command(resume=...)``, unsigned). Version switching is offered when
the application builds more than one code version; concurrent workers always
(LangGraph lets any number of processes resume one thread).

Observation normalizes ``get_state()``: a run is finished only when the
application's completion marker says so (``next=()`` alone is reported as a
run with nothing to resume, never as completed), and the checkpoint history
of each thread becomes transitions whose ``from``/``to`` name checkpoints and
whose ``state_version`` is the checkpoint's step, so two children of one
parent checkpoint -- two writers on one thread -- show as a fork.

This module holds the adapter (its options, what it preloads);
``_environment`` one environment.
"""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path
from typing import Any

from .._contract import Capability, WorkflowSpec
from ._app import DURABILITIES
from ._environment import STORE_KEY, LangGraphEnvironment
from ._store import Backend
from ._worker import load_app

__all__ = ["STORE_KEY", "LangGraphAdapter", "LangGraphEnvironment"]


class LangGraphAdapter:
    """A LangGraph application (``app="package.module:attr"``, a :class:`LangGraphApp`).

    Options: ``checkpointer`` ``sqlite`` (a file per environment) or
    ``postgres`` (a schema per environment on ``postgres_url``, default
    ``$HARNESS_POSTGRES_URL``); ``durability`` ``sync``/``async``/``exit``
    (default: the application's); ``thread_prefix`` before each run id to
    make the thread id; ``network_timeout`` (Postgres, default 5 s) after
    which the workers' connections give up on a server that stopped
    answering (``tcp_user_timeout`` and keepalives; 0: none, as
    ``PostgresSaver.from_conn_string`` opens it).

    On ``postgres`` it declares ``crash_points`` (sites in PostgresSaver's
    writes) and, with a ``network_timeout``, ``network_faults``; then its
    workers are routed (``routes_workers``): on the Toxiproxy backend each
    reaches Postgres through a proxy of its own.
    """

    name = "langgraph"

    def __init__(
        self,
        app: str,
        checkpointer: str = "sqlite",
        durability: str | None = None,
        postgres_url: str | None = None,
        thread_prefix: str = "",
        network_timeout: float | str = 5.0,
    ) -> None:
        self.app_spec = app
        self.app = load_app(app)
        if checkpointer not in ("sqlite", "postgres"):
            raise ValueError(f"checkpointer={checkpointer!r}: choose sqlite or postgres")
        self.checkpointer: Backend = "sqlite" if checkpointer == "sqlite" else "postgres"
        if durability in ("", None):
            durability = None
        elif durability not in DURABILITIES:
            raise ValueError(f"durability={durability!r}: choose one of {', '.join(DURABILITIES)}")
        self.durability = durability
        self.postgres_url = postgres_url or os.environ.get("HARNESS_POSTGRES_URL")
        if self.checkpointer == "postgres" and not self.postgres_url:
            raise ValueError(
                "checkpointer=postgres needs a server: pass postgres_url=... or set "
                "HARNESS_POSTGRES_URL (e.g. postgresql://postgres@127.0.0.1:5432/test)"
            )
        self.thread_prefix = thread_prefix
        try:
            self.network_timeout = float(network_timeout)
        except ValueError:
            self.network_timeout = -1.0
        if not self.network_timeout >= 0:  # NaN too
            raise ValueError(
                f"network_timeout={network_timeout!r}: give seconds >= 0 (e.g. 5; 0 for none, "
                "as PostgresSaver.from_conn_string opens its connection)"
            )
        caps = {Capability.CONCURRENT_WORKERS, Capability.DURABLE_STATE}
        if self.checkpointer == "postgres":
            # Sites in PostgresSaver's writes, and the connection each is on.
            caps.add(Capability.CRASH_POINTS)
            if self.network_timeout > 0:
                # Without a timeout a worker whose commit reply was lost
                # blocks for the kernel's retransmission timeout (15 min):
                # nothing the harness could judge, so not offered.
                caps.add(Capability.NETWORK_FAULTS)
        if len(self.app.versions) > 1:
            caps.add(Capability.VERSION_SWITCH)
        self.capabilities: frozenset[Capability] = frozenset(caps)
        #: with the network faults, each worker's Postgres connections go
        #: through a proxy of its own on the Toxiproxy backend (the kit's
        #: ``WorkerSet`` routing): a reply held back, fragmented or cut, and
        #: a COMMIT lost on its way, reach it too
        self.routes_workers = Capability.NETWORK_FAULTS in caps

    def network_services(self) -> dict[str, str]:
        """The server the checkpointer's connections go to (optional in the
        contract: whether the kernel backend can reach them, see
        ``offered_network_kinds``)."""
        if self.checkpointer == "postgres" and self.postgres_url:
            return {"postgres": self.postgres_url}
        return {}

    def preload(self) -> tuple[str, ...]:
        """Modules the fork server imports once, so a worker costs a fork."""
        extra: tuple[str, ...] = (
            ("psycopg", "langgraph.checkpoint.postgres") if self.checkpointer == "postgres" else ()
        )
        first: tuple[str, ...] = ()
        if self.app.store:
            # before anything imports numpy (see _blas)
            first = ("harness.adapters.langgraph._blas",)
            extra += (f"langgraph.store.{self.checkpointer}",)
        return (
            *first,
            "pydantic",
            "sqlite3",
            "langgraph.graph",
            "langgraph.types",
            "langgraph.checkpoint.sqlite",
            "langgraph.checkpoint.memory",
            # imported by the first invoke of every worker otherwise
            "langchain_core.tracers.context",
            "langchain_core.tracers.run_collector",
            "langchain_core.tracers.stdout",
            *extra,
            "harness.adapters.langgraph._worker",
            self.app_spec.partition(":")[0],
        )

    def workflows(self) -> list[WorkflowSpec]:
        return list(self.app.workflows)

    def open(self, workdir: Path, *, seed: int) -> LangGraphEnvironment:
        return LangGraphEnvironment(self, workdir)

    def describe(self) -> dict[str, Any]:
        return {
            "app": self.app_spec,
            "checkpointer": self.checkpointer,
            "durability": self.durability or f"{self.app.durability} (app default)",
            "thread_prefix": self.thread_prefix,
            **(
                {"network_timeout": self.network_timeout} if self.checkpointer == "postgres" else {}
            ),
            **({"store": self.checkpointer} if self.app.store else {}),
            "langgraph": metadata.version("langgraph"),
        }
