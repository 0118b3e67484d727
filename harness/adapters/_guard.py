"""The adapter boundary: what an adapter does wrong is an *adapter error*.

An adapter is code under development. When it raises, or returns what the
contract forbids (an observation that is not an :class:`Observation`, a
``NaN`` timer, workflows that are not :class:`WorkflowSpec`), that is neither
a finding about the runtime (exit 1) nor a bug in the harness: it is reported
as "adapter error: ..." with the adapter's own traceback kept, exit code 2.

:func:`guard` wraps an adapter so that every call into it, and into the
environments it opens, goes through this check. ``submit`` and ``deliver``
are left as they are: a runtime refusing a submission or a message is
recorded in the history (the runner catches it), not an error.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from .._errors import AdapterError, HarnessError
from ._contract import Observation, RunView, WorkflowSpec

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


def call(where: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        if _is_harness_error(exc):
            raise
        raise AdapterError(
            f"{where} raised {type(exc).__name__}: {_one_line(str(exc))}",
            detail="".join(traceback.format_exception(exc)),
        ) from exc


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


class _Guarded:
    """Forwards attribute reads and writes to the wrapped object; calls to its
    methods go through :func:`call` and the checks above."""

    def __init__(self, inner: Any) -> None:
        object.__setattr__(self, "_inner", inner)

    def __getattr__(self, name: str) -> Any:
        inner = object.__getattribute__(self, "_inner")
        value = getattr(inner, name)
        if name.startswith("_") or name in _PASS_THROUGH or not callable(value):
            return value
        where = f"{type(inner).__name__}.{name}()"
        check = _CHECKS.get(name)
        wrap = self._wrap_result

        def guarded(*args: Any, **kwargs: Any) -> Any:
            result = call(where, value, *args, **kwargs)
            if check is not None:
                result = check(where, result)
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
    def _wrap_result(self, name: str, result: Any) -> Any:
        if name == "open":
            if result is None:
                raise AdapterError(
                    f"{type(self.unguarded).__name__}.open() returned None, not an environment"
                )
            return GuardedEnvironment(result)
        return result


def _hook(adapter: Any, which: str) -> tuple[str, Any]:
    """The optional run-level hook ``which`` of ``adapter`` (None if it has
    none), with the adapter's class name for messages."""
    name = type(getattr(adapter, "unguarded", adapter)).__name__
    hook = getattr(adapter, which, None)
    if hook is not None and not callable(hook):
        raise AdapterError(f"{name}.{which} is {type(hook).__name__}, not a method")
    return name, hook


def setup_adapter(adapter: Any) -> None:
    """Call ``adapter``'s optional ``setup()`` hook, once, before the run
    touches anything else of it (probe, site profile, search; a replay; a
    check). An adapter without one is left alone. What ``setup()`` raises is
    an :class:`AdapterError` (exit 2); the run then still calls ``close()``
    (:func:`close_adapter`), which must cope with a setup that stopped
    halfway.
    """
    name, hook = _hook(adapter, "setup")
    if hook is not None:
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
