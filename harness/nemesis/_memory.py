"""Memory faults: a record planted in long-term memory, wrong in a named way."""

from __future__ import annotations

from ..model import EventF, InjectMemory
from ._context import StepContext
from ._registry import handles

#: the trust score a poisoned record claims for itself (the scale's top)
CLAIMED_TRUST = 1.0
#: the trust score given to a version only a user vouches for (the scale's
#: bottom): below every floor above zero, so ``memory_safety`` can hold it
#: to the floor a workflow declares (``WorkflowSpec.memory_floor``)
UNVOUCHED_TRUST = 0.0


@handles(InjectMemory)
def inject_memory(ctx: StepContext, step: InjectMemory) -> None:
    """Plant a poisoned, cross-tenant, expired, stale (in or out of order),
    lapsed-newest or trusted record."""
    env = ctx.env
    now = env.now()
    owner = step.tenant
    tenant = step.tenant
    version = 1
    expires_at = None
    if step.kind == "cross_tenant":
        owner = f"{step.tenant}-other"
        tenant = owner
    elif step.kind == "expired":
        # Already expired, or live until the clock moves past expires_in.
        expires_at = now - 1.0 if step.expires_in is None else now + step.expires_in
    # Numbered and named as the runtime numbers and names its own versions,
    # where the environment says how (``memory_versions``, ``memory_id``):
    # a runtime that numbers a new version wrongly (past the live versions
    # only, say) then meets a planted one at the same id, as it would meet
    # one of its own. Else numbered from 1, named by the harness.
    stored = getattr(env, "memory_versions", None)
    named = getattr(env, "memory_id", None)
    base = int(stored(tenant, step.namespace, step.key)) if stored and named else 0

    def memory_id(v: int) -> str:
        if stored and named:
            return str(named(tenant, step.namespace, step.key, base + v))
        return f"planted:{step.kind}:{tenant}:{step.namespace}:{step.key}:v{v}"

    version = base + 1
    record = {
        "tenant": tenant,
        "namespace": step.namespace,
        "key": step.key,
        "value": step.value,
        "provenance": step.provenance,
        "memory_id": memory_id(1),
        "version": version,
        "expires_at": expires_at,
    }
    if step.kind == "poisoned":
        # A writer chooses its own trust score: a forger claims the highest.
        # Only the provenance says who vouches for a record.
        record["trust"] = CLAIMED_TRUST
    stale = step.kind in ("stale", "stale_reordered")
    newer = {
        **record,
        "version": base + 2,
        "memory_id": memory_id(2),
        "value": {"superseded": step.value},
    }
    if step.kind == "stale_reordered":
        # The newer version lands first, the older one late: arrival order
        # must not decide which version is current.
        env.inject_memory(newer)
    env.inject_memory(record)
    if step.kind == "stale":
        env.inject_memory(newer)
    if step.kind == "lapsed_newest":
        # The newest version lapsed (expired a second ago) over a live older
        # one: the key is absent now. A reader that drops lapsed versions
        # before it picks the newest answers with the superseded one.
        env.inject_memory({**newer, "expires_at": now - 1.0})
    unvouched = None
    if step.kind == "untrusted_newest":
        # The newest version is one only a user vouches for: below the trust
        # floor a workflow may read at (the key then absent), never an
        # excuse to answer with the verified version it superseded. Its
        # trust is given, not left to the runtime, so that the history says
        # which floors it is below.
        unvouched = {**newer, "provenance": "user_supplied", "trust": UNVOUCHED_TRUST}
        env.inject_memory(unvouched)
    # Recorded as what it is to a reader: a stale (superseded) version,
    # whatever order it arrived in; ``arrival`` says which.
    kind = "stale" if stale or step.kind.endswith("_newest") else step.kind
    extra: dict[str, str] = {"arrival": "late"} if step.kind == "stale_reordered" else {}
    if step.kind == "lapsed_newest":
        extra["newest"] = "expired"
    if step.kind == "untrusted_newest":
        extra["newest"] = "user_supplied"
    ctx.recorder.record(
        "info",
        EventF.MEMORY,
        "nemesis",
        {**record, "kind": kind, "owner_tenant": owner, **extra},
    )
    if unvouched is not None:
        # The newer version too: a live record of the tenant's own, legitimate
        # in a context only where its workflow's trust floor allows it.
        ctx.recorder.record(
            "info",
            EventF.MEMORY,
            "nemesis",
            {**unvouched, "kind": "untrusted", "owner_tenant": owner},
        )
    # Records a run may legitimately read (its own tenant's, live) change
    # its context and maybe its outcome; cross-tenant and expired ones must
    # change nothing, so their runs stay under every comparison.
    visible = step.at_written_key or step.kind in (
        "poisoned",
        "stale",
        "stale_reordered",
        "trusted",
        # the newer, user-supplied version is read wherever the floor allows
        "untrusted_newest",
    )
    runs = sorted(r.run_id for r in ctx.runs.values() if visible and r.tenant == step.tenant)
    ctx.recorder.fault("memory", True, memory_kind=step.kind, tenant=step.tenant, runs=runs)
