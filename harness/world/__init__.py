"""The world: simulated external services, and the one place effects are counted.

Runtimes under test reach payments, provisioning, email and identity through a
:class:`WorldClient`. Every request is recorded durably in one SQLite file per
world before the caller learns its outcome, so the records survive the SIGKILL
of any worker, and exactly-once is judged from :meth:`World.effects`, never
from the runtime's own records. Faults are armed by the controller as
:class:`FaultRule` objects and fired by counters, never by timing.

A five-line tour::

    world = World(tmp / "world.db").create()
    world.arm(FaultRule("payments", nth=1, mode="apply_then_timeout"))
    client = world.client()            # or open_world(path) in a worker process
    client.call("payments", "charge", {"amount": 5}, idempotency_key="k1",
                caller=Caller(tenant="t1", run_id="r1"))   # raises Unknown, but applied
    assert len(world.effects("payments")) == 1

Services are declarations (data: :class:`ServiceSpec`); the four built-in
ones are four of them, and a user declares more (:func:`load_services`,
:func:`declare_services`). An app that calls its providers over HTTP reaches
the same world, with the same semantics, through :meth:`World.serve_http`
(``harness.world._http``, the ``http`` extra), which can also answer as a
scripted model (:class:`ChatScript`) or replay a real one's replies
(:func:`load_cassette`, recorded once by a :class:`CassetteRecorder`).

This package imports nothing from the runtimes it tests.
"""

from __future__ import annotations

from ._approvals import DECISIONS, ApprovalAuthority, sign
from ._cassette import Cassette, CassetteRecorder, load_cassette
from ._chat import ChatScript, ModelSource, load_chat_script, parse_chat_script
from ._client import WorldClient
from ._declare import ServiceSpec, load_services
from ._errors import NotSupported, Rejected, ServiceFault, Unknown, WorldError, WorldUsageError
from ._faults import ArmedRule
from ._model import (
    FAULT_MODES,
    LOOKUP,
    LOOKUP_FAULT_MODES,
    MAX_SLOW_DELAY,
    MODEL,
    MODEL_CONTENT_MODES,
    MODEL_FAULT_MODES,
    MODEL_REPLIES,
    OUTCOMES,
    SCHEMA_VERSION,
    Caller,
    CallerLike,
    Capabilities,
    FaultMode,
    FaultRule,
    FiredFault,
    Outcome,
    RequestRecord,
    Response,
    ServiceCounts,
    canonical_json,
    request_hash,
)
from ._services import (
    SERVICES,
    ServiceKind,
    declare_services,
    service_catalogue,
    service_spec,
)
from ._world import ENV_WORLD_PATH, World, open_world

__all__ = [
    "DECISIONS",
    "ENV_WORLD_PATH",
    "FAULT_MODES",
    "LOOKUP",
    "LOOKUP_FAULT_MODES",
    "MAX_SLOW_DELAY",
    "MODEL",
    "MODEL_CONTENT_MODES",
    "MODEL_FAULT_MODES",
    "MODEL_REPLIES",
    "OUTCOMES",
    "SCHEMA_VERSION",
    "SERVICES",
    "ApprovalAuthority",
    "ArmedRule",
    "Caller",
    "CallerLike",
    "Capabilities",
    "Cassette",
    "CassetteRecorder",
    "ChatScript",
    "FaultMode",
    "FaultRule",
    "FiredFault",
    "ModelSource",
    "NotSupported",
    "Outcome",
    "Rejected",
    "RequestRecord",
    "Response",
    "ServiceCounts",
    "ServiceFault",
    "ServiceKind",
    "ServiceSpec",
    "Unknown",
    "World",
    "WorldClient",
    "WorldError",
    "WorldUsageError",
    "canonical_json",
    "declare_services",
    "load_cassette",
    "load_chat_script",
    "load_services",
    "open_world",
    "parse_chat_script",
    "request_hash",
    "service_catalogue",
    "service_spec",
    "sign",
]
