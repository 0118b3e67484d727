"""The optional hooks of an adapter and of its environments, by name, and the
check that an adapter's spelling of them is the harness's.

An optional hook is found by name: an adapter that spells one
``lease_second`` or ``rollsback`` would have it silently ignored, and the
search would run on defaults the author did not mean. :func:`check_hooks`
refuses, when the adapter loads (its environments when the first one opens),
a public attribute whose name is close to a hook the object does not define,
naming the hook it resembles; and a hook of the wrong kind (a flag that is
not ``True``/``False``, a number that is not one, a method that cannot be
called).

The hooks, and what each does (an environment without them still satisfies
the ``Environment`` protocol of :mod:`harness.adapters._contract`):

``storage_kinds() -> Sequence[str]``
    Which :data:`harness.adapters.STORAGE_KINDS` ``storage_fault()`` can
    inflict in this deployment (``pg_terminate`` needs Postgres,
    ``redis_client_kill`` Redis).
    Without it, an environment with the ``storage_faults`` capability is taken
    to offer every kind; a kind it cannot inflict then shows in the report as
    armed but never fired. See
    :func:`harness.adapters._contract.offered_storage_kinds`.

``cut_off(worker: WorkerHandle, cut: bool) -> None``
    The network faults say that ``worker`` is cut off from the runtime's
    server (``cut`` true: a ``partition_after_apply`` switched its proxies
    off, before another worker starts) and that it is back (false: the
    partition healed). A runtime whose server would time out what that
    worker holds at a deadline of real time may do it at once for the
    workers it starts meanwhile, as for a dead worker's (Temporal's
    activity attempts): the wait skipped, the outcome unchanged, since
    the worker cannot report before the heal.

``observation_cursor() -> Hashable``
    Cheap to read, and moves whenever what ``observe()`` would report
    changes (a commit counter of the store, the length of a log it
    reads). The harness then calls ``observe()`` again only when the cursor
    moved since the last call, and otherwise takes the last observation as
    it stood (nothing new in it). None: no cursor this time, observe.
    Without it, every observation reads everything.

``runnable() -> bool``
    Whether a worker started now could move anything: False promises that
    every run is finished, or waits for what only the harness gives (an
    approval, an operator's answer, a timer the harness moves), so a worker
    would start, find nothing and exit. The final quiesce then ends with
    the first round whose worker exited 0, with nothing delivered and no
    world fault fired, after which ``runnable()`` says False -- instead of
    starting one more worker to see that nothing moves (``Adapter.drains``
    is the same promise made once for every worker that exits 0) -- and a
    round that begins with ``runnable()`` False starts no worker. Read it
    from the same durable records a worker reads to pick its runs. Without
    it, a worker is started to see.

``memory_versions(tenant, namespace, key) -> int`` and
``memory_id(tenant, namespace, key, version) -> str``
    With ``memory_injection``: the highest version of the key the runtime
    has stored, live or not (0: none), and the id the runtime gives a
    version of a key. Planted records are then numbered past the stored
    ones and named as the runtime names its own, so a runtime that numbers
    a new version wrongly (past the live versions only, after the newest
    lapsed) meets a planted record at the same id, as it would meet its
    own. Without them, planted records are numbered from 1 and named
    ``planted:...``.

``crash_point_trace() -> Sequence[tuple[Any, str, int]]`` and a
``trace_crash_points`` attribute (environment)
    With ``trace_crash_points`` set True, the workers record every crash
    point they pass; ``crash_point_trace()`` returns them in order as
    ``(worker, site, hit)`` (``worker``: any id of the process, its pid
    say). The harness profiles each workflow with it once, fault-free, and
    aims its targeted schedules at what it saw (a kill after every commit,
    a zombie before every effect).

``network_endpoints(worker: WorkerHandle) -> Sequence[Endpoint]``
    With the ``network_faults`` capability: the TCP connections to its
    stores that ``worker``, stopped at a ``pause`` crash point, was using
    there, the one in use first (an empty list: none). The harness then
    drops or resets that one connection's packets (:mod:`harness._netfilter`)
    and lets the worker go on. An adapter whose workers cannot say it may
    read it from ``/proc``: :func:`harness.adapters.tcp_connections`.

``route_worker(env, worker_id, services) -> dict[str, str]`` (the harness's hook)
    With ``network_faults``: before it starts a worker, the environment asks
    the harness for the URLs that worker is to use for its stores
    (``services``: name -> URL, as ``network_services()`` names them) and
    starts the worker with those. On the Toxiproxy backend each comes back
    pointing at a proxy of that worker's own (every connection it opens,
    its pool's new ones too, passes it, and a fault on it touches that
    worker alone); otherwise the URLs come back as given. The environment
    calls ``release_routes(env)`` in ``close()``. Both are
    :mod:`harness.adapters` functions; without them the network faults
    fall back to the kernel backend.

``Adapter.network_services() -> Mapping[str, str]``
    With ``network_faults``: the servers the workers' connections go to,
    service name -> URL, the store their transactions use first. The
    kernel backend matches TCP ports: a service reached over a Unix socket
    (``postgresql:///db``) cannot be faulted, so the faults aimed at it are
    never armed and the report lists them as not tested, with why (see
    :func:`harness.adapters._netinfo.offered_network_kinds`). Without it,
    every kind is armed, and one that finds no TCP connection is reported
    as never fired, with that cause.

``operator_message(run_id, applied, external_ref, message_id) -> dict | None``
    With ``operations``: the message that tells a run stopped at
    ``needs_operator`` what an operator found -- whether the call in doubt
    was applied (the world's record of it) and the reference it got. The
    final quiesce delivers it with ``deliver()``; the run must then move
    on. None: the run waits for no answer now. See
    :mod:`harness.nemesis._operator`.

``Adapter.lease_seconds: float``
    How long a worker's claim on a run lasts (default 30): the clock
    family's jumps and the zombie family's pauses are sized to outlast it.

``Adapter.rolls_back: bool``
    With ``version_switch``: True promises that an older release's workers
    may meet runs this release already touched (a rollback, a rolling
    deploy whose old workers still serve), and must then park such a run
    loudly or finish it right. The migration family then also runs
    rollback orders (this release, the previous one, this one again).
    Default False: many deployments drain old workers before a migration
    and never roll back past one, and an app that fails a run its previous
    release cannot read breaks no promise it made; rollback orders are
    then not tested, and the plan says so.

``Adapter.keeps_definitions: bool``
    With ``version_switch``: True promises that a run finishes on the
    workflow definition it started on (the steps of the release that
    accepted it), however many releases resume it. The oracle of a run an
    older release accepted is then that run accepted by that release and
    finished by today's code with no fault (not the run today's code would
    have started), and ``migration_safety`` also holds the steps the run
    went through (its model contexts' steps) to the oracle's. Default
    False: the oracle is the run today's code would have started, and the
    steps are not compared (an app whose in-flight runs take the newest
    code's steps, behind a version gate or not, makes no such promise).

``Adapter.drains: bool``
    True promises that a worker which exits 0 has left nothing a worker
    started right after it could run now (it worked until nothing was
    claimable, or waited until its runtime was idle: ``kit.work_until_idle``).
    The final quiesce then ends with the first round whose worker exits 0
    with nothing delivered and no world fault fired, instead of starting one
    more worker to see that nothing moves. Default False: a worker that
    makes one pass over its runs and leaves one that raised for the next
    worker does not drain.

``Adapter.scenario_seconds: float``
    The real time one scenario takes, about (a runtime on real time: a
    server round trip, a 2 s activity timeout after every kill). The
    harness plans the budget with it: it says before the search how many
    planned scenarios fit in ``--budget`` (without it: measured from the
    fault-free runs, which no fault slows). See ``docs/architecture.md``,
    "Planning on real time".

``Adapter.fault_seconds: float``
    Without ``scenario_seconds``: the real seconds a scenario's faults wait
    that no fault-free run waits (a retry's interval, a timed-out attempt),
    added to the cost measured from the fault-free runs (which follows the
    machine's pace; this part does not).

``Adapter.worker_timeout: float``
    How long one of its workers may run before the harness kills it and
    calls it stuck (default 120 s; the ``worker_timeout`` setting,
    ``--worker-timeout``, overrides it): a runtime on real time declares
    what its slowest honest worker needs. See
    :func:`harness.nemesis.resolve_worker_timeout`.

``Adapter.migrated_input(workflow, input, code_version) -> dict``
    The input of a run that release ``code_version`` accepted, as today's
    code holds it after the upgrade: the oracle of a run carried across a
    release runs it (the ``version_switch`` capability).

``Adapter.setup() -> None`` and ``Adapter.close() -> None``
    The run-level lifecycle (:class:`harness.adapters.AdapterLifecycle`):
    start and release what a whole harness run shares (a server, a
    database, a connection pool), as opposed to one scenario's
    (``Adapter.open`` / ``Environment.close``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, Literal

from .._errors import AdapterLoadError

Kind = Literal["method", "flag", "seconds", "value"]

#: The adapter's optional hooks (docs/adapters.md says what each does).
ADAPTER_HOOKS: Mapping[str, Kind] = {
    "lease_seconds": "seconds",
    "worker_timeout": "seconds",
    "scenario_seconds": "seconds",
    "fault_seconds": "seconds",
    "drains": "flag",
    "rolls_back": "flag",
    "keeps_definitions": "flag",
    "routes_workers": "flag",
    "network_services": "value",
    "migrated_input": "method",
    "properties": "method",
    "seeded_bugs": "method",
    "setup": "method",
    "close": "method",
}

#: The adapter's required members (``harness.adapters.Adapter``).
ADAPTER_MEMBERS = frozenset({"name", "capabilities", "workflows", "open", "describe"})

#: The environment's optional hooks, besides the ``Environment`` protocol's
#: members (whose capability-bound methods are optional too).
ENVIRONMENT_HOOKS: Mapping[str, Kind] = {
    "crash_point_trace": "method",
    "observation_cursor": "method",
    "event_message": "method",
    "operator_message": "method",
    "network_endpoints": "method",
    "cut_off": "method",
    "storage_kinds": "method",
    "runnable": "method",
    "memory_versions": "method",
    "memory_id": "method",
    "trace_crash_points": "flag",
}

#: The ``Environment`` protocol's members (``harness.adapters.Environment``).
ENVIRONMENT_MEMBERS = frozenset(
    {
        "world",
        "declarations",
        "crash_points",
        "pause_points",
        "start_worker",
        "submit",
        "deliver",
        "approval_message",
        "observe",
        "now",
        "advance_clock",
        "inject_memory",
        "storage_fault",
        "cancel",
        "durable_state",
        "close",
    }
)

#: required members that are values, not methods
VALUE_MEMBERS = frozenset({"name", "capabilities", "world"})

#: How close a name must be to a hook's to be taken for a misspelling of it
#: (difflib's ratio: ``lease_second`` -> ``lease_seconds`` is 0.96,
#: ``rollsback`` -> ``rolls_back`` 0.95; ``close_all`` -> ``close`` 0.71)
CLOSE = 0.85


def _names(obj: Any) -> set[str]:
    """The public attribute names ``obj`` defines (its class's and its own)."""
    names = {n for n in dir(type(obj)) if not n.startswith("_")}
    names |= {n for n in getattr(obj, "__dict__", {}) if not n.startswith("_")}
    return names


def _kind_problem(value: Any, kind: Kind) -> str | None:
    if kind == "method" and not callable(value):
        return f"is {type(value).__name__}, not a method"
    if kind == "flag" and not isinstance(value, bool):
        return f"is {value!r}, not True or False (only True turns it on)"
    # a number (its range is checked where it is used, with its own fix)
    seconds = isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "seconds" and value is not None and not seconds:
        return f"is {value!r}, not a number of seconds"
    return None


def check_hooks(obj: Any, where: str, hooks: Mapping[str, Kind], members: frozenset[str]) -> None:
    """Raise :class:`AdapterLoadError` for each attribute of ``obj`` that
    looks like a misspelled hook, or a hook of the wrong kind."""
    kinds: dict[str, Kind] = {m: "method" for m in members if m not in VALUE_MEMBERS}
    kinds.update({m: "value" for m in members if m in VALUE_MEMBERS})
    kinds.update(hooks)
    names = _names(obj)
    problems: list[str] = []
    for name in sorted(names - set(kinds)):
        close = difflib.get_close_matches(name, sorted(kinds), n=1, cutoff=CLOSE)
        if not close or close[0] in names:
            continue
        try:
            value = getattr(obj, name)
        except Exception:
            continue
        # A misspelling is of the hook's own kind: a method named like a
        # flag (``drain()`` beside the ``drains`` promise) is the adapter's own.
        if _kind_problem(value, kinds[close[0]]) is None:
            problems.append(
                f"{name!r} is not a hook the harness knows; did you mean {close[0]!r}? "
                f"(as spelled, it is never called or read)"
            )
    for name, kind in hooks.items():
        if name not in names:
            continue
        try:
            value = getattr(obj, name)
        except Exception:  # a property that needs state the object has not yet
            continue
        problem = _kind_problem(value, kind)
        if problem is not None:
            problems.append(f"{name} {problem}")
    if problems:
        listed = "".join(f"\n  {p}" for p in problems)
        raise AdapterLoadError(
            f"{where}:{listed}\nRename or fix these (docs/adapters.md lists the hooks); "
            "an attribute of your own must not be named like a hook."
        )
