"""Warm the reference runtime's serialization paths in the fork server.

Preloaded by the fork server of the reference deployments (see
``_spawning.PRELOAD``): importing it runs, once, what every worker does
with its records -- validate a record's JSON, copy it with changes, dump it
as JSON and as JSON-able Python, hash a canonical dump -- on sample records
built here, so that the lazy first-use work of pydantic's validators and
serializers, the JSON encoder and OpenSSL's SHA-256 is done before the
server forks, not again in every worker (each forked worker repeated it:
about a third of a millisecond of CPU and a hundred page faults to build
and log one model context; measured with ``benchmarks/worker_profile.py``).

It touches no file, connection or thread, and no state of the runtime that
decides anything (crash points, registries, clocks): only pydantic's,
``json``'s and ``hashlib``'s own caches, which change no result.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

from reference_runtime._model import ApprovalView, MemoryFact, ModelContext
from reference_runtime._records import (
    Approval,
    ArtifactRef,
    AuditEvent,
    InboxMessage,
    MemoryRecord,
    Operation,
    Provenance,
    Run,
    WorkingState,
    canonical_json,
)
from reference_runtime._states import RunStatus

_T = 1_700_000_000.0


def _samples() -> list[Any]:
    """One record of each kind a worker reads or writes."""
    common: dict[str, Any] = {"tenant": "warm", "created_at": _T, "updated_at": _T}
    return [
        Run(
            **common,
            run_id="r",
            workflow="w",
            definition_version=1,
            status=RunStatus.RUNNING,
            current_step="s",
            wake_at=_T,
            lease_owner="w1",
            lease_expiry=_T,
            fencing_token=1,
        ),
        WorkingState(**common, run_id="r", workflow="w", payload_version=1, payload={"k": [1]}),
        Operation(
            **common,
            op_id="r/s",
            run_id="r",
            step="s",
            kind="svc.act",
            idempotency_key="k",
            request_hash="h",
            request={"a": 1},
            status="confirmed",
            delivery="exactly_once",
            response={"b": 2},
        ),
        Approval(
            **common,
            approval_id="a",
            run_id="r",
            action="act",
            params={"p": 1.5},
            params_hash="h",
            resource="res",
            scope="sc",
            requester="u",
            approver_role="role",
            expires_at=_T,
            policy_version=1,
        ),
        MemoryRecord(
            **common,
            memory_id="m",
            namespace="n",
            key="k",
            value={"v": "x"},
            provenance=Provenance.TOOL_OUTPUT,
            trust=0.5,
            derived_from=("m0",),
        ),
        AuditEvent(
            **common,
            run_id="r",
            at=_T,
            actor="w1",
            action="transition",
            from_status=RunStatus.CREATED,
            to_status=RunStatus.RUNNING,
            state_version=1,
            detail={"step": "s"},
        ),
        InboxMessage(
            **common,
            message_id="i",
            run_id="r",
            kind="event",
            payload={"e": True},
            received_at=_T,
        ),
        ArtifactRef(**common, uri="u", sha256="0" * 64, owner="r"),
    ]


def _context(memory: MemoryRecord) -> ModelContext:
    fact = MemoryFact(
        memory_id=memory.memory_id,
        namespace=memory.namespace,
        key=memory.key,
        value=memory.value,
        version=memory.version,
        provenance=memory.provenance,
        trust=memory.trust,
    )
    return ModelContext(
        run_id="r",
        tenant="warm",
        workflow="w",
        definition_version=1,
        payload_version=1,
        step="s",
        attempt=0,
        variables={"v": 1},
        tool_results={"s": {"external_ref": "x"}},
        approvals=(
            ApprovalView(
                approval_id="a", action="act", params_hash="h", decision="approved", approver="u"
            ),
        ),
        memory=(fact,),
        events={},
    )


def warm() -> None:
    """Run each record kind's round trip once (and a model context's log line).

    Best effort: a warm-up is no part of what a worker does, so a sample
    that the runtime's records refuse (a record changed under this module,
    a mutant of the runtime under test) must not stop the fork server from
    starting; the workers then pay the first use themselves, as before."""
    with contextlib.suppress(Exception):
        _round_trips()


def _round_trips() -> None:
    records = _samples()
    for record in records:
        again = type(record).model_validate_json(record.model_dump_json())
        again.model_copy(update={"updated_at": _T + 1}).model_dump_json()
        record.model_dump(mode="json")
    memory = next(r for r in records if isinstance(r, MemoryRecord))
    ctx = _context(memory)
    line = {"fingerprint": ctx.fingerprint(), "context": ctx.model_dump(mode="json")}
    json.loads(json.dumps(line, sort_keys=True))
    hashlib.sha256(canonical_json(line).encode()).hexdigest()


warm()
