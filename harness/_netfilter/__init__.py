"""The kernel backend of network faults: netfilter rules on one connection.

A rule names one TCP connection by its two ports (the worker's own source
port and the server's port) and, where known, its two addresses, so that
only that connection's packets are touched -- not the worker's other
connections, not another worker's, not the harness's own. Two kinds:

``drop_to_client``
    ``INPUT -p tcp -s SERVER --sport SPORT -d CLIENT --dport CPORT -j DROP``:
    what the server sends to that connection is lost (on loopback, packets
    pass INPUT too). A COMMIT sent after it is armed reaches the server,
    which commits; its reply never arrives: a lost acknowledgement.
``reset_to_server``
    ``OUTPUT ... -j REJECT --reject-with tcp-reset``: the connection's next
    packet to the server is refused and the worker gets a TCP reset.
``drop_to_server``
    ``OUTPUT ... -j DROP``: what the worker sends on that connection is
    lost. With ``drop_to_client`` on the same connection: a partition, both
    directions silent, no reset either way.

Rules go away at the end of the step that armed them (the nemesis removes
them in a ``finally``, shielded from an interruption) and at exit; otherwise
they die with their owner. Every rule's comment is ``sah-net:<token>``.
Before its first rule, the process that adds rules (:class:`Owner`) starts a
*reaper*: a small process in a session of its own (a Ctrl-C to the harness's
process group does not reach it, and it ignores SIGINT, SIGHUP and SIGTERM)
that reads a pipe whose write end only the owner holds -- and each
``iptables`` the owner runs to add a rule, for as long as it runs. When the
pipe closes, the owner is gone, however it died (a SIGKILL, the OOM killer),
and no rule of its is on its way in: the reaper deletes every rule tagged
with that token and exits. At a normal exit the owner removes its rules,
closes the pipe and waits for the reaper to end. Measured: a harness
SIGKILLed mid-partition, its rules are gone 0.10 to 0.11 s later (median
of 5, two series; ``benchmarks/rules_after_kill.py``).

The owner also holds the abstract Unix socket ``@sah-net-owner:<token>``
bound for as long as it lives: the kernel frees it when the process dies, and
abstract sockets live in the network namespace -- the very scope of the
rules. :func:`sweep_rules` (the backstop, should the reaper itself have been
killed) deletes a tagged rule only when it can bind its owner's socket.

A reset also aborts the server's end of the connection (``ss -K``, see
:func:`reset_server_end`), as a real reset does.

Without ``iptables`` and ``ss``, or without the right to use them (not
root), :func:`unavailable` says why, and the family is reported *not
tested*.

The package's modules: ``_rules``, ``_probe`` (whether it can run),
``_ownership`` (the owner and its reaper, ``harness/_reaper.py``), ``_sockets``,
``_sweep``.
"""

from __future__ import annotations

from ._ownership import LOCK_PREFIX, REAPER, REAPER_WAIT, Owner, owner
from ._probe import NETEM_PROBE, latency_unavailable, unavailable
from ._rules import BINARIES, COMMENT_PREFIX, XTABLES_WAIT, NetfilterError, Rule, RuleKind
from ._sockets import reset_server_end, socket_open
from ._sweep import TaggedRule, sweep_rules, tagged_rules

__all__ = [
    "BINARIES",
    "COMMENT_PREFIX",
    "LOCK_PREFIX",
    "NETEM_PROBE",
    "REAPER",
    "REAPER_WAIT",
    "XTABLES_WAIT",
    "NetfilterError",
    "Owner",
    "Rule",
    "RuleKind",
    "TaggedRule",
    "latency_unavailable",
    "owner",
    "reset_server_end",
    "socket_open",
    "sweep_rules",
    "tagged_rules",
    "unavailable",
]
