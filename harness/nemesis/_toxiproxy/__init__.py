"""Network faults on Toxiproxy: one paused worker's proxies (see
:mod:`harness._toxiproxy`), each fault fired by an event, never a sleep.

The worker connects to its stores through proxies of its own, so a fault on
them reaches every connection it holds or opens and no other process's.
Toxiproxy acts on a proxy's connections as a whole; where a fault is about
one moment of one connection, the step waits for the event that marks it
(the server answered, the reply was delivered, the connection was cut)
before it heals, watching the kernel's sockets (``ss``, no root needed):

``commit_ack_lost``
    What the server sends the worker is dropped (a ``timeout`` toxic of 0,
    downstream); the worker goes on and sends its COMMIT; once the server
    has answered it (bytes arrive on the proxy's side of the connection:
    the COMMIT was applied), the proxy is switched off and on again, which
    closes the worker's connections: the worker sees its connection end
    with no reply, and its read back (a fresh connection) goes through.
``commit_lost``
    What the worker sends the server is dropped (a ``timeout`` toxic of 0,
    upstream); the worker goes on and sends its COMMIT; once the proxy has
    received it (bytes arrive on the proxy's side of the worker's
    connection), the proxy is switched off and on again: the server sees
    the connection end mid-transaction and rolls it back, the worker sees
    its connection end with no reply. To the worker, a lost
    acknowledgement; in the store, nothing was written.
``reset_mid_transaction``
    The proxy is switched off and on while the worker is paused between two
    statements: its connections are closed at both ends and the step waits
    until the server has let go of them (its transaction rolled back, its
    locks freed) before the worker goes on.
``partition``
    Every proxy of the worker switched off (its connections closed, new ones
    refused); the server lets go of its sessions; **the worker runs on**
    through the partition; the clock moves past its lease (with the clock
    capability; without it, the worker's sessions were its hold on the
    run), another worker runs until idle (it takes the run over); then the
    proxies come back on.
``latency``
    Each reply to the worker held back (``latency`` toxic, with jitter);
    with the clock capability the clock moves past the worker's lease while
    its next reply is in flight. Healed once that reply has arrived.
``slow_reply``
    Replies arrive in small fragments (``slicer``), for the rest of the
    worker's life.
``cut_reply``
    The next reply is cut after a few bytes (``limit_data``): the connection
    ends mid-message. Healed once the connection was cut.
``partition_after_apply``
    No crash point: the world holds the worker right after applying its
    call of an effect; every proxy of the worker is switched off; it goes
    on, unable to report the result; another worker runs until idle; then
    the proxies come back (:func:`partition_after_apply`).

The package's modules: ``_faults`` (each kind's step), ``_partition`` (the
partitions), ``_watch`` (the sockets and events a step watches).
"""

from __future__ import annotations

from ._faults import (
    CUT_AFTER,
    JITTER_MS,
    LATENCY_MS,
    ON_THE_STORE,
    SLICE_BYTES,
    SLICE_DELAY_US,
    SLICE_VARIATION,
    network_fault,
)
from ._partition import partition_after_apply
from ._watch import EVENT_WAIT

__all__ = [
    "CUT_AFTER",
    "EVENT_WAIT",
    "JITTER_MS",
    "LATENCY_MS",
    "ON_THE_STORE",
    "SLICE_BYTES",
    "SLICE_DELAY_US",
    "SLICE_VARIATION",
    "network_fault",
    "partition_after_apply",
]
