"""Realistic mistakes in the reference runtime, as data (``benchmarks/realistic.py``).

Each mistake is what a runtime engineer writes when a plausible reason leads
them astray: an off-by-one on a deadline, a clock read from the wrong place,
a migration that keeps only the fields it knows, a record written in the
wrong order. None is an operator mutant, a seeded bug
(``reference_runtime/_bugs.py``) or a hand mutant of
``tests/bugs/test_hand_mutants.py``: where a mistake sits near one of those,
its code and its reason differ (said in ``near``).

A mistake is a list of :class:`Edit` (old text -> new text, each applied
exactly once) to a copy of ``reference_runtime/``; ``story`` is the one line
its author would give, ``harm`` what then goes wrong and where a schedule
would have to be to show it. ``tests/bugs/test_realistic_mistakes.py`` checks
that every edit still applies to today's runtime, so the corpus cannot rot:
when the runtime moves, rewrite the mistake against it, never drop it.

Keep adding to it (issue 28): it is the benchmark that matches what users
fear. Only the standard library and ``_mutants`` are imported here.
"""

from __future__ import annotations

from dataclasses import dataclass

from _mutants import Edit


@dataclass(frozen=True)
class Mistake:
    name: str
    #: the one line its author would give
    story: str
    #: what goes wrong, and what a schedule must do to show it
    harm: str
    edits: tuple[Edit, ...]
    #: the area of the runtime (leases, effects, inbox, approvals, memory,
    #: versions, clock, children, storage)
    area: str
    #: the seeded bug or hand mutant it sits near, and how it differs
    near: str = ""
    #: needs a backend the ci profile on SQLite does not run (e.g. Postgres
    #: for network faults): on SQLite it cannot be caught by construction
    needs: str = ""
    #: why the runtime's other defences keep this mistake from doing harm
    #: (an equivalent mutant here), with the evidence: reported, not scored
    masked: str = ""


