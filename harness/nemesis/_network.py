"""Network faults on one worker's storage connection: a lost commit
acknowledgement, a reset between two statements; and a partition of the
worker from the store while its lease runs out.

The worker is paused at a crash point first (an event, never a time): right
before a checkpoint's COMMIT for a lost acknowledgement, between two of its
statements for a reset. The environment names the connection it was using
there (``network_endpoints``, the ``network_faults`` capability); the
kernel backend (:mod:`harness._netfilter`) acts on that connection alone;
the worker goes on; the fault heals once the worker has ended.

A partition (:func:`partition`) silences every connection the worker holds
to the servers the environment names, both ways, and holds the worker at
its crash point meanwhile: a worker that ran during the partition would
open fresh connections, which rules matched on ports cannot catch.

A fault that cannot be inflicted -- no iptables, not root, no connection
held at that point, a store reached over a Unix socket (which netfilter
rules cannot touch; the generated scenarios never arm that one) -- is
recorded as armed and not fired, with the reason: the report then shows
the kind as never exercised, with that cause, never as passed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .. import _netfilter, _toxiproxy
from ..adapters import Capability, Endpoint, WorkerHandle, tcp_connections
from ..adapters._netinfo import network_gaps, offered_network_kinds
from ..model import EventF, NetworkFault, Step
from . import _toxiproxy as _on_toxiproxy
from ._clock import advance
from ._context import StepContext
from ._registry import handles

#: seconds a partition waits, at most, for the server of the connection in
#: use to let go of the worker's silenced connections to it (its keepalives
#: notice; the reference runtime asks for 5 s); a server that keeps them is
#: said so (``server_kept``), not waited out
SERVER_LET_GO = 20.0


@contextlib.contextmanager
def routing_for(steps: Iterable[Step]) -> Iterator[None]:
    """While a scenario of ``steps`` runs: on the Toxiproxy backend, route
    through proxies of their own only the workers a network fault of the
    scenario acts on (its ``worker_id``: the paused worker, or the one a
    ``partition_after_apply`` starts); every other worker connects to its
    stores directly. A proxy no fault acts on changes nothing but the cost
    of copying that worker's traffic through the proxy server."""
    targets = {s.worker_id for s in steps if isinstance(s, NetworkFault)}
    with _toxiproxy.routing_only(targets):
        yield


def _endpoints(ctx: StepContext, handle: WorkerHandle) -> Sequence[Endpoint]:
    if Capability.NETWORK_FAULTS not in ctx.capabilities:
        return ()
    named = getattr(ctx.env, "network_endpoints", None)
    return () if named is None else tuple(named(handle))


def _unreachable(ctx: StepContext, kind: str) -> str | None:
    """Why the kernel backend cannot inflict ``kind`` on the adapter's
    connections (a store over a Unix socket: see ``network_services()``),
    or None. The generated scenarios never arm such a fault; a scenario
    file may, and the fault is then recorded not fired, with this cause."""
    if offered_network_kinds(ctx.adapter, (kind,)):
        return None
    return "; ".join(network_gaps(ctx.adapter).values()) or None


def _rule(kind: str, ep: Endpoint) -> _netfilter.Rule:
    return _netfilter.Rule(
        "drop_to_client" if kind == "commit_ack_lost" else "reset_to_server",
        client_port=ep.local_port,
        server_port=ep.remote_port,
        client_host=ep.local_host,
        server_host=ep.remote_host,
    )


def _routes(ctx: StepContext, worker_id: str) -> dict[str, _toxiproxy.Route]:
    """The worker's proxies, by service: it was routed through Toxiproxy
    when it started (the contract's ``route_worker``), else none."""
    if Capability.NETWORK_FAULTS not in ctx.capabilities:
        return {}
    # The environment asked for them as itself, not as the harness's guard
    # around it (harness.adapters._guard).
    env = getattr(ctx.env, "unguarded", ctx.env)
    return _toxiproxy.routes_of(env, worker_id)


