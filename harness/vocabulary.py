"""The words every layer shares: what an adapter can offer (:class:`Capability`)
and what the harness does with it (one :class:`FaultFamily` record per fault
family).

Every table that used to spell a family or a capability out again -- the
families scenarios draw (``harness.scenarios.FAMILIES``), the capability a
family needs, the family each reported fault kind belongs to
(``harness.outcome.KIND_FAMILY``), what a missing capability leaves untested
(``harness.report.CAPABILITY_GAPS``), ``harness list faults`` and the table in
``docs/faults.md`` -- is derived from the records here. Adding a family is a
record here, its step types (``harness.model``, each naming the capability it
needs), its handler module (``harness.nemesis``) and its scenarios module
(``harness.scenarios._schedules``: its episode and targeted schedules). The
record names both modules, which register what they hold as they are
imported, so no table elsewhere lists the family: ``docs/architecture.md``
walks through one.

This module imports nothing of the harness, so every layer may import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


class Capability(StrEnum):
    """Something an adapter may declare its environment offers
    (``Adapter.capabilities``); :attr:`gap` says what goes untested without it."""

    CRASH_POINTS = "crash_points"
    CLOCK = "clock"
    APPROVALS = "approvals"
    MEMORY_INJECTION = "memory_injection"
    VERSION_SWITCH = "version_switch"
    CONTEXT = "context"
    STORAGE_FAULTS = "storage_faults"
    CONCURRENT_WORKERS = "concurrent_workers"
    CANCEL = "cancel"
    DURABLE_STATE = "durable_state"
    OPERATIONS = "operations"
    NETWORK_FAULTS = "network_faults"
    MODEL_ENDPOINT = "model_endpoint"

    @property
    def gap(self) -> str:
        """What the harness cannot test without this capability (the report's
        "not tested" section)."""
        return _GAPS[self]


_GAPS: Mapping[Capability, str] = MappingProxyType(
    {
        Capability.CRASH_POINTS: "kills at named crash points (only effect boundaries are tested)",
        Capability.CLOCK: "lease expiry, zombies, approval expiry and timers",
        Capability.APPROVALS: "approval integrity under duplicated, forged, cross-tenant and "
        "late decisions",
        Capability.MEMORY_INJECTION: "stale, cross-tenant and poisoned memory",
        Capability.VERSION_SWITCH: "schema migration between crash and resume",
        Capability.CONTEXT: "context rebuild after resume",
        Capability.STORAGE_FAULTS: "storage connection faults",
        Capability.CONCURRENT_WORKERS: "racing and zombie workers",
        Capability.CANCEL: "an operator's cancellation while a worker holds the run",
        Capability.DURABLE_STATE: "durable state (conversation, checkpoints, ledger) vs the oracle",
        Capability.OPERATIONS: "the runtime's ledger vs the effects the world applied",
        Capability.NETWORK_FAULTS: "lost commit acknowledgements, resets and partitions on a "
        "worker's connections to its stores or its runtime's server",
        Capability.MODEL_ENDPOINT: "model faults (rate limits, server errors, lost and cut "
        "replies, malformed tool calls, empty replies, refusals) and tool replies without "
        "their reference, for an app whose model the world's endpoint serves",
    }
)


@dataclass(frozen=True)
class FaultFamily:
    """One fault family: what it does, what it needs, and the names it uses.

    ``variants`` are what a swarm of the sampled search picks a subset of
    (in shrink order: the first is the simplest; empty for a family of one
    variant). ``reported`` are the fault kinds its steps count in a report's
    ``faults`` (a family armed in a run whose reported kinds all stayed at
    zero fired makes the run inconclusive; one kind never firing does not).
    """

    name: str
    #: one line, for ``harness list faults`` and docs/faults.md
    doc: str
    #: the capability without which the family is never drawn (None: any adapter)
    needs: Capability | None
    reported: tuple[str, ...]
    variants: tuple[str, ...] = ()
    #: at most one episode of it per scenario (an episode that costs seconds
    #: where others cost tenths)
    once_per_scenario: bool = False
    #: its module of ``harness.nemesis`` (``"_model"``), which registers the
    #: handler of each of its step types (``@handles``) and, for a family
    #: whose faults fire in the world, how its fired rules read
    #: (``@fires_at``); None: its steps are the runner's or another family's
    handlers: str | None = None
    #: its module of ``harness.scenarios._schedules`` (``"model"``), which
    #: registers its sampled-search episode (``@episode_of``) and its
    #: targeted schedules (``@category``/``@sweep``, each with its place in
    #: the plan); several families may share one
    schedules: str = ""

    def __post_init__(self) -> None:
        if not self.schedules:
            raise ValueError(f"fault family {self.name!r} names no schedules module")


#: The network kinds any backend can fire (the kernel's netfilter rules too).
NETWORK_KINDS = ("commit_ack_lost", "reset_mid_transaction", "partition")
#: ... and a proxy's (Toxiproxy) besides: a reply held back, fragmented or
#: cut, and a COMMIT lost on its way (the worker cannot tell it from a lost
#: acknowledgement; the server never applied it).
PROXY_NETWORK_KINDS = (
    *NETWORK_KINDS, "latency", "slow_reply", "cut_reply", "commit_lost", "partition_after_apply",
)  # fmt: skip
#: The network kinds fired at the world's effect boundary, not at a crash
#: point: the world holds the caller right after applying its call, and its
#: proxies to its runtime's server or database are switched off. Aimed only
#: at adapters without crash points (``Universe.offered_network_kinds``):
#: one with them reaches the same place with a ``partition`` at the crash
#: point after the call.
AT_EFFECT_NETWORK_KINDS = ("partition_after_apply",)

#: What the world's model endpoint can do wrong, in shrink order (the
#: simplest first): the first four lose or refuse the reply (a client
#: retries them), the last four change what the model decided.
MODEL_FAULT_MODES = (
    "rate_limited",
    "server_error",
    "timeout",
    "cut_stream",
    "malformed_arguments",
    "missing_argument",
    "empty_reply",
    "refusal",
)


#: What a tool's service can answer wrong (a world fault mode the ``model``
#: family arms, not the ``world`` family): the effect applied, the reply a
#: success without the field that carries its reference.
TOOL_REPLY_MODES = ("reply_missing_ref",)


def model_kind(mode: str) -> str:
    """The fault kind a model fault (or a tool-reply fault) of ``mode`` is
    reported as."""
    return f"tool_{mode}" if mode in TOOL_REPLY_MODES else f"model_{mode}"


#: Every fault family, in the order scenarios and reports list them.
FAULT_FAMILIES: tuple[FaultFamily, ...] = (
    FaultFamily(
        "crash",
        "SIGKILL a worker at a named crash point (and again during recovery)",
        Capability.CRASH_POINTS,
        reported=("crash_point", "kill"),
        handlers="_processes",
        schedules="commits",
    ),
    FaultFamily(
        "zombie",
        "pause a worker past its lease, let another take over, continue it",
        Capability.CONCURRENT_WORKERS,
        reported=("continue", "lease_wait"),
        handlers="_processes",
        schedules="processes",
    ),
    FaultFamily(
        "message",
        "duplicated, forged, wrong-role and wrong-parameter approval decisions; another "
        "tenant's message naming the run (a decision its approver signed, or the event the "
        "run waits on)",
        Capability.APPROVALS,
        reported=(
            "duplicate_message",
            "forged_message",
            "wrong_role_message",
            "wrong_params_message",
            "cross_tenant_message",
            "changed_mind_message",
            "misdirected_message",
            "valid_message",
        ),
        # misdirected: a decision genuinely signed for another run's approval
        # (its identical twin's); while_held: the decision delivered while a
        # worker holds the run paused, after its read
        variants=(
            "valid",
            "forged",
            "wrong_role",
            "wrong_params",
            "cross_tenant",
            "changed_mind",
            "misdirected",
            "while_held",
        ),
        handlers="_messages",
        schedules="messages",
    ),
    FaultFamily(
        "late_approval",
        "an approval delivered after it expired",
        Capability.CLOCK,
        reported=("clock",),
        handlers="_clock",
        schedules="clock",
    ),
    FaultFamily(
        "world",
        "a service rejects, times out before/after applying, or kills the caller",
        None,
        reported=("world_fault", "effect_boundary", "lookup_fault"),
        # lookup_refused: the caller killed right after the service applied,
        # then the lookup the next worker reconciles with refused or lost
        variants=(
            "reject",
            "timeout_before_apply",
            "apply_then_timeout",
            "kill_before_apply",
            "kill_after_apply",
            "lookup_refused",
        ),
        handlers="_world",
        schedules="world",
    ),
    FaultFamily(
        "memory",
        "poisoned, cross-tenant, expired and superseded memory records",
        Capability.MEMORY_INJECTION,
        reported=("memory",),
        # lapsed_newest, untrusted_newest: a verified version under a newer
        # one that lapsed, or that only a user supplied (the key must read absent)
        variants=(
            "poisoned",
            "cross_tenant",
            "expired",
            "stale",
            "lapsed_newest",
            "untrusted_newest",
        ),
        handlers="_memory",
        schedules="memory",
    ),
    FaultFamily(
        "migration",
        "runs written by old code; workers of old and new code side by side",
        Capability.VERSION_SWITCH,
        reported=("migration",),
        # forward: old code, then this one; rollback: this code, then the
        # older release, then this one again
        variants=("forward", "rollback"),
        schedules="migration",
    ),
    FaultFamily(
        "storage",
        "a worker's Postgres session terminated or Redis client killed, inside a checkpoint "
        "transaction or between steps (needs storage_faults)",
        Capability.STORAGE_FAULTS,
        reported=("storage",),
        handlers="_storage",
        schedules="connections",
    ),
    FaultFamily(
        "race",
        "two workers started at once on the same runs, the first held inside a slowed effect "
        "(needs concurrent_workers; for runtimes without pause points)",
        Capability.CONCURRENT_WORKERS,
        reported=("race",),
        handlers="_processes",
        schedules="commits",
    ),
    FaultFamily(
        "operator",
        "an operator cancels a run while a paused worker holds it; the worker's next write "
        "must not undo it (needs cancel)",
        Capability.CANCEL,
        reported=("operator_cancel",),
        handlers="_storage",
        schedules="processes",
    ),
    FaultFamily(
        "network",
        "a worker's connections to its stores or its runtime's server: its commit "
        "acknowledgement lost, reset "
        "mid-transaction, or partitioned past its lease while another worker takes over; on "
        "Toxiproxy also latency, slow and cut replies, its COMMIT lost on the way, and (for "
        "runtimes without crash points) a partition from its runtime's server right after the "
        "world applied its call (needs network_faults)",
        Capability.NETWORK_FAULTS,
        # latency is reported as a family of its own: armed and never fired
        # (a backend that cannot hold replies back), it makes the run
        # inconclusive even when the other kinds fired
        reported=tuple(k for k in PROXY_NETWORK_KINDS if k != "latency"),
        # the last three only through a proxy (Universe.offered_network_kinds)
        variants=PROXY_NETWORK_KINDS,
        once_per_scenario=True,
        handlers="_network",
        schedules="connections",
    ),
    FaultFamily(
        "model",
        "the model endpoint rate-limits, errs, loses or cuts a reply, or answers with "
        "malformed or incomplete tool-call arguments, nothing, or a refusal; a tool's service "
        "applies the call and answers without its reference (needs model_endpoint)",
        Capability.MODEL_ENDPOINT,
        reported=tuple(model_kind(m) for m in (*MODEL_FAULT_MODES, *TOOL_REPLY_MODES)),
        variants=(*MODEL_FAULT_MODES, *TOOL_REPLY_MODES),
        handlers="_model",
        schedules="model",
    ),
)

#: The records by name.
FAMILY: Mapping[str, FaultFamily] = MappingProxyType({f.name: f for f in FAULT_FAMILIES})
#: Fault family names, in order.
FAMILIES: tuple[str, ...] = tuple(FAMILY)
#: The family each reported fault kind belongs to.
KIND_FAMILY: Mapping[str, str] = MappingProxyType(
    {kind: f.name for f in FAULT_FAMILIES for kind in f.reported}
)
#: Per family with several variants, the variants a swarm picks from.
FAMILY_VARIANTS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {f.name: f.variants for f in FAULT_FAMILIES if f.variants}
)


def family_table() -> str:
    """The Markdown table of every family (docs/faults.md holds it; a test
    keeps the two in step)."""
    rows = [
        "| family | what it does | needs | fault kinds reported |",
        "|---|---|---|---|",
    ]
    for f in FAULT_FAMILIES:
        needs = f"`{f.needs}`" if f.needs else "-"
        kinds = ", ".join(f"`{k}`" for k in f.reported)
        rows.append(f"| `{f.name}` | {f.doc} | {needs} | {kinds} |")
    return "\n".join(rows) + "\n"
