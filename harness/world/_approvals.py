"""The approvals authority and webhooks: how inbound messages reach a runtime.

A human approval arrives as a signed message. :class:`ApprovalAuthority`
holds one secret per tenant and signs each decision with HMAC-SHA256 over the
canonical JSON of its payload, so a runtime can tell a real decision from a
forged one (:meth:`ApprovalAuthority.forge` makes the latter, on purpose).
Webhook events are unsigned.

Message ids are deterministic (``<prefix>-000001``, ...) unless given, never
random, so the same scenario produces the same messages byte for byte.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from ._errors import WorldUsageError
from ._model import canonical_json

#: Decisions an approver can make (the reference runtime's ``Decision`` values).
DECISIONS = ("approved", "rejected")


def sign(key: bytes, payload: Mapping[str, Any]) -> str:
    """HMAC-SHA256 hex of :func:`canonical_json` of ``payload`` under ``key``."""
    return hmac.new(key, canonical_json(payload).encode(), hashlib.sha256).hexdigest()


class ApprovalAuthority:
    """Issues approval decisions signed with each tenant's secret.

    ``keys`` maps tenant -> secret (non-empty bytes). ``id_prefix`` names the
    message ids this authority makes up; give two authorities in one scenario
    different prefixes.
    """

    def __init__(self, keys: Mapping[str, bytes], *, id_prefix: str = "msg") -> None:
        for tenant, key in keys.items():
            if not isinstance(key, bytes) or not key:
                raise WorldUsageError(
                    f"the secret of tenant {tenant!r} must be non-empty bytes; got {key!r}"
                )
        self._keys = dict(keys)
        self._prefix = id_prefix
        self._issued = 0

    def decision(
        self,
        tenant: str,
        approval_id: str,
        run_id: str,
        decision: str,
        approver: str,
        role: str,
        params_hash: str,
        message_id: str | None = None,
        *,
        forged: bool = False,
    ) -> dict[str, Any]:
        """A signed ``approval_decision`` message, ready for a runtime's inbox:
        ``{message_id, tenant, run_id, kind, payload, signature}``.

        ``forged=True`` signs it with a wrong key (see :meth:`forge`).
        """
        payload = self._payload(tenant, approval_id, run_id, decision, approver, role, params_hash)
        key = self._key(tenant)
        if forged:
            key = b"forged:" + key
        return self._message(
            tenant, run_id, "approval_decision", payload, sign(key, payload), message_id
        )

    @property
    def tenants(self) -> tuple[str, ...]:
        """The tenants this authority holds a secret for, sorted."""
        return tuple(sorted(self._keys))

    def forge(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Like :meth:`decision` (same arguments), but signed with a wrong key:
        it must not verify.

        The forger knows the format, not the tenant's secret.
        """
        return self.decision(*args, **kwargs, forged=True)

    def verify(self, message: Mapping[str, Any]) -> bool:
        """True when ``message`` carries a valid signature of its payload by its
        tenant's secret. Uses a constant-time comparison."""
        tenant = message.get("tenant")
        signature = message.get("signature")
        payload = message.get("payload")
        if tenant not in self._keys or not isinstance(signature, str):
            return False
        if not isinstance(payload, Mapping) or payload.get("tenant") != tenant:
            return False
        return hmac.compare_digest(sign(self._keys[tenant], payload), signature)

    def webhook(
        self,
        tenant: str,
        run_id: str,
        event_key: str,
        data: Mapping[str, Any],
        message_id: str | None = None,
    ) -> dict[str, Any]:
        """An unsigned ``event`` message: ``payload = {event_key, data}``."""
        payload = {"event_key": event_key, "data": dict(data)}
        canonical_json(payload)  # refuse non-JSON data now, not in the runtime
        return self._message(tenant, run_id, "event", payload, None, message_id)

    def _key(self, tenant: str) -> bytes:
        key = self._keys.get(tenant)
        if key is None:
            raise WorldUsageError(
                f"no secret for tenant {tenant!r}; this authority knows "
                f"{', '.join(sorted(self._keys)) or 'no tenant'}"
            )
        return key

    @staticmethod
    def _payload(
        tenant: str,
        approval_id: str,
        run_id: str,
        decision: str,
        approver: str,
        role: str,
        params_hash: str,
    ) -> dict[str, Any]:
        if decision not in DECISIONS:
            raise WorldUsageError(
                f"decision must be one of {', '.join(DECISIONS)}; got {decision!r}"
            )
        # The tenant and run are inside the signed payload so that a decision
        # cannot be replayed onto another tenant's or run's approval.
        return {
            "approval_id": approval_id,
            "approver": approver,
            "decision": decision,
            "params_hash": params_hash,
            "role": role,
            "run_id": run_id,
            "tenant": tenant,
        }

    def _message(
        self,
        tenant: str,
        run_id: str,
        kind: str,
        payload: dict[str, Any],
        signature: str | None,
        message_id: str | None,
    ) -> dict[str, Any]:
        if message_id is None:
            self._issued += 1
            message_id = f"{self._prefix}-{self._issued:06d}"
        return {
            "message_id": message_id,
            "tenant": tenant,
            "run_id": run_id,
            "kind": kind,
            "payload": payload,
            "signature": signature,
        }
