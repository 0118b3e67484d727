"""The adapter boundary: what an adapter does wrong is an *adapter error*.

An adapter is code under development. When it raises, or returns what the
contract forbids (an observation that is not an :class:`Observation`, a
``NaN`` timer, workflows that are not :class:`WorkflowSpec`), that is neither
a finding about the runtime (exit 1) nor a bug in the harness: it is reported
as "adapter error: ..." with the adapter's own traceback kept, exit code 2.

What it raises includes what is not an ``Exception``: ``sys.exit()``
(``SystemExit``), a ``KeyboardInterrupt`` no SIGINT caused (the harness's
handler turns a real one into :class:`~harness._errors.Interrupted`),
``GeneratorExit``, a bare ``BaseException``. Let through, those would end
the harness without a report, ``sys.exit(0)`` with exit code 0: a green CI
job with nothing tested.

What it returns is checked against the contract's own annotations
(:class:`Environment`, :class:`Adapter`), not per hook: a method annotated
``-> Declarations`` must return one, ``-> float`` a finite number, ``->
list[str]`` a list of strings, and every number anywhere in a result (an
observation's run outputs, a description) must be finite, as the history
and the report are JSON. Results annotated ``-> None`` or ``-> bool`` are
not checked for type (the harness ignores the one and reads the other by
truth).

:func:`guard` wraps an adapter so that every call into it, and into the
environments it opens, goes through this check. ``submit`` and ``deliver``
are left as they are: a runtime refusing a submission or a message is
recorded in the history (the runner catches it), not an error; only their
``BaseException`` and non-finite results are the adapter's errors.
"""

from __future__ import annotations

import functools
import math
import traceback
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from pydantic import BaseModel, ValidationError

from .._errors import AdapterError, HarnessError, Interrupted
from .._signals import sigint_is_ours, signal_received
from ._contract import Adapter, Environment, Observation, RunView, WorkflowSpec
from ._hooks import ENVIRONMENT_HOOKS, ENVIRONMENT_MEMBERS, check_hooks

#: environment methods whose exceptions the runner records as findings
_PASS_THROUGH = frozenset({"submit", "deliver", "world"})


def _is_harness_error(exc: BaseException) -> bool:
    """The harness's own verdict-level errors pass through unchanged (an
    interruption, a ScenarioError of the runner). What the process layer
    raises on an adapter's behalf (a misspelled worker target, a worker that
    never exits) is the adapter's, like anything else it raises."""
    module = type(exc).__module__
    return isinstance(exc, HarnessError) or module.startswith(("harness.runner", "harness.nemesis"))


