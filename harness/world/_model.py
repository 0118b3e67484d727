"""Value objects of the world: who calls, what comes back, what is recorded.

All of them are frozen. The records (:class:`RequestRecord`,
:class:`FiredFault`) round-trip through :meth:`to_dict` / ``from_dict`` with a
type tag and a schema version, so a history file can carry them and a checker
can read them back without talking to the world.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, get_args

from ..vocabulary import MODEL_FAULT_MODES as _MODEL_MODES
from ._errors import WorldUsageError

#: Version of the record dictionaries written by :meth:`RequestRecord.to_dict`
#: and :meth:`FiredFault.to_dict` (and of the SQLite schema).
SCHEMA_VERSION = 1

Outcome = Literal[
    "applied",
    "deduplicated",
    "rejected",
    "unknown_applied",
    "unknown_not_applied",
    "killed_before_apply",
    "killed_after_apply",
]
OUTCOMES: tuple[str, ...] = get_args(Outcome)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the input of every hash and HMAC.

    Raises :class:`WorldUsageError` for a value JSON cannot represent, because a
    request the world cannot store exactly cannot be compared or replayed.
    """
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise WorldUsageError(
            f"value is not plain JSON ({exc}); requests and payloads must contain only "
            "dict/list/str/int/float/bool/None with string keys"
        ) from exc


def request_hash(request: Mapping[str, Any]) -> str:
    """sha256 hex of :func:`canonical_json` of ``request``."""
    return hashlib.sha256(canonical_json(request).encode()).hexdigest()


class CallerLike(Protocol):
    """Anything that says who calls; :class:`Caller` or the reference runtime's
    ``CallContext`` both fit."""

    @property
    def tenant(self) -> str: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def op_id(self) -> str | None: ...
    @property
    def worker_id(self) -> str | None: ...
    @property
    def fencing_token(self) -> int | None: ...


@dataclass(frozen=True)
class Caller:
    """Who is calling. Every field is copied into the request's record so that a
    checker can attribute each effect to a run, an operation and a worker."""

    tenant: str
    run_id: str | None = None
    op_id: str | None = None
    worker_id: str | None = None
    fencing_token: int | None = None


