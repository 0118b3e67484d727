"""The scripted policies: the deterministic stand-in for an LLM.

A policy maps the context rebuilt for a run's current step to the next action.
One policy serves every version of its workflow's definition (it asks
``ctx.payload_version`` and ``d.after(step)``); the definitions, versions and
migrations that pick it are in :mod:`reference_runtime._workflows`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._model import (
    Action,
    AwaitEvent,
    CallTool,
    Complete,
    Fail,
    ModelContext,
    Proceed,
    RequestApproval,
    SpawnChild,
    StoreArtifact,
    WriteMemory,
)
from ._records import DEFAULT_TRUST, Delivery, Provenance

Policy = Callable[[ModelContext, "Definition"], Action]


@dataclass(frozen=True)
class Definition:
    name: str
    version: int
    steps: tuple[str, ...]
    policy: Policy
    #: (namespace template, min_trust): memory read into the context. The
    #: template is formatted with the run's variables.
    memory: tuple[tuple[str, float], ...] = ()

    def after(self, step: str) -> str:
        i = self.steps.index(step)
        return self.steps[i + 1] if i + 1 < len(self.steps) else "done"


def _digit(*parts: object) -> int:
    return int(hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def _fact(ctx: ModelContext, namespace: str, key: str, min_trust: float) -> Any:
    for f in ctx.memory:
        if f.namespace == namespace and f.key == key and f.trust >= min_trust:
            return f.value
    return None


def _verified_fact(ctx: ModelContext, namespace: str, key: str) -> Any:
    """A fact that may carry authority: written by the system itself.

    ``trust`` is a number the writer chose, so a user-supplied record can
    claim 1.0; the provenance is what says who vouches for it. Both must hold.
    """
    for f in ctx.memory:
        if (
            f.namespace == namespace
            and f.key == key
            and f.provenance is Provenance.SYSTEM_VERIFIED
            and f.trust >= DEFAULT_TRUST[Provenance.SYSTEM_VERIFIED]
        ):
            return f.value
    return None


# -- shared by the customer workflows (refund, onboarding) -------------------


def _approval_id(ctx: ModelContext, scope: str) -> str:
    return f"{ctx.run_id}:{scope}"


def _customer_approval(
    ctx: ModelContext,
    d: Definition,
    scope: str,
    action: str,
    params: dict[str, Any],
    approver_role: str,
) -> RequestApproval:
    """Ask ``approver_role`` to approve ``action`` with ``params`` on the run's
    customer, under ``_approval_id(ctx, scope)``; the request lives the input's
    ``approval_ttl`` seconds (default 3600)."""
    v = ctx.variables
    return RequestApproval(
        approval_id=_approval_id(ctx, scope),
        action=action,
        params=params,
        resource=f"customer:{v['customer_id']}",
        scope=scope,
        approver_role=approver_role,
        ttl_seconds=float(v.get("approval_ttl", 3600)),
        next_step=d.after(ctx.step),
    )


def _notify(d: Definition, step: str, to: str, template: str, **fields: Any) -> CallTool:
    """Email ``to`` with ``template`` (at least once: a second copy is harmless)."""
    return CallTool(
        service="email",
        action="notify",
        request={"to": to, "template": template, **fields},
        delivery=Delivery.AT_LEAST_ONCE,
        next_step=d.after(step),
    )


# -- refund ----------------------------------------------------------------


def _refund_amount(ctx: ModelContext) -> int:
    v = ctx.variables
    return int(v["amount_cents"]) if ctx.payload_version >= 2 else int(v["amount"])


def refund_policy(
    ctx: ModelContext, d: Definition, *, waiver: Callable[..., Any] = _verified_fact
) -> Action:
    v, step = ctx.variables, ctx.step
    amount = _refund_amount(ctx)
    params = {"customer_id": v["customer_id"], "amount_cents": amount}
    if ctx.payload_version >= 2:
        params["currency"] = v["currency"]
    approval_id = _approval_id(ctx, "refund")
    if step == "validate":
        if amount <= 0:
            return Fail(reason=f"refund amount must be positive, got {amount}")
        return Proceed(next_step=d.after(step), updates={"validated": True})
    if step == "fraud_check":
        return Proceed(next_step=d.after(step), updates={"fraud_score": _digit(ctx.run_id) % 100})
    if step == "approval":
        # Only system-verified memory may waive the approval; anything a user
        # or a tool wrote is data and never authority.
        limit = waiver(ctx, "policy", "auto_approve_below_cents")
        if isinstance(limit, int) and amount < limit:
            return Proceed(next_step=d.after(step), updates={"auto_approved": True})
        return _customer_approval(ctx, d, "refund", "payments.refund", params, "manager")
    if step == "refund":
        return CallTool(
            service="payments",
            action="refund",
            request=params,
            delivery=Delivery.EXACTLY_ONCE,
            requires_approval=None if v.get("auto_approved") else approval_id,
            next_step=d.after(step),
        )
    if step == "notify":
        ref = ctx.tool_results.get("refund", {}).get("external_ref")
        return _notify(d, step, v["customer_id"], "refund_done", refund=ref)
    return Complete(output={"refund": ctx.tool_results.get("refund", {}).get("external_ref")})


# -- onboarding --------------------------------------------------------------


def onboarding_policy(ctx: ModelContext, d: Definition) -> Action:
    v, step, cid = ctx.variables, ctx.step, ctx.variables["customer_id"]
    approval_id = _approval_id(ctx, "provision")
    plan = {"customer_id": cid, "plan": v.get("plan", "standard")}
    if step == "identity_check":
        return CallTool(
            service="identity",
            action="verify",
            request={"customer_id": cid, "name": v.get("name", cid)},
            delivery=Delivery.AT_LEAST_ONCE,
            next_step=d.after(step),
        )
    if step == "store_contract":
        return StoreArtifact(
            name="contract",
            content=f"Contract for {cid} on plan {plan['plan']} (tenant {ctx.tenant})",
            subject=cid,
            variable="contract_uri",
            next_step=d.after(step),
        )
    if step == "finance_approval":
        return _customer_approval(
            ctx, d, "provision", "provisioning.create_account", plan, "finance"
        )
    if step == "provision":
        return CallTool(
            service="provisioning",
            action="create_account",
            request=plan,
            # The onboarding request's own key (the run), not the customer's:
            # a lookup by it after a lost reply must find this run's account,
            # never another onboarding's for the same customer.
            business_key=f"{ctx.tenant}:{cid}:{ctx.run_id}",
            delivery=Delivery.EXACTLY_ONCE,
            requires_approval=approval_id,
            next_step=d.after(step),
        )
    if step == "welcome":
        return _notify(d, step, cid, "welcome")
    account = ctx.tool_results.get("provision", {}).get("external_ref")
    return Complete(output={"account": account, "contract": v.get("contract_uri")})


# -- research ----------------------------------------------------------------


def research_policy(ctx: ModelContext, d: Definition) -> Action:
    v, step = ctx.variables, ctx.step
    topic, n, ns = v["topic"], int(v.get("sources", 3)), f"research/{v['topic']}"
    if step == "gather":
        done = int(v.get("gathered", 0))
        if done < n:
            return WriteMemory(
                namespace=ns,
                key=f"evidence-{done}",
                value={"source": f"src-{_digit(topic, done) % 1000}", "claim": f"{topic} #{done}"},
                provenance=Provenance.TOOL_OUTPUT,
                subject=v.get("requester"),
                updates={"gathered": done + 1},
                next_step="gather",
            )
        return Proceed(next_step=d.after(step))
    evidence = sorted(
        (f for f in ctx.memory if f.namespace == ns and f.key.startswith("evidence-")),
        key=lambda f: f.key,
    )
    if step == "summarize":
        # Memory is data of any shape (a user, a tool, an old version wrote
        # it): read it defensively, never as a trusted schema.
        text = "; ".join(
            str(f.value.get("claim", f.value)) if isinstance(f.value, dict) else str(f.value)
            for f in evidence
        )
        return WriteMemory(
            namespace=ns,
            key="summary",
            value={"text": f"{len(evidence)} findings: {text}"},
            provenance=Provenance.TOOL_OUTPUT,
            subject=v.get("requester"),
            derived_from=tuple(f.memory_id for f in evidence),
            updates={"summarized": len(evidence)},
            next_step=d.after(step),
        )
    if step == "report":
        summary = _fact(ctx, ns, "summary", 0.0) or {"text": ""}
        return StoreArtifact(
            name="report",
            content=f"Report on {topic}\n{summary['text']}\n",
            subject=v.get("requester"),
            variable="report_uri",
            next_step=d.after(step),
        )
    if step == "send_report":
        return CallTool(
            service="email",
            action="send",
            request={"to": v.get("requester", "requester"), "report": v.get("report_uri")},
            delivery=Delivery.AT_MOST_ONCE,
            next_step=d.after(step),
        )
    return Complete(output={"report": v.get("report_uri"), "findings": len(evidence)})


# -- procurement (parent) and vendor quote (child) ---------------------------


def procurement_policy(ctx: ModelContext, d: Definition) -> Action:
    v, step = ctx.variables, ctx.step
    child_id = f"{ctx.run_id}.quote"
    if step == "request_quote":
        return SpawnChild(
            child_run_id=child_id,
            workflow="vendor_quote",
            objective=f"quote {v['quantity']} x {v['item']}",
            input={"item": v["item"], "quantity": v["quantity"]},
            allowed_tools=(),
            deadline_seconds=float(v.get("deadline", 3600)),
            next_step=d.after(step),
        )
    if step == "await_quote":
        return AwaitEvent(
            event_key=f"child:{child_id}",
            timeout_seconds=float(v.get("deadline", 3600)),
            next_step=d.after(step),
        )
    if step == "purchase":
        quote = ctx.events.get(f"child:{child_id}", {})
        if quote.get("error"):
            return Fail(reason=f"child run {child_id} failed: {quote['error']}")
        return CallTool(
            service="payments",
            action="charge",
            request={"vendor": v.get("vendor", "acme"), "amount_cents": quote["quote_cents"]},
            delivery=Delivery.EXACTLY_ONCE,
            next_step=d.after(step),
        )
    return Complete(output={"payment": ctx.tool_results.get("purchase", {}).get("external_ref")})


def vendor_quote_policy(ctx: ModelContext, d: Definition) -> Action:
    v = ctx.variables
    if ctx.step == "quote":
        unit = 100 + _digit(v["item"]) % 900
        return Proceed(next_step=d.after("quote"), updates={"quote_cents": unit * v["quantity"]})
    return Complete(output={"quote_cents": v["quote_cents"]})


def any_fact(ctx: ModelContext, namespace: str, key: str) -> Any:
    """A fact at any trust and of any provenance (what a careless waiver reads)."""
    return _fact(ctx, namespace, key, 0.0)
