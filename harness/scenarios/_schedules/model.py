"""The targeted schedules of the ``model`` family: every model fault at the
model's first reply, then each fault that makes a client retry, right
before an effect, with the world killing the worker right after the
retried call's effect is applied (a rate limit, a retry, a kill: the
retry's path must be as durable as the first); a tool's reply without its
reference; and its sampled-search episode."""

from __future__ import annotations

from hypothesis import strategies as st

from ...model import ArmModelFault, ArmWorldFault, RunSpec, RunWorker, Scenario, Step
from ...vocabulary import MODEL_FAULT_MODES, TOOL_REPLY_MODES
from ...world import MODEL_CONTENT_MODES
from .._universe import Universe
from ._common import _Aim, _interleave, _kill_after_apply, _run, _scenario
from ._draws import _effects, _kind
from ._registry import category, episode_of
from ._swarm import Swarm

#: the modes that lose or refuse a reply: a client retries them
RETRIED = tuple(m for m in MODEL_FAULT_MODES if m not in MODEL_CONTENT_MODES)
#: the modes that corrupt a tool call's arguments (aimed at the first reply
#: that calls a tool, so they never land on a text answer)
ARGUMENT_MODES = ("malformed_arguments", "missing_argument")


def _fault(mode: str) -> ArmModelFault:
    return ArmModelFault(mode=mode, action="tool_call" if mode in ARGUMENT_MODES else None)


@category("model", place=210)
def _model_faults(a: _Aim) -> list[Scenario]:
    """Each model fault once, at the model's first reply (the first that
    calls a tool, for a fault of its arguments); every mode on one workflow
    before the next workflow's."""
    if "model" not in a.families:
        return []
    return _interleave(
        [
            [
                _scenario(
                    f"{wf.name}/model_{mode}", _run(wf), _fault(mode), RunWorker(worker_id="w1")
                )
                for mode in MODEL_FAULT_MODES
            ]
            for wf in a.workflows
        ]
    )


@category("model", place=220)
def _tool_replies(a: _Aim) -> list[Scenario]:
    """Each effect's service applies the call and answers without its
    reference (a tool's output the app cannot prove its effect by): the
    app must not record an effect it cannot prove, nor do it again."""
    if "model" not in a.families:
        return []
    return _interleave(
        [
            [
                _scenario(
                    f"{wf.name}/tool_{mode}/{eff}",
                    _run(wf),
                    ArmWorldFault(
                        service=eff.partition(".")[0],
                        action=eff.partition(".")[2] or None,
                        mode=mode,
                    ),
                    RunWorker(worker_id="w1"),
                )
                for eff in wf.effects
                for mode in TOOL_REPLY_MODES
            ]
            for wf in a.workflows
        ]
    )


@category("model", place=200)
def _model_then_kill(a: _Aim) -> list[Scenario]:
    """A retried model fault at the first model call, and the world kills
    the worker right after it applies each effect: the effect the retried
    reply asked for must not be done again by the worker that resumes."""
    if "model" not in a.families or "world" not in a.families:
        return []
    return _interleave(
        [
            [
                _scenario(
                    f"{wf.name}/model_{mode}_then_kill/{eff}",
                    _run(wf),
                    _fault(mode),
                    _kill_after_apply(eff),
                    RunWorker(worker_id="w1"),
                )
                for eff in wf.effects
                for mode in RETRIED
            ]
            for wf in a.workflows
        ]
    )


@episode_of("model")
def _model_episode(
    draw: st.DrawFn, u: Universe, runs: tuple[RunSpec, ...], n: int, swarm: Swarm
) -> list[Step]:
    """A model fault at one of the next model calls (a fault of a tool
    call's arguments: at one of the next replies that call a tool)."""
    mode = _kind(draw, swarm, "model")
    nth = draw(st.sampled_from((1, 1, 1, 2, 3)))
    if mode in TOOL_REPLY_MODES:
        # a tool's service answers one of its next calls without the reference
        effect = draw(st.sampled_from(_effects(u, runs) or ["payments.charge"]))
        service, _, name = effect.partition(".")
        armed: Step = ArmWorldFault(service=service, action=name or None, nth=nth, mode=mode)
        return [armed, RunWorker(worker_id=f"w{n}")]
    action = "tool_call" if mode in ("malformed_arguments", "missing_argument") else None
    return [ArmModelFault(mode=mode, action=action, nth=nth), RunWorker(worker_id=f"w{n}")]
