"""What an adapter returns, checked against the contract's annotations:
observations, workflows, names, a protocol's methods, and every number
finite (the history and the report are JSON)."""

from __future__ import annotations

import functools
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from ..._errors import AdapterError
from .._contract import Observation, RunView, WorkflowSpec


def _finite(where: str, what: str, value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise AdapterError(f"{where} returned {what} = {value!r}: a time must be a finite number")


def check_observation(where: str, obs: Any) -> Observation:
    """``obs`` if it is an Observation the harness can read, else AdapterError."""
    if not isinstance(obs, Observation):
        raise AdapterError(
            f"{where} returned {type(obs).__name__}, not a harness.adapters.Observation"
        )
    for run in obs.runs:
        if not isinstance(run, RunView):
            raise AdapterError(f"{where} returned a run that is {type(run).__name__}, not RunView")
        _finite(where, f"wake_at of run {run.run_id}", run.wake_at)
        if run.approval is not None:
            expires = run.approval.get("expires_at")
            _finite(where, f"approval expires_at of run {run.run_id}", expires)
    for t in obs.transitions:
        _finite(where, "a transition's at", t.get("at") if isinstance(t, dict) else None)
    return obs


def check_workflows(where: str, workflows: Any) -> tuple[WorkflowSpec, ...]:
    if not isinstance(workflows, Sequence) or isinstance(workflows, str | bytes):
        raise AdapterError(f"{where} returned {type(workflows).__name__}, not a list of workflows")
    bad = [type(w).__name__ for w in workflows if not isinstance(w, WorkflowSpec)]
    if bad:
        raise AdapterError(f"{where} returned {bad[0]} items, not harness.adapters.WorkflowSpec")
    for w in workflows:
        # Checked again: model_copy(update=...) skips a model's validation,
        # and a floor the history cannot read would leave memory unjudged.
        try:
            WorkflowSpec.check_memory_floor(w.memory_floor)
        except ValueError as exc:
            raise AdapterError(f"{where}: workflow {w.name!r}: {exc}") from None
    return tuple(workflows)


def check_names(where: str, names: Any) -> Any:
    if not isinstance(names, Sequence) or isinstance(names, str | bytes):
        raise AdapterError(f"{where} returned {type(names).__name__}, not a list of names")
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise AdapterError(f"{where} returned {bad[0]!r} among its names: names are strings")
    return names


_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "observe": check_observation,
    "workflows": check_workflows,
    "crash_points": check_names,
    "pause_points": check_names,
}


#: deeper than this, a result is refused (JSON nested this deep is a bug,
#: or a structure that refers to itself)
_MAX_DEPTH = 200


#: exact types that hold no number that is not finite (the common case,
#: decided before any ``isinstance`` walk)
_PLAIN = frozenset({str, int, bool, type(None)})
#: exact container types walked by their items
_SEQUENCES = frozenset({list, tuple, set, frozenset})


def _all_finite(value: Any, depth: int = 0) -> bool:
    """No NaN or infinity anywhere in ``value`` (containers and pydantic
    models walked), within :data:`_MAX_DEPTH` levels.

    An observation is walked at every call of ``observe()``: exact types
    are dispatched first and items checked in a loop, without a generator
    per container (the same answers as the ``isinstance`` chain below,
    which subclasses still take)."""
    kind = type(value)
    if kind is float:
        return math.isfinite(value)
    if kind in _PLAIN:
        return True
    if depth >= _MAX_DEPTH:
        return False
    items: Any
    if kind is dict:
        items = value.values()
    elif kind in _SEQUENCES:
        items = value
    elif isinstance(value, float):
        return math.isfinite(value)
    elif isinstance(value, str | int | bool | None):
        return True
    elif isinstance(value, BaseModel):
        items = [getattr(value, f) for f in kind.model_fields]
    elif isinstance(value, Mapping):
        items = value.values()
    elif isinstance(value, list | tuple | set | frozenset):
        items = value
    else:
        return True
    deeper = depth + 1
    for item in items:
        item_kind = type(item)
        if item_kind is float:
            if not math.isfinite(item):
                return False
        elif item_kind not in _PLAIN and not _all_finite(item, deeper):
            return False
    return True


