"""The guard itself: an adapter and its environments wrapped so that every
call is :func:`call`-ed and every result checked, and the adapter's
``setup``/``close`` hooks run under the same guard."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..._errors import AdapterError
from .._contract import Adapter, Environment
from .._hooks import ENVIRONMENT_HOOKS, ENVIRONMENT_MEMBERS, check_hooks
from ._raised import call, raise_escaped
from ._results import (
    _CHECKS,
    check_finite,
    check_returns,
)

#: environment methods whose exceptions the runner records as findings
_PASS_THROUGH = frozenset({"submit", "deliver", "world"})


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
