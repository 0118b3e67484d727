"""Authenticated approval decisions.

A decision arrives as an inbound message whose payload is signed with
HMAC-SHA256 under the tenant's key (hex digest over the canonical JSON of the
payload). :func:`verify_decision` checks the signature, the approver's role
against the policy, and that the decision is for this exact approval; whether
it still *authorizes* the action (same parameters, not expired) is checked again
right before the effect by :func:`authorizes`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from ._errors import ForgedApprovalError, MalformedEventError
from ._records import Approval, Decision, InboxMessage, canonical_json

#: The policy version this code enforces; stored on every approval it creates.
POLICY_VERSION = 1


def sign(payload: Mapping[str, object], key: bytes) -> str:
    """The signature an approvals authority attaches to ``payload``."""
    return hmac.new(key, canonical_json(dict(payload)).encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class VerifiedDecision:
    approval_id: str
    decision: Decision
    approver: str
    role: str
    params_hash: str


def verify_decision(
    message: InboxMessage, approval: Approval, tenant_keys: Mapping[str, bytes]
) -> VerifiedDecision:
    """Authenticate a decision message for ``approval``.

    Raises ForgedApprovalError (bad or missing signature, unknown tenant key,
    wrong role) or MalformedEventError (missing fields, other approval).
    """
    p = message.payload
    try:
        approval_id = str(p["approval_id"])
        decision = Decision(str(p["decision"]))
        approver = str(p["approver"])
        role = str(p["role"])
        params_hash = str(p["params_hash"])
    except (KeyError, ValueError) as exc:
        raise MalformedEventError(
            f"approval decision {message.message_id!r} lacks or mangles a field ({exc}); "
            "it needs approval_id, decision (approved|rejected), approver, role, params_hash"
        ) from exc
    if decision is Decision.PENDING:
        raise MalformedEventError(f"approval decision {message.message_id!r} decides nothing")
    key = tenant_keys.get(message.tenant)
    if key is None:
        raise ForgedApprovalError(
            f"no approval key is configured for tenant {message.tenant!r}; "
            "configure it with --tenant-key TENANT=HEX (or RR_TENANT_KEYS)"
        )
    expected = sign(p, key)
    if not message.signature or not hmac.compare_digest(expected, message.signature):
        raise ForgedApprovalError(
            f"approval decision {message.message_id!r} for {approval_id!r} has an invalid "
            "signature: it was not signed with tenant "
            f"{message.tenant!r}'s key and is ignored"
        )
    if message.tenant != approval.tenant or approval_id != approval.approval_id:
        raise MalformedEventError(
            f"decision {message.message_id!r} is for approval {approval_id!r} of tenant "
            f"{message.tenant!r}, but run {approval.run_id!r} waits on "
            f"{approval.approval_id!r} of tenant {approval.tenant!r}"
        )
    if role != approval.approver_role:
        raise ForgedApprovalError(
            f"approver {approver!r} has role {role!r}; the policy (v{approval.policy_version}) "
            f"requires role {approval.approver_role!r} for {approval.action}"
        )
    return VerifiedDecision(approval_id, decision, approver, role, params_hash)


def authorizes(approval: Approval | None, action: str, params_hash: str, now: float) -> str | None:
    """None if ``approval`` authorizes ``action`` with these parameters at ``now``;
    otherwise the reason it does not."""
    if approval is None:
        return "no approval record"
    if approval.decision is not Decision.APPROVED:
        return f"approval {approval.approval_id} is {approval.decision.value}"
    if approval.action != action:
        return f"approval is for {approval.action}, not {action}"
    if approval.params_hash != params_hash:
        return "approval was given for other parameters"
    # ``expires_at`` is the first instant the approval no longer counts (as
    # for memory's ``expires_at``). The wait wakes at exactly that instant;
    # were the approval still valid then, the woken worker would find nothing
    # to do and the still-runnable run would be claimed again and again.
    if is_expired(approval, now):
        return f"approval expired at {approval.expires_at}"
    return None


def is_expired(approval: Approval, now: float) -> bool:
    """True from ``approval.expires_at`` on (the bound itself is expired)."""
    return now >= approval.expires_at
