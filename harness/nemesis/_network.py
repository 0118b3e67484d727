"""Network faults on one worker's storage connection: a lost commit
acknowledgement, a reset between two statements.

The worker is paused at a crash point first (an event, never a time): right
before a checkpoint's COMMIT for a lost acknowledgement, between two of its
statements for a reset. The environment names the connection it was using
there (``network_endpoints``, the ``network_faults`` capability); the
kernel backend (:mod:`harness._netfilter`) acts on that connection alone;
the worker goes on; the fault heals once the worker has ended.

A fault that cannot be inflicted -- no iptables, not root, no connection
held at that point -- is recorded as armed and not fired, with the reason:
the report then shows the kind as never exercised, never as passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _netfilter
from ..adapters import Capability, Endpoint, WorkerHandle
from ..model import EventF, NetworkFault
from ._context import StepContext


def _endpoints(ctx: StepContext, handle: WorkerHandle) -> Sequence[Endpoint]:
    if Capability.NETWORK_FAULTS not in ctx.capabilities:
        return ()
    named = getattr(ctx.env, "network_endpoints", None)
    return () if named is None else tuple(named(handle))


def _rule(kind: str, ep: Endpoint) -> _netfilter.Rule:
    return _netfilter.Rule(
        "drop_to_client" if kind == "commit_ack_lost" else "reset_to_server",
        client_port=ep.local_port,
        server_port=ep.remote_port,
        client_host=ep.local_host,
        server_host=ep.remote_host,
    )


def network_fault(ctx: StepContext, step: NetworkFault) -> None:
    """Drop what the server sends the paused worker's connection (its next
    COMMIT commits, unacknowledged) or reset that connection, let the worker
    go on, wait for it to end, then heal."""
    value: dict[str, Any] = {"network": step.kind, "worker_id": step.worker_id}
    handle = ctx.paused.pop(step.worker_id, None)
    if handle is None:
        # Its pause never fired (the site was not reached): nothing to act on.
        ctx.recorder.record(
            "info", EventF.NOTE, "runner", {"text": f"{step.worker_id} is not paused"}
        )
        ctx.recorder.fault(step.kind, False, **value, reason="the worker is not paused")
        return
    reason = _netfilter.unavailable()
    endpoints: Sequence[Endpoint] = ()
    if reason is None:
        endpoints = _endpoints(ctx, handle)
        if not endpoints:
            reason = "the worker held no storage connection at its crash point"
    if reason is not None:
        ctx.recorder.fault(step.kind, False, **value, reason=reason)
        handle.cont()
        ctx.await_worker(handle)
        return
    ep = endpoints[0]
    # No runs named: a network fault must change no outcome.
    value["endpoint"] = {
        "service": ep.service,
        "client": f"{ep.local_host}:{ep.local_port}",
        "server": f"{ep.remote_host}:{ep.remote_port}",
    }
    owner = _netfilter.owner()
    rule = _rule(step.kind, ep)
    fired = True
    try:
        try:
            owner.add(rule)
            if step.kind == "reset_mid_transaction":
                fired = _netfilter.reset_server_end(
                    (ep.remote_host, ep.remote_port), (ep.local_host, ep.local_port)
                )
                if not fired:
                    value["reason"] = "the server's end of the connection was already gone"
        except _netfilter.NetfilterError as exc:
            # The kernel or its tools refused (a netfilter without the
            # comment match, no socket destroy): not inflicted, and said so.
            fired, value["reason"] = False, str(exc)
        ctx.recorder.fault(step.kind, fired, **value)
        handle.cont()
        ctx.await_worker(handle)
    finally:
        # Healed once the worker has ended, however the step ends (an
        # interruption, an adapter error); a no-op for a rule never added.
        owner.remove(rule)