def _not_finite_at(value: Any, path: str = "", depth: int = 0) -> tuple[str, Any] | None:
    """Where :func:`_all_finite` fails first: (path, value)."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, value)
    if depth >= _MAX_DEPTH:
        return (path, "nested too deep")
    items: Any = ()
    if isinstance(value, BaseModel):
        items = ((f".{f}", getattr(value, f)) for f in type(value).model_fields)
    elif isinstance(value, Mapping):
        items = ((f"[{k!r}]", v) for k, v in value.items())
    elif isinstance(value, list | tuple | set | frozenset):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    for step, v in items:
        found = _not_finite_at(v, path + step, depth + 1)
        if found is not None:
            return found
    return None


def check_finite(where: str, result: Any) -> Any:
    """``result`` if every number in it is finite, else AdapterError naming
    where the first that is not sits."""
    if _all_finite(result):
        return result
    path, value = _not_finite_at(result) or ("", result)
    if value == "nested too deep":
        raise AdapterError(
            f"{where} returned a value nested more than {_MAX_DEPTH} levels deep (or one that "
            f"contains itself) at result{path}: the harness records results as JSON"
        )
    raise AdapterError(
        f"{where} returned {value!r} at result{path}: every number the harness records must be "
        "finite (JSON has no NaN or Infinity)"
    )


@functools.cache
def _returns(protocol: type, name: str) -> Any:
    """The return annotation of ``protocol.name`` (None: unknown, not checked)."""
    method = getattr(protocol, name, None)
    if not callable(method):
        return None
    try:
        return typing.get_type_hints(method).get("return")
    except Exception:  # an annotation that cannot be resolved: not checked
        return None


def _describe(annotation: Any) -> str:
    if isinstance(annotation, type):
        module = annotation.__module__
        if module.startswith("harness."):
            return f"a harness.adapters.{annotation.__name__}"
        return f"a {annotation.__name__}"
    return "a " + str(annotation).replace("typing.", "")


def _conforms(value: Any, annotation: Any) -> bool:
    """Whether ``value`` is what ``annotation`` says, as far as the harness
    relies on it (see the module's docstring: ``None`` and ``bool`` results
    are not checked; a ``Protocol`` only when it is runtime-checkable)."""
    if annotation is None or annotation is Any or annotation is type(None) or annotation is bool:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return any(
            value is None if a is type(None) else _conforms(value, a)
            for a in typing.get_args(annotation)
        )
    if origin is not None:
        args = typing.get_args(annotation)
        if origin is dict:
            return isinstance(value, Mapping)
        if origin in (list, tuple, Sequence):
            if not isinstance(value, list | tuple):
                return False
            item = args[0] if args and origin is not tuple else Any
            return all(_conforms(v, item) for v in value)
        return True
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(annotation, type):
        if getattr(annotation, "_is_protocol", False):
            if not getattr(annotation, "_is_runtime_protocol", False):
                return True
            return _has_protocol_methods(value, annotation)
        return isinstance(value, annotation)
    return True


#: protocol methods only some capabilities need (a worker is continued
#: only after it stopped itself at a crash point): not required of a result
_OPTIONAL = frozenset({"cont"})


def _has_protocol_methods(value: Any, protocol: type) -> bool:
    """``value`` has every method ``protocol`` defines that is required: not
    one :class:`~harness.adapters.BaseEnvironment` gives a default for,
    nor one of :data:`_OPTIONAL`."""
    from .._contract import BaseEnvironment

    required = [
        name
        for name, member in vars(protocol).items()
        if callable(member)
        and not name.startswith("_")
        and not hasattr(BaseEnvironment, name)
        and name not in _OPTIONAL
    ]
    return all(callable(getattr(value, name, None)) for name in required)


def check_returns(protocol: type, where: str, name: str, result: Any) -> Any:
    """``result`` of ``protocol.name`` if it is what the contract annotates,
    with every number finite; else AdapterError naming the call."""
    annotation = _returns(protocol, name)
    if not _conforms(result, annotation):
        shown = repr(result) if len(repr(result)) <= 60 else type(result).__name__
        raise AdapterError(
            f"{where} returned {shown}, not {_describe(annotation)} (see "
            f"harness.adapters.{protocol.__name__}.{name})"
        )
    return check_finite(where, result)
