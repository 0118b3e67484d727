"""What an adapter raises: an adapter error (exit 2) with its own
traceback kept, unless it is the harness's own error or an interruption."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any, NoReturn

from pydantic import ValidationError

from ..._errors import AdapterError, HarnessError, Interrupted
from ..._signals import sigint_is_ours, signal_received


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
