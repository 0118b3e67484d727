"""Who handles each kind of fault step, and how a fault the world fired is
reported: filled in by each family's module as it is imported.

A handler module says what it handles where it defines it
(``@handles(ArmModelFault)``), and a family whose faults fire in the world
says how its fired rules read as fault events (``@fires_at(MODEL)``). The
package imports the module each family's record names
(``FaultFamily.handlers``), in the records' order, so adding a family
touches no table here or in the runner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from ..world import FiredFault
from ._context import StepContext

#: ``handler(ctx, step)``: performs one step (see :mod:`._context`)
Handler = Callable[[StepContext, Any], None]
#: a fired world rule -> (the fault kind it counts as, its fault event's
#: value); None: the step that armed it records the fault itself (a rule
#: that only held the caller for it: ``stop_after_apply``)
FiredEvent = Callable[[FiredFault], tuple[str, dict[str, Any]] | None]

#: the rule target (``FiredFault.service``) whose maker is the default: the
#: ``world`` family's, for every service no family claims
ANY_TARGET = "*"

_H = TypeVar("_H", bound=Callable[..., None])
_F = TypeVar("_F", bound=FiredEvent)

_handlers: dict[type, Handler] = {}
_fired: dict[str, FiredEvent] = {}

#: every registered handler, by the step type it performs
HANDLERS: Mapping[type, Handler] = MappingProxyType(_handlers)
#: every registered fired-fault maker, by the world rule target it reads
FIRED_EVENTS: Mapping[str, FiredEvent] = MappingProxyType(_fired)


def handles(*step_types: type) -> Callable[[_H], _H]:
    """Register the decorated function as the handler of ``step_types``. A
    step type has one handler: a second is refused when its module loads."""

    def register(fn: _H) -> _H:
        for t in step_types:
            if t in _handlers:
                raise RuntimeError(
                    f"{t.__name__} already has a handler ({_handlers[t].__module__}."
                    f"{_handlers[t].__qualname__}); {fn.__module__}.{fn.__qualname__} "
                    "cannot be another"
                )
            _handlers[t] = fn
        return fn

    return register


def fires_at(target: str) -> Callable[[_F], _F]:
    """Register the decorated function as what a world rule aimed at
    ``target`` (a ``FaultRule.service``: ``MODEL``, or :data:`ANY_TARGET`)
    reads as once it fired."""

    def register(fn: _F) -> _F:
        if target in _fired:
            raise RuntimeError(f"world rules at {target!r} are already read by {_fired[target]}")
        _fired[target] = fn
        return fn

    return register


def fired_fault_event(fired: FiredFault) -> tuple[str, dict[str, Any]] | None:
    """The fault kind and event value of a world rule that fired, from the
    family that aims rules at its target (the ``world`` family's otherwise);
    None for a rule the step that armed it records."""
    maker = _fired.get(fired.service) or _fired[ANY_TARGET]
    return maker(fired)
