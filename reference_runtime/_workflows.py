"""The workflow catalogue, its payload schemas and their migrations.

A workflow *definition* is an ordered list of steps plus a scripted policy
(the deterministic stand-in for an LLM, in :mod:`._policies`) that maps a
rebuilt context to the next action. Definitions are versioned: a run stays on
the definition version it started on unless :func:`migrate_definition` moves
it explicitly. Payloads are versioned separately and upgraded on read by the
migration registry; a payload newer than the running code parks the run.

Code versions: a worker runs *code version* 1 or 2. Version 2 added the
refund ``fraud_check`` step (definition v2) and renamed the refund payload's
``amount`` to ``amount_cents`` with a new required ``currency`` (payload v2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from ._errors import FutureSchemaError, MalformedEventError, UnknownWorkflowError
from ._inputs import check_workflow_input
from ._policies import Definition as Definition  # re-exported: the executor reads it here
from ._policies import (
    any_fact,
    onboarding_policy,
    procurement_policy,
    refund_policy,
    research_policy,
    vendor_quote_policy,
)
from ._records import Approval, stable_hash

CURRENT_CODE_VERSION = 2

Migration = Callable[[dict[str, Any]], dict[str, Any]]


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


def _with_bugs(d: Definition, bugs: frozenset[str]) -> Definition:
    if d.name == "refund" and "untrusted-memory-authorizes" in bugs:
        # SEEDED BUG untrusted-memory-authorizes: the waiver is read like any
        # other memory -- no trust floor, no provenance check -- so whoever
        # can write a memory record can waive the manager's approval.
        return replace(d, policy=partial(refund_policy, waiver=any_fact), memory=(("policy", 0.0),))
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
        # Types and ranges too: a bad amount refused here is the caller's
        # mistake (exit 2); found by a worker, it looked like a transient
        # failure and was retried.
        check_workflow_input(name, version, payload)
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
