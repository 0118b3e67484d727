"""Approval messages: signed decisions, and each refused variant."""

from __future__ import annotations

from typing import Any

from ...world import ApprovalAuthority

# -- approval messages ------------------------------------------------------------

#: appended to the expected role to name one that sorts above it (a deputy,
#: who does not hold the role)
_ABOVE = "-deputy"


def wrong_roles(role: str) -> tuple[str, str]:
    """Two roles no approver of ``role`` holds, one sorting below it and one
    above: what ``wrong_role`` and ``wrong_role_above`` decisions claim.

    Derived from ``role``, so they work whatever a runtime names its roles:
    below is ``role`` without its last character (a proper prefix; for a
    one-character role, the character before it), above is ``role`` with
    ``-deputy`` appended (a proper extension). A runtime that compares
    roles by order, or by prefix or containment, instead of equality takes
    one of the two; a single wrong role would show only one side.
    """
    if role <= "\x00":
        raise ValueError(f"no role sorts below the expected role {role!r}")
    # not the empty prefix of a one-character role: a message without a
    # role reads as malformed, not as signed by the wrong role
    below = role[:-1] if len(role) > 1 else chr(ord(role) - 1)
    return below, role + _ABOVE


#: the parameters hash a ``wrong_params`` decision carries (no request hashes to it)
WRONG_PARAMS = "0" * 64


def signed_decision(
    authority: ApprovalAuthority,
    variant: str,
    *,
    tenant: str,
    run_id: str,
    approval_id: str,
    decision: str,
    role: str,
    params_hash: str,
    message_id: str,
    approver: str = "alice",
) -> dict[str, Any]:
    """The decision message for ``approval_message()`` to return: ``{message_id,
    tenant, run_id, kind: "approval_decision", payload, signature}``, signed
    by ``authority`` (an :class:`~harness.world.ApprovalAuthority` holding
    the tenants' keys, the same your runtime verifies with) for the approval
    a run waits on.

    ``variant`` is what the harness asks for: ``valid`` and ``duplicate`` (a
    genuine decision; the harness sends the copy), ``forged`` (signed with a
    wrong key: it must not verify), ``wrong_role`` and ``wrong_role_above``
    (signed, by a role no approver holds, sorting below and above ``role``:
    :func:`wrong_roles`; the harness sends both for a ``wrong_role`` step),
    ``wrong_params`` (signed, for other parameters: :data:`WRONG_PARAMS`),
    ``cross_tenant`` (genuinely signed, with the right role and parameters,
    by another tenant's approver with that tenant's own key:
    :func:`other_tenant`). Your runtime must act only on a valid one;
    ``approval_integrity`` holds what it records against the genuine
    decisions."""
    if variant not in (
        "valid",
        "duplicate",
        "forged",
        "wrong_role",
        "wrong_role_above",
        "wrong_params",
        "cross_tenant",
    ):
        raise ValueError(f"unknown decision variant {variant!r}")
    fields: dict[str, Any] = {
        "tenant": other_tenant(authority, tenant) if variant == "cross_tenant" else tenant,
        "approval_id": approval_id,
        "run_id": run_id,
        "decision": decision,
        "approver": approver,
        "role": _claimed_role(variant, role),
        "params_hash": WRONG_PARAMS if variant == "wrong_params" else params_hash,
        "message_id": message_id,
    }
    if variant == "forged":
        return authority.forge(**fields)
    return authority.decision(**fields)


def _claimed_role(variant: str, role: str) -> str:
    if variant == "wrong_role":
        return wrong_roles(role)[0]
    if variant == "wrong_role_above":
        return wrong_roles(role)[1]
    return role


def other_tenant(authority: ApprovalAuthority, tenant: str) -> str:
    """A tenant other than ``tenant`` that ``authority`` signs for: who sends
    a ``cross_tenant`` message. Raises ValueError if it knows no other."""
    others = [t for t in authority.tenants if t != tenant]
    if not others:
        raise ValueError(
            f"the approvals authority knows no tenant but {tenant!r}: give it a second "
            "tenant's key to send cross-tenant messages"
        )
    return others[0]
