"""What a LangGraph application tells the adapter, and what its nodes get back.

An application is a :class:`LangGraphApp`: a graph factory (one compiled
graph per code version, built on the checkpointer the adapter opens), the
workflows it runs, what it promises per effect kind, and two conventions the
adapter reads from the graph's state:

* a **completion marker**: ``state[outcome_key]`` is set by the graph's last
  node to ``{"status": "completed" | "failed" | "cancelled", "output": {...},
  "error": str | None}``. LangGraph's ``get_state().next == ()`` does not mean
  finished (an ``async`` crash can leave it empty before the work is done), so
  the adapter never infers "completed" from it.
* an **approval wait** is an ``interrupt()`` whose value is ``{"action":
  "service.action", "params": {...}, "role": str}``; the decision comes back
  through ``Command(resume={"decision", "approver", "role", "approval_id"})``,
  and the node records what it decided in ``state[approvals_key]`` (a list of
  ``{"approval_id", "action", "params", "decision", "approver", "role"}``).

An application may also use LangGraph's long-term ``Store`` (``store=True``):
the adapter then opens one beside the checkpointer -- a ``SqliteStore`` file
of the environment, or a ``PostgresStore`` in the checkpointer's schema --
and passes it as ``build(checkpointer, code_version, store=store)`` (apps
without a store keep the two-argument ``build``). What the store holds under
``store_namespace(tenant, input)`` (every item, without it) is part of each
run's durable state, so a memory written twice by a repeated node shows.

Nodes reach the outside world only through the harness's world, with the
:class:`WorkerContext` the adapter puts into the run's config::

    def refund(state: State, config: RunnableConfig) -> dict[str, Any]:
        ctx = worker_context(config)
        ctx.world.call("payments", "refund", request, idempotency_key=key,
                       caller=ctx.caller("refund"))

This module imports nothing from LangGraph: it is safe without the extra.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ...world import Caller, WorldClient
from .._contract import WorkflowSpec

Durability = Literal["sync", "async", "exit"]
DURABILITIES: tuple[Durability, ...] = ("sync", "async", "exit")

#: Key of the :class:`WorkerContext` in ``config["configurable"]``.
CONTEXT_KEY = "harness"


@dataclass(frozen=True)
class GuardSite:
    """Where a single-writer guard can take its lock for one thread.

    ``backend`` is ``sqlite`` (then ``lock_dir`` is a folder private to the
    environment, for lock files) or ``postgres`` (then ``postgres_url`` and
    ``schema`` name the checkpointer's database and schema).
    """

    thread_id: str
    backend: Literal["sqlite", "postgres"]
    lock_dir: Path
    postgres_url: str | None = None
    schema: str | None = None


#: A single-writer guard: a context manager that yields True when this
#: process may resume the thread (and holds that right until it exits), False
#: when another writer has it.
Guard = Callable[[GuardSite], AbstractContextManager[bool]]


@contextlib.contextmanager
def no_guard(site: GuardSite) -> Iterator[bool]:
    """What LangGraph itself does: let every resumer in."""
    yield True


def _same(payload: Mapping[str, Any], code_version: int) -> dict[str, Any]:
    return dict(payload)


@dataclass(frozen=True)
class LangGraphApp:
    """A LangGraph application, as the adapter runs it.

    ``build(checkpointer, code_version)`` returns the compiled graph of that
    code version (``versions`` lists them, the highest is current);
    ``start_input(run_input, code_version)`` turns a run's input (always in
    the current schema) into the graph's input for that version.
    ``durability`` is the default of ``invoke(durability=...)``; ``guard`` is
    held around every resume of a thread (default: none, as in LangGraph).
    ``store``: the graph uses a long-term ``Store``, which the adapter opens
    and passes as ``build(checkpointer, code_version, store=store)``;
    ``store_namespace(tenant, run_input)`` names the namespace prefix of the
    items a run writes, for its durable state (default: the whole store).

    ``compile_once``: ``build`` does nothing with its checkpointer and store
    but compile the graph on them. The adapter then compiles each code
    version once per process (in the fork server, before it forks) on an
    in-memory checkpointer and binds each worker's own with
    ``graph.copy(update={"checkpointer": ..., "store": ...})``, as a
    LangGraph server binds its checkpointer to an app's compiled graph: a
    worker skips the build (8-10 ms of CPU and 1,700 page faults in a
    forked worker, against 1 ms for the copy). Leave it False for a build
    that wraps, instruments or reads its checkpointer.
    """

    name: str
    build: Callable[..., Any]
    workflows: tuple[WorkflowSpec, ...]
    delivery: Mapping[str, str]
    needs_approval: Mapping[str, str] = field(default_factory=dict)
    versions: tuple[int, ...] = (1,)
    start_input: Callable[[Mapping[str, Any], int], dict[str, Any]] = _same
    durability: Durability = "async"
    guard: Guard = no_guard
    outcome_key: str = "outcome"
    approvals_key: str = "approvals"
    #: state keys (at any depth) that differ between two correct runs of one
    #: input: ids, times; ignored by ``state_equivalence``
    volatile: tuple[str, ...] = ()
    store: bool = False
    store_namespace: Callable[[str, Mapping[str, Any]], tuple[str, ...]] | None = None
    compile_once: bool = False

    @property
    def current_version(self) -> int:
        return max(self.versions)

    def make_graph(self, checkpointer: Any, code_version: int, store: Any = None) -> Any:
        """``build`` of ``code_version``, with the store when the app uses one."""
        if self.store:
            if store is None:
                raise ValueError(f"app {self.name!r} uses a store (store=True); none was opened")
            return self.build(checkpointer, code_version, store=store)
        return self.build(checkpointer, code_version)


@dataclass(frozen=True)
class WorkerContext:
    """What a node needs to act on the world for the run it works on."""

    world: WorldClient
    tenant: str
    run_id: str
    thread_id: str
    worker_id: str
    code_version: int

    def caller(self, op_id: str) -> Caller:
        """Who calls, for the world's records (run, operation, worker)."""
        return Caller(tenant=self.tenant, run_id=self.run_id, op_id=op_id, worker_id=self.worker_id)


def worker_context(config: Mapping[str, Any]) -> WorkerContext:
    """The :class:`WorkerContext` of a node's ``config``; raises a ``LookupError``
    that says how to fix it when the graph runs outside the adapter."""
    ctx = config.get("configurable", {}).get(CONTEXT_KEY)
    if not isinstance(ctx, WorkerContext):
        raise LookupError(
            "this node runs outside the harness's LangGraph adapter: no WorkerContext in "
            f"config['configurable'][{CONTEXT_KEY!r}]; run the graph through "
            "harness.adapters.langgraph.LangGraphAdapter (or put one there in your own tests)"
        )
    return ctx