def _kernel_unavailable() -> str | None:
    """Why the kernel backend cannot run here: with both backends' reasons
    when neither can (the family is then not tested)."""
    reason = _netfilter.unavailable()
    if reason is None:
        return None
    try:
        return _toxiproxy.choose().reason
    except ValueError as exc:
        return str(exc)


#: what the kernel backend cannot do, by kind, and why
_KERNEL_CANNOT = {
    "slow_reply": "the kernel backend cannot fragment a reply (netfilter passes or drops "
    "whole packets); run the network faults on Toxiproxy (HARNESS_TOXIPROXY_URL or "
    "HARNESS_TOXIPROXY_BIN)",
    "cut_reply": "the kernel backend cannot cut a reply after some bytes; run the network "
    "faults on Toxiproxy (HARNESS_TOXIPROXY_URL or HARNESS_TOXIPROXY_BIN)",
    "commit_lost": "the kernel backend cannot drop a COMMIT and close the server's end of "
    "the connection too (the transaction would hold its locks until the server noticed); "
    "run the network faults on Toxiproxy (HARNESS_TOXIPROXY_URL or HARNESS_TOXIPROXY_BIN)",
}


@handles(NetworkFault)
def network_fault(ctx: StepContext, step: NetworkFault) -> None:
    """Drop what the server sends the paused worker's connection (its next
    COMMIT commits, unacknowledged) or reset that connection, let the worker
    go on, wait for it to end, then heal. On Toxiproxy when the worker was
    routed through it (:mod:`harness.nemesis._toxiproxy`), else on the
    kernel's netfilter rules. A ``partition_after_apply`` starts its worker
    itself and holds it at the world's effect boundary, not at a crash
    point (:func:`harness.nemesis._toxiproxy.partition_after_apply`)."""
    if step.kind == "partition_after_apply":
        _on_toxiproxy.partition_after_apply(ctx, step)
        return
    routes = _routes(ctx, step.worker_id)
    if routes:
        handle = ctx.paused.pop(step.worker_id, None)
        if handle is None:
            _not_paused(ctx, step, {"network": step.kind, "worker_id": step.worker_id})
            return
        _on_toxiproxy.network_fault(ctx, step, handle, routes)
        return
    if step.kind == "partition":
        partition(ctx, step)
        return
    value: dict[str, Any] = {"network": step.kind, "worker_id": step.worker_id}
    value["backend"] = "kernel"
    handle = ctx.paused.pop(step.worker_id, None)
    if step.kind in ("latency", *_KERNEL_CANNOT):
        # Not built on the kernel backend: armed, never fired, said why
        # (the run is then inconclusive, never passed).
        cannot = _KERNEL_CANNOT.get(step.kind) or _netfilter.latency_unavailable()
        ctx.recorder.fault(step.kind, False, **value, reason=cannot)
        if handle is not None:
            handle.cont()
            ctx.await_worker(handle)
        return
    if handle is None:
        # Its pause never fired (the site was not reached): nothing to act on.
        _not_paused(ctx, step, value)
        return
    reason = _kernel_unavailable() or _unreachable(ctx, step.kind)
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


def _held_connections(handle: WorkerHandle, named: Sequence[Endpoint]) -> list[Endpoint]:
    """Every established connection of the worker to a server ``named``
    lists (its pooled ones too, read from ``/proc``), the named ones first."""
    out = list(named)
    for host, port, service in dict.fromkeys(
        (e.remote_host, e.remote_port, e.service) for e in named
    ):
        for ep in tcp_connections(handle.pid, {port}, service=service):
            if ep.remote_host == host and all(
                (ep.local_host, ep.local_port) != (o.local_host, o.local_port) for o in out
            ):
                out.append(ep)
    return out


