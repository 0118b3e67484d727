"""What the runtime accepts from a caller: names, JSON values and workflow inputs.

Checked once, at the public boundary (:meth:`Runtime.submit`,
:meth:`Runtime.deliver`, the command line), so that nothing deeper -- the
store's JSON encoding, a database driver, a workflow's policy -- ever meets a
value it cannot handle. A value refused here raises
:class:`~reference_runtime.MalformedEventError` (an :class:`InputError`)
naming the value, the rule and the limit; nothing is written.

Why each limit exists:

* **Depth** (:data:`MAX_DEPTH`): JSON nested past a few hundred levels
  overflows the decoder's and the serializer's recursion; no workflow input
  needs more than a handful.
* **Size** (:data:`MAX_BYTES`): every input and message is stored, copied into
  every checkpoint and shown to the model; a megabyte is generous.
* **Text**: a NUL character is refused by PostgreSQL (text and JSONB alike),
  and a lone surrogate (what Python makes of bytes that are not UTF-8, e.g. a
  Latin-1 command-line argument) cannot be encoded at all. Both are refused
  on every backend, so a run that works on SQLite works on Postgres.
* **Numbers**: NaN and infinities are not JSON; integers must fit in 64 bits
  (what both databases and most JSON readers hold exactly).
* **Workflow fields** (:data:`INPUT_MODELS`): an amount is a positive integer
  number of cents, a currency a three-letter code, and so on. A field of the
  wrong type used to be accepted and then fail inside a worker, where the
  failure looked transient and was retried forever.
"""

from __future__ import annotations

import json
import math
import unicodedata
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from ._errors import MalformedEventError

__all__ = [
    "INPUT_MODELS",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NAME",
    "check_json",
    "check_name",
    "check_workflow_input",
    "scan_depth",
]

#: How deep a JSON value (input, message) may nest: ``{"a": [1]}`` is depth 2.
MAX_DEPTH = 32
#: How large a JSON value may be, encoded as UTF-8.
MAX_BYTES = 1_000_000
#: Longest tenant, run id, actor or other name, in characters.
MAX_NAME = 200
#: Largest amount, in cents (ten billion in the currency's units).
MAX_CENTS = 10**12
_INT64 = 2**63


def _text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text on every backend, or None."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 text (it holds bytes of another encoding)"
    if "\x00" in value:
        return "contains a NUL character, which PostgreSQL cannot store"
    return None


def check_name(value: object, what: str, *, max_len: int = MAX_NAME) -> str:
    """``value`` if it is usable as a tenant, run id or similar name: a
    non-empty string of at most ``max_len`` printable characters."""
    if not isinstance(value, str) or not value:
        raise MalformedEventError(f"{what} must be a non-empty string, got {value!r:.60}")
    problem = _text_problem(value)
    if problem is None and len(value) > max_len:
        problem = f"is {len(value)} characters long; the limit is {max_len}"
    if problem is None and any(unicodedata.category(c) == "Cc" for c in value):
        problem = "contains control characters (a newline, tab, escape, ...)"
    if problem:
        raise MalformedEventError(f"{what} {value!r:.60} {problem}; use plain text")
    return value


def scan_depth(text: str, limit: int = MAX_DEPTH) -> int:
    """How deep the JSON document ``text`` nests, stopping past ``limit``.

    A linear scan of brackets outside strings, run *before* decoding: the
    decoder itself dies of recursion on deep input (a RecursionError, not a
    JSONDecodeError). Malformed text is left for the decoder to describe.
    """
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def check_json(value: Any, what: str) -> None:
    """Refuse ``value`` unless it is plain JSON within the limits above.

    Walks the value without recursion (a deep value must not crash the check
    meant to refuse it), then measures its encoded size.
    """
    stack: list[tuple[Any, int, str]] = [(value, 1, what)]
    while stack:
        item, depth, where = stack.pop()
        problem: str | None = None
        if isinstance(item, dict | list) and depth > MAX_DEPTH:
            problem = f"nests deeper than {MAX_DEPTH} levels (the limit)"
        elif isinstance(item, dict):
            for key, sub in item.items():
                if not isinstance(key, str):
                    problem = f"has a key {key!r:.40} that is not a string"
                    break
                key_problem = _text_problem(key)
                if key_problem:
                    problem = f"has a key {key!r:.40} that {key_problem}"
                    break
                stack.append((sub, depth + 1, f"{where}.{key}"))
        elif isinstance(item, list):
            stack.extend((sub, depth + 1, f"{where}[{i}]") for i, sub in enumerate(item))
        elif isinstance(item, str):
            text_problem = _text_problem(item)
            problem = f"{text_problem}: {item!r:.40}" if text_problem else None
        elif isinstance(item, bool) or item is None:
            pass
        elif isinstance(item, int):
            if not -_INT64 <= item < _INT64:
                problem = "is an integer that does not fit in 64 bits"
        elif isinstance(item, float):
            if not math.isfinite(item):
                problem = f"is {item}, which is not a JSON number"
        else:
            problem = f"is a {type(item).__name__}, which is not a JSON value"
        if problem:
            raise MalformedEventError(f"{where} {problem}; nothing was written")
    size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    if size > MAX_BYTES:
        raise MalformedEventError(
            f"{what} is {size:,} bytes as JSON; the limit is {MAX_BYTES:,}; nothing was written"
        )


# -- workflow inputs ----------------------------------------------------------

Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME)]
Cents = Annotated[int, Field(gt=0, le=MAX_CENTS)]
Currency = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
#: a duration in seconds: positive, finite, at most ten years
Seconds = Annotated[float, Field(gt=0, le=10 * 366 * 86400, allow_inf_nan=False)]


class _Input(BaseModel):
    # strict: "5" is not 5, 5.0 is not 5, true is not 1. Unknown fields are
    # allowed (callers pass context a workflow ignores); they were checked by
    # check_json already.
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


class RefundV1(_Input):
    customer_id: Name
    amount: Cents
    approval_ttl: Seconds = 3600.0


class RefundV2(_Input):
    customer_id: Name
    amount_cents: Cents
    currency: Currency
    approval_ttl: Seconds = 3600.0


class Onboarding(_Input):
    customer_id: Name
    plan: Name = "standard"
    name: Name = ""


class Research(_Input):
    topic: Name
    sources: Annotated[int, Field(ge=0, le=100)] = 3
    requester: Name = "requester"


class Procurement(_Input):
    item: Name
    quantity: Annotated[int, Field(gt=0, le=1_000_000)]
    deadline: Seconds = 3600.0
    vendor: Name = "acme"


class VendorQuote(_Input):
    item: Name
    quantity: Annotated[int, Field(gt=0, le=1_000_000)]


#: (workflow, payload version) -> the model its input must satisfy
INPUT_MODELS: dict[tuple[str, int], type[_Input]] = {
    ("refund", 1): RefundV1,
    ("refund", 2): RefundV2,
    ("onboarding", 1): Onboarding,
    ("research", 1): Research,
    ("procurement", 1): Procurement,
    ("vendor_quote", 1): VendorQuote,
}


def check_workflow_input(workflow: str, version: int, payload: dict[str, Any]) -> None:
    """Refuse ``payload`` unless it satisfies the workflow's input model
    (missing fields are reported by the caller, with the list of required ones)."""
    model = INPUT_MODELS.get((workflow, version))
    if model is None:
        return
    try:
        model.model_validate(payload)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg'].lower()}, got {e['input']!r:.40}"
            for e in exc.errors()
        )
        raise MalformedEventError(
            f"input for workflow {workflow!r} (payload v{version}) refused: {problems}; "
            "nothing was written"
        ) from None
