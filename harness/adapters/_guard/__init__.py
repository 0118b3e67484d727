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

from ._raised import call, escaped, raise_escaped
from ._results import (
    check_finite,
    check_names,
    check_observation,
    check_returns,
    check_workflows,
)
from ._wrap import GuardedAdapter, GuardedEnvironment, close_adapter, guard, setup_adapter

__all__ = [
    "GuardedAdapter",
    "GuardedEnvironment",
    "call",
    "check_finite",
    "check_names",
    "check_observation",
    "check_returns",
    "check_workflows",
    "close_adapter",
    "escaped",
    "guard",
    "raise_escaped",
    "setup_adapter",
]