MISTAKES: tuple[Mistake, ...] = (
    # -- leases ----------------------------------------------------------------
    Mistake(
        "claim-takes-a-lease-ending-now",
        "a lease that ends now is over: claim it (`<=` where `<` was)",
        "commit() accepts a lease whose expiry equals now, so at that instant two "
        "workers hold the run; only a clock set exactly to a lease's expiry shows it",
        (
            Edit(
                "store/_sql/_leases.py",
                " OR runs.lease_expiry < ?){only}",
                " OR runs.lease_expiry <= ?){only}",
            ),
        ),
        "leases",
        masked="the fencing token and the lease margin: a worker paused before its call "
        "with the clock set exactly to its lease end (tried as a targeted schedule on "
        "2026-12-07) lets the mistaken claim take the run at that instant, but the "
        "paused worker then refuses to call with less than LEASE_MARGIN (1 s) of lease "
        "left, and its commits carry the old fencing token: one refund, every property "
        "holds. Harm needs a runtime without the margin check",
    ),
    Mistake(
        "operator-write-keeps-the-version",
        "state_version counts the run's steps; a cancel or a park is not a step, so "
        "it leaves the version alone",
        "a worker holding the run when an operator cancels it commits over the "
        "cancel (its expected version still matches): the cancelled run runs on",
        (
            Edit(
                "store/_sql/_runs.py",
                'update={**changes, "updated_at": now, "state_version": stored.state_version + 1}',
                'update={**changes, "updated_at": now}',
            ),
        ),
        "leases",
    ),
    # -- effects ---------------------------------------------------------------
    Mistake(
        "sent-mark-only-on-resends",
        "the sent mark guards a resend; a first attempt has nothing to guard, so it "
        "skips the extra commit",
        "a worker killed after an at-most-once e-mail left the world leaves a bare "
        "intent, read as never sent: the e-mail goes twice",
        (
            Edit(
                "_executor/_effects.py",
                "    if unreconcilable(sc, op) and intent_persisted:\n",
                "    if unreconcilable(sc, op) and intent_persisted and op.attempts > 1:\n",
            ),
        ),
        "effects",
    ),
    Mistake(
        "timeout-read-as-rejection",
        "a call that timed out failed: back off and try again (the idempotency key "
        "makes the retry safe)",
        "a service without keys (the report e-mail, at most once) applied the call "
        "and timed out: the retry sends it again",
        (
            Edit(
                "_executor/_effects.py",
                "    except OutcomeUnknown as exc:\n"
                '        cp.hit("after_external_call")\n'
                "        with sc.crossing(RESULT_COMMIT):\n"
                '            unknown = op.model_copy(update={"status": OS.UNKNOWN, '
                '"updated_at": sc.now()})\n'
                "            sc.commit(\n"
                "                run,\n"
                "                status=S.RECONCILING,\n"
                '                action="effect_unknown",\n'
                "                operations=(unknown,),\n"
                '                detail={"op_id": op.op_id, "reason": str(exc)},\n'
                "            )\n"
                "        return\n",
                "    except OutcomeUnknown as exc:\n"
                '        cp.hit("after_external_call")\n'
                '        rejected(sc, run, op, f"timed out: {exc}")\n',
            ),
        ),
        "effects",
        near="hand mutant resend-after-timeout-without-key resends from reconciliation; "
        "this one never reconciles a timeout at all",
    ),
    Mistake(
        "prepared-intent-means-not-sent",
        "an intent still `prepared` never reached the service (its result or sent mark "
        "would say so): decide the step again",
        "a worker killed after the provisioning service created the account leaves "
        "a prepared intent; the next worker calls again, and a service without "
        "idempotency keys opens a second account",
        (
            Edit(
                "_executor/_loop.py",
                "            if op is not None and not (op.status is OS.PREPARED "
                "and unreconcilable(sc, op)):\n",
                "            if op is not None and op.status is not OS.PREPARED:\n",
            ),
        ),
        "effects",
    ),
    Mistake(
        "unknown-commit-taken-as-committed",
        "the connection died after COMMIT was sent: it went through (a lost "
        "acknowledgement is far likelier than a lost commit)",
        "a reset inside an intent or sent-mark commit that did not commit: the worker "
        "calls the service with no durable record, and the next one calls again; "
        "needs connection faults (Postgres)",
        (
            Edit(
                "_executor/_step.py",
                "            if not self.committed(new, lost):\n                raise\n",
                "            return new\n",
            ),
        ),
        "storage",
        near="seeded retry-unknown-commit writes the commit again; this one assumes it",
        needs="postgres",
    ),
    # -- inbox and children ---------------------------------------------------
    Mistake(
        "deadline-checked-before-the-inbox",
        "past its deadline a wait is over, whatever arrived since: check the clock first",
        "a child's completion delivered before the parent's deadline, read after it "
        "(the parent's worker was down across the deadline): the parent fails",
        (
            Edit(
                "_executor/_inbox.py",
                "    match: InboxMessage | None = None\n    for msg in snap.pending_inbox:\n",
                "    if run.wake_at is not None and now >= run.wake_at:\n"
                "        late = tuple(m.message_id for m in snap.pending_inbox)\n"
                "        end_wait(\n"
                '            sc, run, late, (), status=S.FAILED, action="timeout",\n'
                '            error=f"timed out waiting for {waiting}",\n'
                "        )\n"
                "        raise Yield\n"
                "    match: InboxMessage | None = None\n    for msg in snap.pending_inbox:\n",
            ),
        ),
        "inbox",
        near="hand mutant event-wait-times-out-only-after-reading is the opposite order "
        "slip (a timeout only after a non-matching read)",
    ),
    Mistake(
        "child-tells-parent-after-its-commit",
        "the child tells its parent once its own completion is durable, so the parent "
        "never hears of a completion that was rolled back",
        "a child killed between its completion commit and the delivery to its parent: "
        "the parent waits until its deadline and fails",
        (
            Edit(
                "_executor/_local_steps.py",
                "            error=error,\n"
                "            outbox=outbox,\n"
                "            wake_at=None,\n"
                "            waiting_on=None,\n"
                "        )\n"
                "    raise Yield\n",
                "            error=error,\n"
                "            wake_at=None,\n"
                "            waiting_on=None,\n"
                "        )\n"
                "    for message in outbox:\n"
                "        sc.store.deliver(message)\n"
                "    raise Yield\n",
            ),
        ),
        "children",
    ),
    Mistake(
        "decision-acknowledged-in-its-own-commit",
        "acknowledge the decision the moment it is read, so that no worker acts on "
        "it twice; record what it decided next",
        "a worker killed between the two commits: the decision is gone, the run waits "
        "until its approval expires and is cancelled instead of refunded",
        (
            Edit(
                "_executor/_approval_steps.py",
                "    if decided is not None:\n"
                "        _decide(sc, run, now, approval, decided, acks, audits)\n",
                "    if decided is not None:\n"
                "        with sc.crossing(INBOX_ACK):\n"
                "            run = sc.commit(run, inbox_acked=acks, extra_audit=audits, "
                'action="inbox")\n'
                "        _decide(sc, run, now, approval, decided, (), ())\n",
            ),
        ),
        "inbox",
        near="seeded ack-before-commit splits every commit in the store; this is one "
        "step of the executor, with a crash point between",
    ),
    # -- approvals -------------------------------------------------------------
    Mistake(
        "approval-authorized-as-of-the-last-checkpoint",
        "authorize the gated effect as of the run's last checkpoint, so that a resumed "
        "run decides what the first worker would have",
        "a run approved, its worker killed before the refund, the clock past the "
        "approval's expiry: the next worker refunds on an expired approval",
        (
            Edit(
                "_executor/_approval_steps.py",
                "    why = authorizes(approval, kind, request_hash, sc.now())\n",
                "    why = authorizes(approval, kind, request_hash, run.updated_at)\n",
            ),
        ),
        "approvals",
        near="hand mutant memory-read-as-of-last-checkpoint makes the same choice for memory reads",
    ),
    Mistake(
        "approval-expires-after-its-expiry",
        "an approval is valid until expires_at, inclusive (`>` where `>=` was)",
        "the wait wakes at exactly expires_at, finds the approval still valid and "
        "nothing to do, and the still-runnable run is claimed again and again until "
        "the clock moves; only a clock set exactly to the expiry shows it",
        (
            Edit(
                "_approvals.py",
                "    return now >= approval.expires_at\n",
                "    return now > approval.expires_at\n",
            ),
        ),
        "approvals",
    ),
    Mistake(
        "approval-compared-as-signed",
        "compare the request with exactly what the approver signed: reshaping the "
        "approval's parameters is rewriting a signature",
        "a refund approved under code v1 and refunded under v2 (which names the "
        "currency): the parameters differ, and the run is cancelled",
        (
            Edit(
                "_executor/_approval_steps.py",
                "    if approval is not None:\n"
                "        # An approval granted under older code names the parameters in\n"
                "        # that code's shape; compare like with like.\n"
                "        approval = upgrade_approval(sc.registry, run.workflow, approval)\n",
                "",
            ),
        ),
        "versions",
        near="hand mutant older-release-denies-its-own-approvals keys the same migration "
        "to the wrong version; this one never applies it",
    ),
    # -- memory ----------------------------------------------------------------
    Mistake(
        "memory-numbered-past-live-versions",
        "number a new memory version past the newest live one: an erased or expired "
        "version is gone",
        "after the newest version of a key lapsed, the next write takes its id: refused "
        "as a conflict, or (on a fresh id scheme) read below the lapsed one",
        (
            Edit(
                "_executor/_local_steps.py",
                "(a.namespace, tenant=run.tenant, key=a.key)\n",
                "(a.namespace, tenant=run.tenant, key=a.key)\n"
                "    stored = [\n"
                "        r\n"
                "        for r in stored\n"
                "        if not r.deleted and (r.expires_at is None or r.expires_at > now)\n"
                "    ]\n",
            ),
        ),
        "memory",
    ),
    Mistake(
        "memory-read-without-the-trust-floor",
        "read every record of the namespace; the policy weighs trust (its waiver checks "
        "provenance and trust itself)",
        "user-supplied records reach the context of a workflow that reads only verified "
        "facts; only a memory property that holds contexts to the workflow's floor sees it",
        (
            Edit(
                "_executor/_loop.py",
                "lambda ns, trust, t: sc.store.read_memory(run.tenant, ns, t, min_trust=trust),",
                "lambda ns, trust, t: sc.store.read_memory(run.tenant, ns, t),",
            ),
        ),
        "memory",
        near="seeded trust-stale-memory drops every filter in the store; this drops one "
        "argument in the executor; hand mutant context-built-below-the-trust-floor drops "
        "the floor in the context builder, for every namespace a definition reads",
    ),
    Mistake(
        "memory-id-without-tenant",
        "namespace, key and version name a memory record uniquely",
        "two tenants researching one topic: the second tenant's evidence takes the first "
        "tenant's ids and is refused as a conflict again and again",
        (
            Edit(
                "_executor/_local_steps.py",
                'memory_id=f"{run.tenant}:{a.namespace}:{a.key}:v{version}",',
                'memory_id=f"{a.namespace}:{a.key}:v{version}",',
            ),
        ),
        "memory",
        near="hand mutant memory-dedup-across-tenants forgets the tenant in the read "
        "that the unchanged-write test and the numbering use, not in the id",
    ),
    # -- versions --------------------------------------------------------------
    Mistake(
        "migration-keeps-only-known-fields",
        "build the v2 payload from what v2's schema names (customer, amount in cents, "
        "currency); the rest was v1's business",
        "a run upgraded mid-flight loses its working state (auto_approved, events, "
        "children): a waived refund asks for an approval it never requested",
        (
            Edit(
                "_workflows.py",
                '    out = {k: val for k, val in p.items() if k != "amount"}\n',
                '    out = {"customer_id": p["customer_id"]}\n',
            ),
        ),
        "versions",
    ),
    Mistake(
        "newer-payload-read-as-own",
        "a newer payload only adds fields: read it as this code's own instead of parking the run",
        "on a rollback (v2 worker, then v1), v1 code reads a v2 refund payload, finds no "
        "'amount' and fails the run",
        (
            Edit(
                "_workflows.py",
                "        if version > target:\n"
                '            raise FutureSchemaError(f"{name} working-state payload", '
                "version, target)\n",
                "        if version > target:\n            return payload\n",
            ),
        ),
        "versions",
    ),
    Mistake(
        "newest-definition-for-every-run",
        "run the newest definition of the workflow: that is what this code was "
        "written and tested for",
        "a run started on definition v1 is resumed by v2 code with v2's steps (a fraud "
        "check inserted mid-run), and by v1 code a v2 run's steps are unknown",
        (
            Edit(
                "_executor/_loop.py",
                "            definition = sc.registry.definition(run.workflow, "
                "run.definition_version)\n",
                "            definition = sc.registry.definition(run.workflow)\n",
            ),
        ),
        "versions",
    ),
    # -- clock -----------------------------------------------------------------
    Mistake(
        "wait-deadline-from-the-wall-clock",
        "a deadline is a real time: take it from time.time()",
        "the deadline is set on another clock than the one that ends it: a parent "
        "whose child never answers waits for ever (here years, in virtual time)",
        (
            Edit(
                "_executor/_local_steps.py",
                "from collections.abc import Mapping\n",
                "import time\nfrom collections.abc import Mapping\n",
            ),
            Edit(
                "_executor/_local_steps.py",
                "            wake_at=now + a.timeout_seconds,\n",
                "            wake_at=time.time() + a.timeout_seconds,\n",
            ),
        ),
        "clock",
    ),
    Mistake(
        "retry-backoff-from-the-wall-clock",
        "a backoff is real seconds: schedule the retry at time.time() + delay",
        "a step refused by a service is scheduled on another clock: here years away in "
        "virtual time, so the run never retries",
        (
            Edit(
                "_executor/_step.py",
                "import contextlib\n",
                "import contextlib\nimport time\n",
            ),
            Edit(
                "_executor/_step.py",
                "            wake_at=self.now() + delay,\n",
                "            wake_at=time.time() + delay,\n",
            ),
        ),
        "clock",
        near="hand mutant retry-counter-not-persisted drops the attempt count here; "
        "this one keeps it and mis-times the retry",
    ),
)

BY_NAME = {m.name: m for m in MISTAKES}
assert len(BY_NAME) == len(MISTAKES), "two mistakes share a name"