def _one_line(text: str) -> str:
    """An exception's message on one line: its first line, and when that
    quotes a traceback, the traceback's last line (the error) instead."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    head, _, rest = lines[0].partition("Traceback (most recent call last)")
    if not _:
        return lines[0]
    errors = [ln for ln in lines[1:] if not ln[0].isspace()]
    return f"{head.rstrip(': ')}: {errors[0] if errors else rest}"


def _message(exc: Exception) -> str:
    """What went wrong, on one line: for a pydantic ``ValidationError`` (a
    harness record the adapter built wrongly), each error's field and
    message, since its first line only counts them."""
    if isinstance(exc, ValidationError):
        parts = [
            f"{'.'.join(str(x) for x in e['loc']) or exc.title}: "
            + str(e["msg"]).removeprefix("Value error, ")
            for e in exc.errors()[:3]
        ]
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        return f"{exc.title}: {'; '.join(parts)}{more}"
    return _one_line(str(exc))


def call(where: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        if _is_harness_error(exc):
            raise
        raise AdapterError(
            f"{where} raised {type(exc).__name__}: {_message(exc)}",
            detail="".join(traceback.format_exception(exc)),
        ) from exc
    except BaseException as exc:
        raise_escaped(where, exc)


def raise_escaped(where: str, exc: BaseException) -> NoReturn:
    """Raise what :func:`escaped` makes of ``exc`` (``exc`` itself unchanged
    when it is the user's interruption)."""
    replacement = escaped(where, exc)
    if replacement is exc:
        raise exc
    raise replacement from exc


def escaped(where: str, exc: BaseException) -> BaseException:
    """What to raise for ``exc``, a ``BaseException`` that is not an
    ``Exception``, which adapter code at ``where`` raised: an
    :class:`AdapterError` (exit 2) naming the call, unless it is the user's
    interruption (then :class:`Interrupted`, or ``exc`` itself where no
    handler of the harness is installed: a library caller's Ctrl-C)."""
    if isinstance(exc, Interrupted):
        return exc
    if isinstance(exc, KeyboardInterrupt):
        got = signal_received()
        if got is not None:  # our handler fired: the user's signal, on its way
            return Interrupted(got)
        if not sigint_is_ours():
            # Python's own handler (or one the adapter installed) may have
            # raised it for a real Ctrl-C: the user's, not the adapter's.
            return exc
        why = " though no SIGINT came (the harness turns one into its own stop)"
    elif isinstance(exc, SystemExit):
        why = (
            f"({exc.code!r}): an adapter must not end the harness's process (sys.exit); "
            "raise an exception instead"
        )
    elif isinstance(exc, GeneratorExit):
        why = " outside a generator being closed"
    else:
        why = f"({_one_line(str(exc))}), not an Exception: raise an Exception instead"
    return AdapterError(
        f"{where} raised {type(exc).__name__}{why}",
        detail="".join(traceback.format_exception(exc)),
    )


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


def _all_finite(value: Any, depth: int = 0) -> bool:
    """No NaN or infinity anywhere in ``value`` (containers and pydantic
    models walked), within :data:`_MAX_DEPTH` levels."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str | int | bool | None):
        return True
    if depth >= _MAX_DEPTH:
        return False
    if isinstance(value, BaseModel):
        return all(_all_finite(getattr(value, f), depth + 1) for f in type(value).model_fields)
    if isinstance(value, Mapping):
        return all(_all_finite(v, depth + 1) for v in value.values())
    if isinstance(value, list | tuple | set | frozenset):
        return all(_all_finite(v, depth + 1) for v in value)
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
    from ._contract import BaseEnvironment

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


class _Guarded:
    """Forwards attribute reads and writes to the wrapped object; calls to its
    methods go through :func:`call` and the checks above."""

    #: the contract whose annotations its methods' results are checked against
    _protocol: type = Environment

    def __init__(self, inner: Any) -> None:
        object.__setattr__(self, "_inner", inner)

    def __getattr__(self, name: str) -> Any:
        inner = object.__getattribute__(self, "_inner")
        where = f"{type(inner).__name__}.{name}"
        try:
            value = getattr(inner, name)
        except Exception:
            raise  # AttributeError above all: hasattr() and getattr(..., None) rely on it
        except BaseException as exc:  # a property that exits
            raise_escaped(where, exc)
        if name.startswith("_") or not callable(value):
            return value
        where += "()"
        if name in _PASS_THROUGH:
            if name == "world":
                return value

            def passed(*args: Any, **kwargs: Any) -> Any:
                # Its exceptions are the runtime's answer (the runner records
                # them); what is not an Exception is the adapter's error.
                try:
                    result = value(*args, **kwargs)
                except Exception:
                    raise
                except BaseException as exc:
                    raise_escaped(where, exc)
                return check_finite(where, result)

            return passed
        check = _CHECKS.get(name)
        protocol = self._protocol
        wrap = self._wrap_result

        def guarded(*args: Any, **kwargs: Any) -> Any:
            result = call(where, value, *args, **kwargs)
            if check is not None:
                result = check(where, result)
            result = check_returns(protocol, where, name, result)
            return wrap(name, result)

        return guarded

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_inner"), name, value)

    def _wrap_result(self, name: str, result: Any) -> Any:
        return result

    @property
    def unguarded(self) -> Any:
        """The wrapped object itself."""
        return object.__getattribute__(self, "_inner")


class GuardedEnvironment(_Guarded):
    pass


class GuardedAdapter(_Guarded):
    _protocol = Adapter

    def _wrap_result(self, name: str, result: Any) -> Any:
        if name == "open":
            if result is None:
                raise AdapterError(
                    f"{type(self.unguarded).__name__}.open() returned None, not an environment"
                )
            kind = type(result)
            if kind not in _HOOKS_CHECKED:
                try:
                    check_hooks(
                        result,
                        f"{type(self.unguarded).__name__}.open() gave {kind.__name__}",
                        ENVIRONMENT_HOOKS,
                        ENVIRONMENT_MEMBERS,
                    )
                except AdapterError as exc:
                    # refused: it must not outlive the refusal
                    close = getattr(result, "close", None)
                    if callable(close):
                        try:
                            close()
                        except Exception as closing:
                            exc.add_note(f"then its close() failed too: {closing}")
                    raise
                _HOOKS_CHECKED.add(kind)
            return GuardedEnvironment(result)
        return result


#: Environment classes whose hook names were checked (once per class)
_HOOKS_CHECKED: set[type] = set()


def _hook(adapter: Any, which: str) -> tuple[str, Any]:
    """The optional run-level hook ``which`` of ``adapter`` (None if it has
    none), with the adapter's class name for messages."""
    name = type(getattr(adapter, "unguarded", adapter)).__name__
    hook = getattr(adapter, which, None)
    if hook is not None and not callable(hook):
        raise AdapterError(f"{name}.{which} is {type(hook).__name__}, not a method")
    return name, hook


def setup_adapter(adapter: Any, log: Callable[[str], None] | None = None) -> None:
    """Call ``adapter``'s optional ``setup()`` hook, once, before the run
    touches anything else of it (probe, site profile, search; a replay; a
    check). An adapter without one is left alone. What ``setup()`` raises is
    an :class:`AdapterError` (exit 2); the run then still calls ``close()``
    (:func:`close_adapter`), which must cope with a setup that stopped
    halfway. ``log`` gets a line before the hook runs: a setup that starts
    a server may take a minute, and a silent minute reads as a hang.
    """
    name, hook = _hook(adapter, "setup")
    if hook is not None:
        if log is not None:
            shown = getattr(adapter, "name", None)
            shown = shown if isinstance(shown, str) and shown else name
            log(f"harness: starting {shown}: setup() (a server it starts may take a while) ...")
        call(f"{name}.setup()", hook)


def close_adapter(adapter: Any, *, failing: BaseException | None = None) -> None:
    """Call ``adapter``'s optional ``close()`` hook, once the whole run has ended.

    An adapter without one is left alone. What ``close()`` raises is an
    :class:`AdapterError`; while ``failing`` (the error the run is already
    ending with) is on its way out, the close error is added to it as a note
    instead of replacing it: the first error is the one to fix.
    """
    try:
        name, hook = _hook(adapter, "close")
        if hook is None:
            return
        call(f"{name}.close()", hook)
    except AdapterError as exc:
        if failing is None:
            raise
        failing.add_note(f"then the adapter's close() failed too: {exc}")


def guard(adapter: Any) -> Any:
    """``adapter`` with every call into it checked at the boundary (idempotent)."""
    if isinstance(adapter, _Guarded):
        return adapter
    return GuardedAdapter(adapter)
