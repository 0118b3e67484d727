"""The workflow catalogue, its payload schemas and their migrations.

A workflow *definition* is an ordered list of steps plus a scripted policy
(the deterministic stand-in for an LLM) that maps a rebuilt context to the next
action. Definitions are versioned: a run stays on the definition version it
started on unless :func:`migrate_definition` moves it explicitly. Payloads are
versioned separately and upgraded on read by the migration registry; a payload
newer than the running code parks the run.

Code versions: a worker runs *code version* 1 or 2. Version 2 added the
refund ``fraud_check`` step (definition v2) and renamed the refund payload's
``amount`` to ``amount_cents`` with a new required ``currency`` (payload v2).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from ._errors import FutureSchemaError, MalformedEventError, UnknownWorkflowError
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
from ._records import DEFAULT_TRUST, Approval, Delivery, Provenance, stable_hash

CURRENT_CODE_VERSION = 2

Policy = Callable[[ModelContext, "Definition"], Action]
Migration = Callable[[dict[str, Any]], dict[str, Any]]


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
    approval_id = f"{ctx.run_id}:refund"
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
        return RequestApproval(
            approval_id=approval_id,
            action="payments.refund",
            params=params,
            resource=f"customer:{v['customer_id']}",
            scope="refund",
            approver_role="manager",
            ttl_seconds=float(v.get("approval_ttl", 3600)),
            next_step=d.after(step),
        )
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
        return CallTool(
            service="email",
            action="notify",
            request={"to": v["customer_id"], "template": "refund_done", "refund": ref},
            delivery=Delivery.AT_LEAST_ONCE,
            next_step=d.after(step),
        )
    return Complete(output={"refund": ctx.tool_results.get("refund", {}).get("external_ref")})


# -- onboarding --------------------------------------------------------------


def onboarding_policy(ctx: ModelContext, d: Definition) -> Action:
    v, step, cid = ctx.variables, ctx.step, ctx.variables["customer_id"]
    approval_id = f"{ctx.run_id}:provision"
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
        return RequestApproval(
            approval_id=approval_id,
            action="provisioning.create_account",
            params=plan,
            resource=f"customer:{cid}",
            scope="provision",
            approver_role="finance",
            ttl_seconds=float(v.get("approval_ttl", 3600)),
            next_step=d.after(step),
        )
    if step == "provision":
        return CallTool(
            service="provisioning",
            action="create_account",
            request=plan,
            business_key=f"{ctx.tenant}:{cid}",
            delivery=Delivery.EXACTLY_ONCE,
            requires_approval=approval_id,
            next_step=d.after(step),
        )
    if step == "welcome":
        return CallTool(
            service="email",
            action="notify",
            request={"to": cid, "template": "welcome"},
            delivery=Delivery.AT_LEAST_ONCE,
            next_step=d.after(step),
        )
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


# -- registry -----------------------------------------------------------------

REFUND_V1 = Definition(
    "refund",
    1,
    ("validate", "approval", "refund", "notify"),
    refund_policy,
    memory=(("policy", 1.0),),
)
REFUND_V2 = Definition(
    "refund",
    2,
    ("validate", "fraud_check", "approval", "refund", "notify"),
    refund_policy,
    memory=(("policy", 1.0),),
)
ONBOARDING_V1 = Definition(
    "onboarding",
    1,
    ("identity_check", "store_contract", "finance_approval", "provision", "welcome"),
    onboarding_policy,
)
RESEARCH_V1 = Definition(
    "research",
    1,
    ("gather", "summarize", "report", "send_report"),
    research_policy,
    memory=(("research/{topic}", 0.0),),
)
PROCUREMENT_V1 = Definition(
    "procurement", 1, ("request_quote", "await_quote", "purchase"), procurement_policy
)
VENDOR_QUOTE_V1 = Definition("vendor_quote", 1, ("quote",), vendor_quote_policy)

#: definitions known to each code version; the newest is used for new runs.
DEFINITIONS_BY_CODE: dict[int, tuple[Definition, ...]] = {
    1: (REFUND_V1, ONBOARDING_V1, RESEARCH_V1, PROCUREMENT_V1, VENDOR_QUOTE_V1),
    2: (REFUND_V1, REFUND_V2, ONBOARDING_V1, RESEARCH_V1, PROCUREMENT_V1, VENDOR_QUOTE_V1),
}


def _refund_v1_to_v2(p: dict[str, Any]) -> dict[str, Any]:
    out = {k: val for k, val in p.items() if k != "amount"}
    out["amount_cents"] = p["amount"]
    out.setdefault("currency", "USD")
    return out


def _refund_params_v1_to_v2(params: dict[str, Any]) -> dict[str, Any]:
    # v1 refunds were in US cents; v2 says so explicitly.
    return {**params, "currency": params.get("currency", "USD")}


#: workflow -> {from_version: migration to from_version + 1}
MIGRATIONS: dict[str, dict[int, Migration]] = {"refund": {1: _refund_v1_to_v2}}
#: workflow -> {payload version: {action: migration of an approval's params
#: into that version's shape}}. An approval names the parameters of the
#: action as the code that requested it built them; when a payload migration
#: changes how that action's request is built, the approved parameters must be
#: read the same way, or every run approved before a deploy is denied after it.
#: Each entry only makes explicit what the older version implied, and must be
#: idempotent (it also sees parameters already in its version's shape).
APPROVAL_PARAM_MIGRATIONS: dict[str, dict[int, dict[str, Migration]]] = {
    "refund": {2: {"payments.refund": _refund_params_v1_to_v2}},
}
#: workflow -> payload version written by each code version
PAYLOAD_VERSION: dict[int, dict[str, int]] = {
    1: {"refund": 1, "onboarding": 1, "research": 1, "procurement": 1, "vendor_quote": 1},
    2: {"refund": 2, "onboarding": 1, "research": 1, "procurement": 1, "vendor_quote": 1},
}
#: required input fields per workflow and payload version
REQUIRED_INPUT: dict[tuple[str, int], tuple[str, ...]] = {
    ("refund", 1): ("customer_id", "amount"),
    ("refund", 2): ("customer_id", "amount_cents", "currency"),
    ("onboarding", 1): ("customer_id",),
    ("research", 1): ("topic",),
    ("procurement", 1): ("item", "quantity"),
    ("vendor_quote", 1): ("item", "quantity"),
}


def _any_fact(ctx: ModelContext, namespace: str, key: str) -> Any:
    return _fact(ctx, namespace, key, 0.0)


def _with_bugs(d: Definition, bugs: frozenset[str]) -> Definition:
    if d.name == "refund" and "untrusted-memory-authorizes" in bugs:
        # SEEDED BUG untrusted-memory-authorizes: the waiver is read like any
        # other memory -- no trust floor, no provenance check -- so whoever
        # can write a memory record can waive the manager's approval.
        return replace(
            d, policy=partial(refund_policy, waiver=_any_fact), memory=(("policy", 0.0),)
        )
    return d


class Registry:
    """The workflows one code version knows, with payload upgrades on read."""

    def __init__(
        self, code_version: int = CURRENT_CODE_VERSION, *, bugs: frozenset[str] = frozenset()
    ) -> None:
        if code_version not in DEFINITIONS_BY_CODE:
            raise UnknownWorkflowError(
                f"unknown code version {code_version}; known: {sorted(DEFINITIONS_BY_CODE)}"
            )
        self.code_version = code_version
        self._defs = {
            (d.name, d.version): _with_bugs(d, bugs) for d in DEFINITIONS_BY_CODE[code_version]
        }
        self._payload_versions = PAYLOAD_VERSION[code_version]

    def names(self) -> list[str]:
        return sorted({name for name, _ in self._defs})

    def definition(self, name: str, version: int | None = None) -> Definition:
        versions = sorted(v for n, v in self._defs if n == name)
        if not versions:
            raise UnknownWorkflowError(
                f"unknown workflow {name!r}; this worker (code v{self.code_version}) knows: "
                f"{', '.join(self.names())}"
            )
        if version is None:
            version = versions[-1]
        if (name, version) not in self._defs:
            if version > versions[-1]:
                raise FutureSchemaError(f"workflow {name!r} definition", version, versions[-1])
            raise UnknownWorkflowError(
                f"workflow {name!r} has no definition v{version} here; known: {versions}"
            )
        return self._defs[(name, version)]

    def payload_version(self, name: str) -> int:
        return self._payload_versions[name]

    def validate_input(self, name: str, payload: dict[str, Any]) -> dict[str, Any]:
        self.definition(name)
        version = self.payload_version(name)
        missing = [f for f in REQUIRED_INPUT[(name, version)] if f not in payload]
        if missing:
            raise MalformedEventError(
                f"input for workflow {name!r} (payload v{version}) lacks {', '.join(missing)}; "
                f"required fields: {', '.join(REQUIRED_INPUT[(name, version)])}"
            )
        return dict(payload)

    def upgrade(self, name: str, payload: dict[str, Any], version: int) -> dict[str, Any]:
        """Upgrade ``payload`` from ``version`` to this code's version.

        Raises FutureSchemaError for a payload newer than this code knows.
        """
        target = self.payload_version(name)
        if version > target:
            raise FutureSchemaError(f"{name} working-state payload", version, target)
        steps = MIGRATIONS.get(name, {})
        while version < target:
            payload = steps[version](payload)
            version += 1
        return payload


def upgrade_approval(registry: Registry, workflow: str, approval: Approval) -> Approval:
    """``approval`` with its params (and ``params_hash``) read in this code's
    shape, for comparing with a request this code builds. The stored approval
    -- what the approver actually signed -- is never rewritten."""
    params = dict(approval.params)
    for version, by_action in sorted(APPROVAL_PARAM_MIGRATIONS.get(workflow, {}).items()):
        migrate = by_action.get(approval.action)
        if migrate is not None and version <= registry.payload_version(workflow):
            params = migrate(params)
    if params == approval.params:
        return approval
    return approval.model_copy(update={"params": params, "params_hash": stable_hash(params)})


def migrate_definition(registry: Registry, name: str, step: str, to_version: int) -> str:
    """The step a run at ``step`` continues from after moving to ``to_version``.

    Steps keep their names across versions; an inserted step that lies before
    the run's current position is not run retroactively.
    """
    target = registry.definition(name, to_version)
    if step in target.steps or step == "done":
        return step
    raise UnknownWorkflowError(
        f"step {step!r} of {name!r} does not exist in definition v{to_version}; "
        f"steps there: {', '.join(target.steps)}"
    )