def _partition_rules(eps: Sequence[Endpoint]) -> list[_netfilter.Rule]:
    return [
        _netfilter.Rule(
            kind,
            client_port=ep.local_port,
            server_port=ep.remote_port,
            client_host=ep.local_host,
            server_host=ep.remote_host,
        )
        for ep in eps
        for kind in ("drop_to_client", "drop_to_server")
    ]


def partition(ctx: StepContext, step: NetworkFault) -> None:
    """Silence the paused worker's connections to the store both ways; wait
    for the server to let go of them (its keepalives), move the clock past
    the worker's lease, let another worker run until idle (it takes the run
    over), heal, and let the first worker go on: a zombie by the network,
    its connections dead, its lease gone."""
    value: dict[str, Any] = {"network": step.kind, "worker_id": step.worker_id}
    value["backend"] = "kernel"
    handle = ctx.paused.pop(step.worker_id, None)
    if handle is None:
        _not_paused(ctx, step, value)
        return
    reason = _kernel_unavailable() or _unreachable(ctx, step.kind)
    if reason is None and Capability.CLOCK not in ctx.capabilities:
        reason = "a partition outlasts the lease on the clock: the adapter has no clock capability"
    eps: list[Endpoint] = []
    if reason is None:
        eps = _held_connections(handle, _endpoints(ctx, handle))
        if not eps:
            reason = "the worker held no storage connection at its crash point"
    if reason is not None:
        ctx.recorder.fault(step.kind, False, **value, reason=reason)
        handle.cont()
        ctx.await_worker(handle)
        return
    value["endpoints"] = [
        {
            "service": ep.service,
            "client": f"{ep.local_host}:{ep.local_port}",
            "server": f"{ep.remote_host}:{ep.remote_port}",
        }
        for ep in eps
    ]
    owner = _netfilter.owner()
    rules = _partition_rules(eps)
    try:
        try:
            for rule in rules:
                owner.add(rule)
        except _netfilter.NetfilterError as exc:
            for rule in rules:
                owner.remove(rule)
            ctx.recorder.fault(step.kind, False, **value, reason=str(exc))
            handle.cont()
            ctx.await_worker(handle)
            return
        # The server's ends go once its keepalives give up on the silent
        # client (a row lock the worker held in a transaction goes with
        # them); a barrier on the kernel's sockets, bounded, not a sleep.
        # Only the server of the connection in use (named first) is waited
        # for: another may keep idle connections far longer (Redis: 300 s
        # keepalives by default), and the worker finds them alive, as a
        # real one would.
        deadline = time.monotonic() + SERVER_LET_GO
        server = (eps[0].remote_host, eps[0].remote_port)
        open_ = [ep for ep in eps if (ep.remote_host, ep.remote_port) == server]
        waited = len(open_)
        while open_ and time.monotonic() < deadline:
            open_ = [
                ep
                for ep in open_
                if _netfilter.socket_open(
                    (ep.remote_host, ep.remote_port), (ep.local_host, ep.local_port)
                )
            ]
            if open_:
                time.sleep(0.1)
        value["server_let_go"] = waited - len(open_)
        value["server_kept"] = len(open_)
        ctx.recorder.fault(step.kind, True, **value)
        advance(ctx, float(getattr(ctx.adapter, "lease_seconds", 30.0)) + 1, kind="lease_wait")
        peer = ctx.start(f"{step.worker_id}-peer")
        ctx.await_worker(peer)
    finally:
        for rule in rules:
            owner.remove(rule)
    ctx.recorder.fault("continue", True, worker_id=step.worker_id)
    handle.cont()
    ctx.await_worker(handle)


def _not_paused(ctx: StepContext, step: NetworkFault, value: dict[str, Any]) -> None:
    """Record a network fault armed at a worker that is not paused (its pause
    point was never reached): a note, and the fault as not fired, with why."""
    ctx.recorder.record("info", EventF.NOTE, "runner", {"text": f"{step.worker_id} is not paused"})
    ctx.recorder.fault(
        step.kind,
        False,
        **value,
        reason="the worker never reached its pause point (the run ended or went another way first)",
    )
