"""Process faults: kill, continue after a pause, kill at a random moment, race,
release workers together from a barrier.

A pause is armed as a crash point of a worker the runner starts; these
handlers act on the paused worker (``ctx.paused``) or start workers of their
own, and leave the recording of how each worker ended to
``ctx.await_worker``.
"""

from __future__ import annotations

import contextlib
import time

from .._errors import AdapterError
from ..adapters import WorkerExit, WorkerHandle
from ..model import ContinueWorker, EventF, KillAfter, KillWorker, RaceWorkers, ReleaseWorkers
from ._context import ScenarioError, StepContext

#: Longest a single worker may run before the harness calls it stuck.
WORKER_TIMEOUT = 120.0


def worker_timeout(budget_left: float) -> float:
    """How long a worker may run before it is killed as stuck: two minutes,
    or what is left of the budget, but never under 30 s (a worker runs until
    nothing is runnable: seconds, not minutes)."""
    return min(WORKER_TIMEOUT, max(30.0, budget_left))


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


def continue_worker(ctx: StepContext, step: ContinueWorker) -> None:
    """SIGCONT a paused worker and wait for it to end."""
    handle = ctx.paused.pop(step.worker_id, None)
    if handle is None:
        _not_paused(ctx, step.worker_id)
        return
    ctx.recorder.fault("continue", True, worker_id=step.worker_id)
    handle.cont()
    ctx.await_worker(handle)


def kill_worker(ctx: StepContext, step: KillWorker) -> None:
    """SIGKILL a paused worker."""
    handle = ctx.paused.pop(step.worker_id, None)
    if handle is None:
        _not_paused(ctx, step.worker_id)
        return
    handle.kill()
    ctx.recorder.fault("kill", True, worker_id=step.worker_id)
    ctx.await_worker(handle)


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
    ctx.recorder.fault(
        "race", len(handles) > 1, workers=[h.worker_id for h in handles], barrier=True
    )
    for handle in handles:
        handle.cont()
    for handle in handles:
        ctx.await_worker(handle)
