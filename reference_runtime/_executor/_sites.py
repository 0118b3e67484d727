"""The executor's crash points, and the commit boundaries built from them.

Every site is declared here, at import, so that importing
:mod:`reference_runtime._executor` is enough to list and arm them all (the
worker and the harness do just that). A :class:`Boundary` names the pair of
sites passed on either side of one kind of checkpoint commit; the step
context passes them for the commit it makes (see ``StepContext.commit``).
"""

from __future__ import annotations

from typing import NamedTuple

from .. import crashpoints as cp

for _name, _doc in [
    ("before_lease_acquire", "a worker is about to claim a run"),
    ("after_lease_acquire", "a worker holds a fresh lease, nothing loaded yet"),
    ("before_lease_renew", "about to extend the lease before an external call"),
    ("after_lease_renew", "lease extended, external call not yet made"),
    ("before_intent_commit", "effect decided, intent not yet persisted"),
    ("after_intent_commit", "intent (operation 'prepared') persisted, service not called"),
    ("before_sent_mark", "about to mark a non-reconcilable operation 'sent'"),
    ("after_sent_mark", "operation marked 'sent', service not called"),
    ("before_external_call", "lease checked, about to call the service"),
    ("after_external_call", "service answered, result not yet persisted"),
    ("before_result_commit", "about to persist the confirmed result"),
    ("after_result_commit", "result persisted, step advanced"),
    ("before_reconcile_lookup", "reconciling: about to ask the service by key"),
    ("after_reconcile_lookup", "reconciling: the service answered the lookup"),
    ("before_approval_write", "about to persist an approval request or decision"),
    ("after_approval_write", "approval request or decision persisted"),
    ("before_inbox_ack", "about to commit a state change that acknowledges inbound messages"),
    ("after_inbox_ack", "inbound messages acknowledged together with their state change"),
    ("before_step_commit", "about to checkpoint a step without external effect"),
    ("after_step_commit", "step without external effect checkpointed"),
]:
    cp.declare(_name, _doc)


class Boundary(NamedTuple):
    """The crash points just before and just after one kind of commit (or lookup)."""

    before: str
    after: str


INTENT_COMMIT = Boundary("before_intent_commit", "after_intent_commit")
SENT_MARK = Boundary("before_sent_mark", "after_sent_mark")
RESULT_COMMIT = Boundary("before_result_commit", "after_result_commit")
RECONCILE_LOOKUP = Boundary("before_reconcile_lookup", "after_reconcile_lookup")
APPROVAL_WRITE = Boundary("before_approval_write", "after_approval_write")
INBOX_ACK = Boundary("before_inbox_ack", "after_inbox_ack")
STEP_COMMIT = Boundary("before_step_commit", "after_step_commit")
