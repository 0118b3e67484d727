"""Out-of-band faults: a cut storage connection, an operator's cancellation."""

from __future__ import annotations

from typing import Any

from ..adapters._contract import offered_storage_kinds
from ..model import Cancel, StorageFault
from ._context import StepContext
from ._registry import handles


@handles(StorageFault)
def storage_fault(ctx: StepContext, step: StorageFault) -> None:
    """Cut the workers' storage sessions (Postgres terminate, Redis CLIENT KILL)."""
    # Whose sessions are at stake: the paused workers (an idle one holds
    # pooled connections too). No runs are named: a cut connection must
    # change no outcome, so every run stays under every comparison.
    value: dict[str, Any] = {"storage": step.kind, "paused": sorted(ctx.paused)}
    if step.kind not in offered_storage_kinds(ctx.env, ctx.capabilities):
        # This deployment has no such server (say, Redis without the Redis
        # queue): armed, and visibly never fired.
        ctx.recorder.fault("storage", False, **value, offered=False)
        return
    ctx.recorder.fault("storage", ctx.env.storage_fault(step.kind), **value)


@handles(Cancel)
def cancel(ctx: StepContext, step: Cancel) -> None:
    """An operator's out-of-band write: the run is named, since its outcome
    changes; what must not change is the state machine (a worker that
    held the run must not write over the cancellation)."""
    done = bool(ctx.env.cancel(step.run_id))
    ctx.recorder.fault("operator_cancel", done, runs=[step.run_id], paused=sorted(ctx.paused))
