"""Seeded bugs: realistic mistakes that can be switched on, one flag each.

The reference runtime passes every property of the harness. To show that the
harness would notice if it did not, each entry here names one mistake a real
durable runtime makes, and the code carries it behind a flag at the very place
the mistake would be made: store flags in :mod:`.store._sql` (the store is
told by :class:`~reference_runtime.Runtime`), protocol flags in
:mod:`._executor` and :mod:`._workflows`. Every flag is off by default and
the default path is untouched.

Switch them on with ``RuntimeConfig(bugs=frozenset({...}))``, ``RR_BUGS=a,b``
in a worker's environment, or ``harness run --adapter reference --adapter-opt
bug=NAME``. ``python -m reference_runtime bugs`` and ``harness list bugs``
print the catalogue.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ._errors import ConfigError


@dataclass(frozen=True)
class SeededBug:
    """One seeded bug: its name, what goes wrong, where it lives, and the
    harness property that it breaks (the one a detection must name)."""

    name: str
    description: str
    #: ``store`` or ``executor`` (or ``workflow``): where the flag is read
    layer: str
    #: the harness property the bug breaks (a name from ``harness list properties``)
    breaks: str


BUGS: dict[str, SeededBug] = {
    b.name: b
    for b in (
        SeededBug(
            "no-idempotency-key",
            "the external call carries no idempotency key, so a resend after a crash or "
            "timeout is a second payment",
            "executor",
            "exactly_once_effects",
        ),
        SeededBug(
            "effect-before-intent",
            "the service is called before the intent is persisted: after a crash there is "
            "nothing to reconcile against, and the call is made again",
            "executor",
            "exactly_once_effects",
        ),
        SeededBug(
            "ack-before-commit",
            "inbound messages are acknowledged in their own transaction before the state "
            "change they cause: a crash in between loses the decision",
            "store",
            "resume_equivalence",
        ),
        SeededBug(
            "non-atomic-checkpoint",
            "a checkpoint writes the run row and working state in one transaction and the "
            "operation, approval, audit, inbox and memory records in a second: a crash in "
            "between leaves a state change without its records (the audit trail breaks first)",
            "store",
            "legal_transitions",
        ),
        SeededBug(
            "no-version-check",
            "a commit ignores the state_version it read (a lost update when two writers "
            "race); only the lease's fencing token still guards the row",
            "store",
            "legal_transitions",
        ),
        SeededBug(
            "no-fencing",
            "commits and lease renewals do not compare the fencing token or the lease "
            "expiry: a worker whose lease expired renews it and goes on calling services",
            "store",
            "exactly_once_effects",
        ),
        SeededBug(
            "no-inbox-dedup",
            "the inbox upserts deliveries instead of ignoring a known message id, so a "
            "duplicated approval or event is accepted (and processed) again",
            "store",
            "approval_integrity",
        ),
        SeededBug(
            "skip-approval-recheck",
            "right before an approval-gated effect, the approval is only checked for "
            "'approved', not re-checked against its expiry and the current parameters",
            "executor",
            "approval_integrity",
        ),
        SeededBug(
            "trust-stale-memory",
            "memory reads filter by namespace and trust only: other tenants', expired and "
            "superseded records reach the model",
            "store",
            "memory_safety",
        ),
        SeededBug(
            "untrusted-memory-authorizes",
            "the refund policy's approval waiver reads any memory record, so user-supplied "
            "text can stand in for a manager's approval",
            "workflow",
            "memory_safety",
        ),
        SeededBug(
            "no-migration",
            "payloads are not upgraded on read: v2 code reads a v1 payload as if it were v2",
            "executor",
            "migration_safety",
        ),
        SeededBug(
            "retry-unknown-commit",
            "a checkpoint whose COMMIT outcome is unknown (its connection died, the "
            "acknowledgement lost) is taken for failed and written again over the run's "
            "current version: a commit that did happen is applied twice (needs network "
            "faults: backend=postgres, iptables)",
            "executor",
            "legal_transitions",
        ),
        SeededBug(
            "commit-lost-as-applied",
            "a COMMIT whose connection died before its answer came back is taken for "
            "applied (a lost acknowledgement is far likelier than a lost commit): when the "
            "COMMIT itself was lost, the worker acts on a record that was never written, and "
            "the next worker does the step again (needs network faults on Toxiproxy: "
            "backend=postgres, HARNESS_TOXIPROXY_BIN or _URL)",
            "store",
            "exactly_once_effects",
        ),
        SeededBug(
            "context-from-process-memory",
            "the worker caches each run's tool results and memory in process memory and "
            "builds later contexts from the cache instead of from durable records",
            "executor",
            "context_rebuild",
        ),
    )
}


def parse_bugs(spec: str | Iterable[str] | None) -> frozenset[str]:
    """The bug names in ``spec`` (``"a,b"`` or an iterable); raises
    :class:`ConfigError` naming every unknown one and listing the catalogue."""
    if spec is None:
        return frozenset()
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    names = frozenset(n.strip() for n in items if n and n.strip())
    unknown = sorted(names - set(BUGS))
    if unknown:
        raise ConfigError(
            f"unknown seeded bug {', '.join(map(repr, unknown))}; the reference runtime "
            f"seeds: {', '.join(sorted(BUGS))} (see python -m reference_runtime bugs)"
        )
    return names
