"""What an adapter offers the search and promises its checkers: the
workflows it runs (:class:`WorkflowSpec`), where the memory family plants
its records (:class:`MemoryTarget`), and its declared delivery promises and
transition table (:class:`Declarations`). Part of the adapter contract
(:mod:`harness.adapters._contract`), exported by :mod:`harness.adapters`."""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator

from ._records import _Frozen


class MemoryTarget(_Frozen):
    """A long-term memory record a workflow's runs consult, where a planted
    one could change what they decide (``WorkflowSpec.memory_targets``):
    a policy fact that could waive an approval, a namespace whose records
    the run takes as evidence. The memory family plants its stale,
    expired, cross-tenant and poisoned records there, with ``value`` (what
    would do harm if the runtime believed it)."""

    #: the namespace the runs read; ``{field}`` names a field of the run's
    #: input (``"research/{topic}"``)
    namespace: str = Field(min_length=1)
    #: the record's key in it (``{field}`` too); a key the run reads but
    #: never writes itself, so a planted record changes nothing unless the
    #: runtime wrongly lets the run see it
    key: str = Field(min_length=1)
    value: Any = None

    @field_validator("namespace", "key")
    @classmethod
    def _template(cls, v: str) -> str:
        return _template(v)

    def at(self, run_input: dict[str, Any]) -> tuple[str, str]:
        """(namespace, key) for a run with ``run_input``; a field the input
        lacks is left as written."""
        fields = _Fields(run_input)
        return self.namespace.format_map(fields), self.key.format_map(fields)


class _Fields(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _template(v: str) -> str:
    """``v`` if it is a template over a run's input fields (``{topic}``)."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(v) if f is not None]
    except ValueError as exc:
        raise ValueError(
            f"{v!r} is not a template: {exc} (write {{field}} for an input field, "
            "{{ and }} for a brace)"
        ) from None
    for f in fields:
        if not f.isidentifier():
            raise ValueError(f"{v!r} names {{{f}}}: give an input field's name, as {{topic}}")
    return v


def _trust(v: Any, what: str) -> float:
    """``v`` as a trust score: a real number from 0 to 1."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= v <= 1.0:
        raise ValueError(
            f"{what} is {v!r}: give the lowest trust a record may have to reach the "
            "workflow's contexts, a number from 0.0 to 1.0 (the scale of a planted "
            "record's trust)"
        )
    return float(v)


class WorkflowSpec(_Frozen):
    """A workflow the adapter can run, for scenario generation."""

    name: str
    #: example inputs; generated workloads pick among and vary them
    inputs: tuple[dict[str, Any], ...]
    needs_approval: bool = False
    #: effect kinds ("service.action") this workflow performs when it succeeds
    effects: tuple[str, ...] = ()
    #: the most calls a run makes to one service action that keeps refusing
    #: (its first try and its retries) before it gives up; None: no limit
    #: declared (retrying until the service is back is then a fair policy).
    #: Declared, it is checked by ``progress`` under a persistent outage.
    retry_limit: int | None = Field(default=None, ge=1)
    #: memory the runs consult, where planted records are aimed (the memory
    #: family). None declared: the records the fault-free run's contexts
    #: listed (the ``context`` capability) tell the namespaces it reads;
    #: neither, and the memory family does not run (the report says so).
    memory_targets: tuple[MemoryTarget, ...] = ()
    #: the trust floor its runs read memory at: the lowest trust (0.0 to
    #: 1.0, the scale of a planted record's ``trust``) a record may have and
    #: still reach one of its contexts. One number for every namespace the
    #: runs read, or one per namespace (a template, as in ``memory_targets``:
    #: ``{"policy": 1.0, "notes/{user}": 0.0}``). Declared, ``memory_safety``
    #: fails a context that lists a planted record whose trust is below it;
    #: None: no floor declared, and none is judged.
    memory_floor: float | dict[str, float] | None = None
    #: the longest its runs wait (for a decision, an event, a child's answer)
    #: from the moment they start waiting: the deadline a waiting run reports
    #: (``RunView.wake_at``) is never further than this from the harness's
    #: clock. Declared, ``progress`` fails a wait whose deadline is further
    #: out: a deadline taken from another clock (wall time where the runtime
    #: runs on the harness's) or in other units (milliseconds for seconds),
    #: which would keep a run waiting long after it should have timed out.
    #: None: not declared, not judged.
    max_wait_seconds: float | None = Field(default=None, gt=0)

    @field_validator("memory_floor", mode="before")
    @classmethod
    def check_memory_floor(cls, v: Any) -> float | dict[str, float] | None:
        """``v`` as a ``memory_floor``; ValueError saying what is wrong and
        what to give instead."""
        if v is None:
            return None
        if not isinstance(v, Mapping):
            return _trust(v, "memory_floor")
        if not v:
            raise ValueError(
                "memory_floor is an empty mapping: name a namespace and its floor "
                '({"policy": 1.0}), or leave memory_floor None to declare none'
            )
        out: dict[str, float] = {}
        for namespace, floor in v.items():
            if not isinstance(namespace, str) or not namespace:
                raise ValueError(
                    f"memory_floor names namespace {namespace!r}: give a namespace "
                    'template, as "research/{topic}"'
                )
            try:
                _template(namespace)
            except ValueError as exc:
                raise ValueError(f"memory_floor: {exc}") from None
            out[namespace] = _trust(floor, f"memory_floor[{namespace!r}]")
        return out


class Declarations(_Frozen):
    """What a runtime promises, so checkers judge it by its own word."""

    #: effect kind ("service.action") -> "exactly_once" | "at_most_once" | "at_least_once"
    delivery: dict[str, str] = Field(default_factory=dict)
    #: legal transitions, raw status -> successors; None if the runtime has no table
    transitions: dict[str, list[str]] | None = None
    #: effect kinds that need an approval for their exact parameters
    needs_approval: dict[str, str] = Field(default_factory=dict)

    @field_validator("delivery")
    @classmethod
    def _known_promises(cls, value: dict[str, str]) -> dict[str, str]:
        """A promise the checkers do not know is refused where it is made:
        judged later, it would only make every run inconclusive."""
        known = ("exactly_once", "at_least_once", "at_most_once")
        for kind, promise in value.items():
            if promise not in known:
                close = promise.replace("-", "_").replace(" ", "_").lower()
                hint = f" (did you mean {close!r}?)" if close in known else ""
                raise ValueError(
                    f"the delivery of {kind!r} is {promise!r}, not one of {', '.join(known)}{hint}"
                )
        return value
