"""The model's view of a run, rebuilt from durable records only.

Nothing a worker holds in memory goes into a :class:`ModelContext`: a fresh
worker that continues a run after a crash shows the model exactly what the
crashed one would have. The ids derived here (idempotency key, operation id)
are stable across retries and workers for the same reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from .._model import ApprovalView, MemoryFact, ModelContext
from .._records import MemoryRecord, OperationStatus
from .._workflows import Definition
from ..store import Snapshot

OS = OperationStatus


def idempotency_key(tenant: str, run_id: str, step: str) -> str:
    """Stable across retries and workers: derived from durable ids only."""
    return hashlib.sha256(f"{tenant}/{run_id}/{step}".encode()).hexdigest()[:32]


def op_id_for(run_id: str, step: str) -> str:
    return f"{run_id}/{step}"


def build_context(
    snap: Snapshot,
    definition: Definition,
    payload: dict[str, Any],
    payload_version: int,
    read_memory: Callable[[str, float, float], list[MemoryRecord]],
    now: float,
) -> ModelContext:
    """The model's view of a run, rebuilt from durable records only."""
    run = snap.run
    variables = {k: v for k, v in payload.items() if not k.startswith("_")}
    tool_results: dict[str, Any] = {}
    for op in snap.operations:
        if op.status in (OS.CONFIRMED, OS.RECONCILED):
            tool_results[op.step] = {"external_ref": op.external_ref, **(op.response or {})}
    facts: list[MemoryFact] = []
    for template, min_trust in definition.memory:
        namespace = template.format(**variables)
        for rec in read_memory(namespace, min_trust, now):
            facts.append(
                MemoryFact(
                    memory_id=rec.memory_id,
                    namespace=rec.namespace,
                    key=rec.key,
                    value=rec.value,
                    version=rec.version,
                    provenance=rec.provenance,
                    trust=rec.trust,
                )
            )
    return ModelContext(
        run_id=run.run_id,
        tenant=run.tenant,
        workflow=run.workflow,
        definition_version=run.definition_version,
        payload_version=payload_version,
        step=run.current_step,
        attempt=run.attempt,
        variables=variables,
        tool_results=tool_results,
        approvals=tuple(
            ApprovalView(
                approval_id=a.approval_id,
                action=a.action,
                params_hash=a.params_hash,
                decision=a.decision.value,
                approver=a.approver,
            )
            for a in snap.approvals
        ),
        memory=tuple(sorted(facts, key=lambda f: (f.namespace, f.key))),
        events=dict(payload.get("_events", {})),
    )