@dataclass(frozen=True)
class Response:
    """A service's answer to a request it processed.

    ``deduplicated`` is True when the service recognised a repeated idempotency
    key and returned the first answer without applying again. ``body`` is a
    fresh dict per response; mutating it changes nothing in the world.
    """

    external_ref: str
    body: dict[str, Any] = field(default_factory=dict)
    deduplicated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored in the world's records."""
        return {
            "external_ref": self.external_ref,
            "body": self.body,
            "deduplicated": self.deduplicated,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Response:
        return cls(str(data["external_ref"]), dict(data["body"]), bool(data["deduplicated"]))


@dataclass(frozen=True)
class Capabilities:
    """What a service offers for deduplication and reconciliation."""

    idempotency_keys: bool
    lookup_by_key: bool
    lookup_by_business_key: bool
    side_effect: bool = True


@dataclass(frozen=True)
class RequestRecord:
    """One request as the world saw it. Written durably before the caller learns
    anything, so it survives the kill of the caller.

    ``outcome`` says what happened to the request; ``applied`` is the effect bit:
    True only when this request changed the world (a new charge, account, email).
    A deduplicated repeat, a read-only call (``identity``, lookups) and a request
    that was rejected or killed before applying all have ``applied=False``.
    For the after-apply faults (``unknown_applied``, ``killed_after_apply``) the
    service processed the request normally first, so ``applied`` is False when
    that processing deduplicated it or rejected a reused key (``error`` says so).
    """

    seq: int
    service: str
    action: str
    tenant: str
    run_id: str | None
    op_id: str | None
    worker_id: str | None
    fencing_token: int | None
    idempotency_key: str | None
    business_key: str | None
    request: dict[str, Any]
    request_hash: str
    outcome: Outcome
    applied: bool
    deduplicated: bool
    external_ref: str | None
    response: dict[str, Any] | None
    error: str | None
    rule_id: int | None
    pid: int
    at: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with a type tag and schema version."""
        return {"type": "world.request", "schema_version": SCHEMA_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestRecord:
        """Inverse of :meth:`to_dict`; refuses another type or a newer schema."""
        fields = _untag(data, "world.request")
        return cls(**fields)


FaultMode = Literal[
    "reject",
    "unavailable",
    "timeout_before_apply",
    "apply_then_timeout",
    "slow",
    "kill_before_apply",
    "kill_after_apply",
    "reply_missing_ref",
    "stop_after_apply",
]
FAULT_MODES: tuple[str, ...] = get_args(FaultMode)

#: The ``service`` of a rule aimed at the world's model endpoint
#: (``POST /v1/chat/completions``, ``POST /v1/responses``) instead of a service.
MODEL = "model"
#: a model fault's mode: one of :data:`MODEL_FAULT_MODES`
ModelFaultMode = str
#: What the model endpoint can do wrong, in shrink order (simplest first):
#: the ``model`` fault family's variants. The first four hit the transport
#: (a client retries them: nothing was decided); the last four change what
#: the model decided.
MODEL_FAULT_MODES: tuple[str, ...] = _MODEL_MODES
#: The modes that change the model's decision (the rest lose or refuse the reply).
MODEL_CONTENT_MODES: tuple[str, ...] = MODEL_FAULT_MODES[4:]
#: The ``action`` of a model rule: the nth reply that calls a tool, or the
#: nth that answers in text (None: the nth call, whatever it answers).
MODEL_REPLIES: tuple[str, ...] = ("tool_call", "answer")

#: The ``action`` of a rule that fires on a service's lookups (the calls a
#: runtime reconciles with), not on its effects.
LOOKUP = "lookup"
#: The modes a lookup rule may have: the service refuses to answer, or the
#: answer is lost. Nothing is applied by a lookup, so the modes that apply
#: or kill around applying mean nothing for it.
LOOKUP_FAULT_MODES: tuple[str, ...] = ("reject", "timeout_before_apply")

#: Upper bound of a ``slow`` rule's delay, in seconds. A fault that sleeps
#: longer only makes test suites slow; time-based behaviour belongs to the
#: virtual clock, not to sleeps.
MAX_SLOW_DELAY = 5.0


@dataclass(frozen=True)
class FaultRule:
    """Fire ``mode`` on the ``nth`` call to ``service`` (and ``action``, if given).

    ``nth`` counts calls across all processes, durably, from 1; lookups are not
    counted (but see :data:`LOOKUP` below). A rule fires at most once. Modes:

    * ``reject`` -- raise :class:`Rejected`; nothing is applied;
    * ``unavailable`` -- as ``reject`` (nothing applied, :class:`Rejected`
      raised), but the service is down rather than refusing this request:
      one rule per call of an outage, so a persistent outage is several
      rules on consecutive calls, and a history can tell the runs an outage
      touched (whose giving up is legitimate) from those a single
      rejection hit;
    * ``timeout_before_apply`` -- raise :class:`Unknown`; nothing is applied;
    * ``apply_then_timeout`` -- process and commit the request, then raise
      :class:`Unknown`;
    * ``slow`` -- sleep ``delay`` seconds (at most :data:`MAX_SLOW_DELAY`),
      then proceed normally. The world is not locked during the sleep, so
      calls other processes make meanwhile are processed first (a reordering);
      a caller killed while it sleeps leaves a fired rule with no request;
    * ``kill_before_apply`` -- record the fault, then SIGKILL the calling process;
    * ``kill_after_apply`` -- process and commit the request, record the fault,
      then SIGKILL the calling process before it sees the response;
    * ``reply_missing_ref`` -- process and commit the request, then answer
      success with a reply that lacks the reference: every field of the
      body that carries it left out (the world's record keeps the whole
      reply, so a repeat it deduplicates gets it whole), and ``external_ref``
      empty for a Python caller. An app must not record an effect it cannot
      prove: it asks again (under its key), looks it up, or parks the run;
    * ``stop_after_apply`` -- process and commit the request, record the
      fault, then SIGSTOP the calling process before it sees the response:
      the harness acts on the held caller (the network family's
      ``partition_after_apply`` cuts it off from its runtime's server) and
      continues it, and it gets the response as if nothing had happened.
      Not a fault by itself: the step that arms it says what it was for.

    ``action`` :data:`LOOKUP` aims the rule at the service's lookups instead
    (a runtime reconciling an effect in doubt asks whether it was applied):
    they are counted on their own, never by a service-wide rule, and only
    the :data:`LOOKUP_FAULT_MODES` apply -- ``reject`` (the service refuses
    to answer: :class:`Rejected`) and ``timeout_before_apply`` (the answer
    is lost: :class:`Unknown`). A service without lookups has no such rule.

    ``service`` :data:`MODEL` aims the rule at the world's model endpoint:
    its ``mode`` is one of :data:`MODEL_FAULT_MODES` (see
    ``harness.world._chat``), ``action`` None (the ``nth`` model call) or
    one of :data:`MODEL_REPLIES` (the ``nth`` reply that calls a tool, or
    that answers in text).

    Invalid rules are refused here, when built, not when they would fire.
    """

    service: str
    nth: int
    mode: FaultMode | ModelFaultMode
    action: str | None = None
    delay: float = 0.0

    def __post_init__(self) -> None:
        if self.service == MODEL:
            self._check_model()
            return
        if self.mode not in FAULT_MODES:
            raise WorldUsageError(
                f"unknown fault mode {self.mode!r}; choose one of {', '.join(FAULT_MODES)}"
            )
        if self.action == LOOKUP and self.mode not in LOOKUP_FAULT_MODES:
            raise WorldUsageError(
                f"a lookup rule's mode is one of {', '.join(LOOKUP_FAULT_MODES)}, not "
                f"{self.mode!r}: a lookup applies nothing"
            )
        if isinstance(self.nth, bool) or not isinstance(self.nth, int) or self.nth < 1:
            raise WorldUsageError(f"nth counts calls from 1; got {self.nth!r}")
        if self.mode == "slow":
            if not 0.0 <= self.delay <= MAX_SLOW_DELAY:
                raise WorldUsageError(
                    f"slow delay must be within 0..{MAX_SLOW_DELAY} s; got {self.delay!r}"
                )
        elif self.delay:
            raise WorldUsageError(
                f"delay={self.delay!r} only means something with mode='slow', not {self.mode!r}"
            )

    def _check_model(self) -> None:
        """A rule at the model endpoint: one of :data:`MODEL_FAULT_MODES`,
        aimed at the nth call, or the nth reply of one of :data:`MODEL_REPLIES`."""
        if self.mode not in MODEL_FAULT_MODES:
            raise WorldUsageError(
                f"unknown model fault mode {self.mode!r}; choose one of "
                f"{', '.join(MODEL_FAULT_MODES)}"
            )
        if self.action is not None and self.action not in MODEL_REPLIES:
            raise WorldUsageError(
                f"a model rule's action is one of {', '.join(MODEL_REPLIES)} (the nth reply of "
                f"that kind) or None (the nth call); got {self.action!r}"
            )
        if isinstance(self.nth, bool) or not isinstance(self.nth, int) or self.nth < 1:
            raise WorldUsageError(f"nth counts calls from 1; got {self.nth!r}")
        if self.delay:
            raise WorldUsageError(f"a model fault has no delay; got {self.delay!r}")


@dataclass(frozen=True)
class FiredFault:
    """A rule that fired: which call it hit and in which process.

    ``request_seq`` is the request's record, or None when the caller died
    before the request was recorded (killed while a ``slow`` rule slept) or
    the rule was a model fault (the model call's record names its rule).
    """

    rule_id: int
    service: str
    action: str
    nth: int
    mode: FaultMode | ModelFaultMode
    delay: float
    request_seq: int | None
    tenant: str
    run_id: str | None
    worker_id: str | None
    pid: int
    at: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with a type tag and schema version."""
        return {"type": "world.fired", "schema_version": SCHEMA_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FiredFault:
        """Inverse of :meth:`to_dict`; refuses another type or a newer schema."""
        return cls(**_untag(data, "world.fired"))


@dataclass(frozen=True)
class ServiceCounts:
    """Per-service totals in :meth:`World.summary`.

    ``applied`` counts effects (requests with ``applied=True``), so it includes
    the after-apply faults; ``unknown`` and ``killed`` count outcomes whatever
    their effect bit.
    """

    calls: int = 0
    applied: int = 0
    deduplicated: int = 0
    rejected: int = 0
    unknown: int = 0
    killed: int = 0


def _untag(data: Mapping[str, Any], kind: str) -> dict[str, Any]:
    fields = dict(data)
    found_type = fields.pop("type", None)
    version = fields.pop("schema_version", None)
    if found_type != kind:
        raise WorldUsageError(f"expected a {kind!r} record, got type {found_type!r}")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise WorldUsageError(
            f"{kind} record has schema_version {version!r}; this code reads up to "
            f"{SCHEMA_VERSION}. Upgrade the harness to read it."
        )
    return fields
