"""World faults: a rule armed at a simulated service (reject, time out,
slow down, or kill the caller at the effect boundary)."""

from __future__ import annotations

from ..model import ArmWorldFault, EventF
from ..world import FaultRule
from ._context import StepContext


def world_kind(mode: str) -> str:
    """The coverage kind of a world fault rule's mode."""
    return "effect_boundary" if mode.startswith("kill_") else "world_fault"


def arm_world_fault(ctx: StepContext, step: ArmWorldFault) -> None:
    """Arm the rule; the world records when it fires (the runner syncs that
    into the history), so a rule that never fires shows as armed > fired."""
    world = ctx.env.world
    # ``nth`` counts from now: the world numbers calls from its creation.
    done = world.calls(step.service, step.action)
    world.arm(
        FaultRule(
            step.service,
            nth=done + step.nth,
            mode=step.mode,  # type: ignore[arg-type]
            action=step.action,
            delay=step.delay,
        )
    )
    ctx.recorder.arm(world_kind(step.mode))
    ctx.recorder.record(
        "info", EventF.NOTE, "nemesis", {"text": "world fault armed", **step.model_dump()}
    )
