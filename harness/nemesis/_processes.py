"""Process faults: kill, continue after a pause, kill at a random moment, race,
release workers together from a barrier.

A pause is armed as a crash point of a worker the runner starts; these
handlers act on the paused worker (``ctx.paused``) or start workers of their
own, and leave the recording of how each worker ended to
``ctx.await_worker``.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from contextvars import ContextVar

from .._errors import AdapterError
from ..adapters import WorkerExit, WorkerHandle
from ..model import ContinueWorker, EventF, KillAfter, KillWorker, RaceWorkers, ReleaseWorkers
from ._context import ScenarioError, StepContext
from ._registry import handles

#: Longest a single worker may run before the harness calls it stuck, unless
#: the run says otherwise (``--worker-timeout``, or the adapter's
#: ``worker_timeout``: see :func:`resolve_worker_timeout`).
WORKER_TIMEOUT = 120.0

#: the limit of the harness run in progress (set by :func:`worker_timeout_limit`)
_limit: ContextVar[float] = ContextVar("harness_worker_timeout", default=WORKER_TIMEOUT)


def worker_timeout(budget_left: float, limit: float | None = None) -> float:
    """How long a worker may run before it is killed as stuck: ``limit``
    (default: the run's, :func:`worker_timeout_limit`, else
    :data:`WORKER_TIMEOUT`), or what is left of the budget, but never under
    30 s nor over ``limit`` (a worker runs until nothing is runnable:
    seconds, not minutes)."""
    cap = _limit.get() if limit is None else limit
    return min(cap, max(30.0, budget_left))


@contextlib.contextmanager
def worker_timeout_limit(seconds: float) -> Iterator[None]:
    """Within this block (one harness run, replay or check), a worker may
    run ``seconds`` at most: what :func:`worker_timeout` caps at."""
    token = _limit.set(seconds)
    try:
        yield
    finally:
        _limit.reset(token)


def resolve_worker_timeout(setting: float | None, adapter: object) -> float:
    """The worker timeout of a run: the ``worker_timeout`` setting
    (``--worker-timeout``, ``HARNESS_WORKER_TIMEOUT``, ``[tool.harness]``)
    if given, else the adapter's optional ``worker_timeout`` attribute (a
    runtime on real time declares what its workers need), else
    :data:`WORKER_TIMEOUT`. An adapter's value that is not a positive
    finite number is an :class:`AdapterError`."""
    if setting is not None:
        return float(setting)
    declared = getattr(adapter, "worker_timeout", None)
    if declared is None:
        return WORKER_TIMEOUT
    ok = isinstance(declared, (int, float)) and not isinstance(declared, bool)
    if not ok or not math.isfinite(declared) or declared <= 0:
        name = type(getattr(adapter, "unguarded", adapter)).__name__
        raise AdapterError(
            f"{name}.worker_timeout is {declared!r}: it must be a positive number of seconds "
            "(how long one of its workers may run before the harness calls it stuck)"
        )
    return float(declared)


def wait_worker(handle: WorkerHandle, timeout: float) -> WorkerExit:
    """Wait for ``handle`` to end or stop; a worker still running after
    ``timeout`` is killed and reported as the adapter's fault (a worker must
    exit once nothing is runnable), not waited on forever."""
    try:
        return handle.wait(timeout)
    except TimeoutError as exc:
        with contextlib.suppress(Exception):
            handle.kill()
            handle.wait(10.0)
        raise AdapterError(
            f"worker {handle.worker_id} did not exit within {timeout:g} s; a worker must exit "
            "once nothing is runnable (one that blocks on a lock, a queue or a retry loop "
            "never does)",
            detail=str(exc),
        ) from exc


def _not_paused(ctx: StepContext, worker_id: str) -> None:
    # Its pause never fired (the site was not reached): nothing to act on.
    ctx.recorder.record("info", EventF.NOTE, "runner", {"text": f"{worker_id} is not paused"})


@handles(ContinueWorker)
def continue_worker(ctx: StepContext, step: ContinueWorker) -> None:
    """SIGCONT a paused worker and wait for it to end."""
    handle = ctx.paused.pop(step.worker_id, None)
    if handle is None:
        _not_paused(ctx, step.worker_id)
        return
    ctx.recorder.fault("continue", True, worker_id=step.worker_id)
    handle.cont()
    ctx.await_worker(handle)


@handles(KillWorker)
def kill_worker(ctx: StepContext, step: KillWorker) -> None:
    """SIGKILL a paused worker."""
    handle = ctx.paused.pop(step.worker_id, None)
    if handle is None:
        _not_paused(ctx, step.worker_id)
        return
    handle.kill()
    ctx.recorder.fault("kill", True, worker_id=step.worker_id)
    ctx.await_worker(handle)


@handles(KillAfter)
def kill_after(ctx: StepContext, step: KillAfter) -> None:
    """Random-moment kill: the one step timed by the wall clock (see KillAfter)."""
    handle = ctx.start(step.worker_id)
    time.sleep(step.delay)
    handle.kill()  # a no-op for a worker that already exited
    exit_ = wait_worker(handle, ctx.worker_timeout)
    ctx.recorder.fault("random_kill", exit_.killed, worker_id=step.worker_id, delay=step.delay)
    # await_worker records the exit (and waits out the lease after a kill);
    # the handle has already been reaped, so it returns at once.
    ctx.await_worker(handle)


@handles(RaceWorkers)
def race(ctx: StepContext, step: RaceWorkers) -> None:
    """Start every worker before waiting for any: they work at once."""
    busy = sorted(set(step.worker_ids) & set(ctx.paused))
    if busy:
        raise ScenarioError(f"workers {busy} are paused; continue or kill them first")
    handles = [ctx.start(worker_id) for worker_id in step.worker_ids]
    # No runs named: a race must change no outcome.
    ctx.recorder.fault("race", True, workers=list(step.worker_ids))
    for handle in handles:
        ctx.await_worker(handle)


@handles(ReleaseWorkers)
def release(ctx: StepContext, step: ReleaseWorkers) -> None:
    """SIGCONT every paused worker named before waiting for any: released
    together from the crash point that held them, they work at once."""
    handles = []
    for worker_id in step.worker_ids:
        handle = ctx.paused.pop(worker_id, None)
        if handle is None:
            _not_paused(ctx, worker_id)
            continue
        handles.append(handle)
    # No runs named: a race must change no outcome. Fired only when at
    # least two workers really were held at the barrier.
    held = [h.worker_id for h in handles]
    missing = [w for w in step.worker_ids if w not in held]
    if len(handles) == 1 and missing and all(held[0] in ctx.serialized.get(w, ()) for w in missing):
        # One racer held at the site, the others ended without reaching it
        # *while it was held there*: the runtime serialized them before the
        # site (a lock, a lease, a claim taken earlier). Nothing raced here,
        # and nothing is wrong with the declarations: not tested for this
        # workflow, with why -- never armed, so never an "armed, never
        # fired" that makes the run inconclusive. (A racer that never ran,
        # or ended before the other was held, was not serialized: that
        # barrier was armed and not reached, as below.)
        flows = sorted({r.workflow for r in ctx.runs.values()})
        reason = (
            f"not tested for workflow {', '.join(flows) or '?'}: the runtime serialized the "
            f"racers before the site ({', '.join(missing)} ended without reaching it while "
            f"{held[0]} was held there)"
        )
        ctx.recorder.fault(
            "race", False, armed=False, workers=held, barrier=True, reason=reason, workflows=flows
        )
    else:
        ctx.recorder.fault("race", len(handles) > 1, workers=held, barrier=True)
    for handle in handles:
        handle.cont()
    for handle in handles:
        ctx.await_worker(handle)
