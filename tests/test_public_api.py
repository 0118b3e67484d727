"""The public names of each package, kept on purpose.

Every package says what it offers in ``__all__``; this test holds each list
to the one below, so adding or removing a public name is a visible change
(edit the list here, and say so in CHANGELOG.md). Run
``python tests/test_public_api.py`` to print the lists as they are now.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

EXPORTS: dict[str, list[str]] = {
    "harness": [
        "Adapter",
        "AdapterError",
        "BaseEnvironment",
        "CHECKERS",
        "Capability",
        "Declarations",
        "DurableState",
        "Engine",
        "Environment",
        "Example",
        "HarnessError",
        "History",
        "Interrupted",
        "Observation",
        "Outcome",
        "PROFILES",
        "Report",
        "RunSpec",
        "RunState",
        "RunView",
        "Scenario",
        "Session",
        "Settings",
        "Universe",
        "UsageError",
        "Verdict",
        "WorkerExit",
        "WorkerHandle",
        "WorkflowSpec",
        "World",
        "check_all",
        "load_adapter",
        "load_report",
        "load_settings",
        "probe_universe",
        "resilience_suite",
        "run",
    ],
    "harness.adapters": [
        "Adapter",
        "AdapterLifecycle",
        "ApprovalRecord",
        "BaseEnvironment",
        "Caller",
        "Capability",
        "ConstantClock",
        "ContextRecord",
        "CrashSpec",
        "Declarations",
        "DedupInbox",
        "DurableState",
        "Endpoint",
        "Environment",
        "FileClock",
        "ForkServerWorker",
        "IdlePolicy",
        "MemoryTarget",
        "Observation",
        "RunRegistry",
        "RunSpec",
        "RunState",
        "RunView",
        "STORAGE_KINDS",
        "Transition",
        "WorkerExit",
        "WorkerHandle",
        "WorkerSet",
        "WorkflowSpec",
        "World",
        "WorldClient",
        "release_routes",
        "route_worker",
        "shared_fork_server",
        "tcp_connections",
        "transitions_from_sequence",
        "work_until_idle",
    ],
    "harness.adapters.kit": [
        "AsyncBridge",
        "ConstantClock",
        "DedupInbox",
        "EPOCH",
        "FileClock",
        "GAVE_UP",
        "IdlePolicy",
        "OwnedFolder",
        "RunRecord",
        "RunRegistry",
        "UnsyncedSQLite",
        "WRONG_PARAMS",
        "WorkerSet",
        "other_tenant",
        "owned_folder",
        "run_async",
        "signed_decision",
        "spawn_owned",
        "transitions_from_sequence",
        "work_until_idle",
        "wrong_roles",
    ],
    "harness.checkers": [
        "CHECKERS",
        "Checker",
        "check_all",
        "check_approval_integrity",
        "check_context_rebuild",
        "check_effects_accounted",
        "check_exactly_once_effects",
        "check_legal_transitions",
        "check_memory_safety",
        "check_migration_safety",
        "check_progress",
        "check_resume_equivalence",
        "check_state_equivalence",
        "merge_verdicts",
    ],
    "harness.nemesis": [
        "OUTAGE_MODE",
        "Recorder",
        "ScenarioError",
        "StepContext",
        "WORKER_TIMEOUT",
        "advance",
        "advance_clock",
        "answer_operator",
        "approve",
        "arm_world_fault",
        "cancel",
        "continue_worker",
        "inject_memory",
        "kill_after",
        "kill_worker",
        "name_outage_runs",
        "needs",
        "network_fault",
        "race",
        "release",
        "resolve_worker_timeout",
        "storage_fault",
        "validate",
        "wait_worker",
        "worker_timeout",
        "worker_timeout_limit",
        "world_kind",
    ],
    "harness.outcome": [
        "Example",
        "Judgement",
        "KIND_FAMILY",
        "NEEDS_CAPABILITY",
        "NEEDS_FAMILY",
        "Outcome",
        "Tally",
        "judge",
    ],
    "harness.procs": [
        "DirectSpawner",
        "Exit",
        "ForkServer",
        "PreloadError",
        "RunnerError",
        "Spawner",
        "SpawnerClosed",
        "SpawnerLost",
        "Stopped",
        "TargetError",
        "Worker",
        "WorkerTimeout",
    ],
    "harness.report": [
        "CAPABILITY_GAPS",
        "MARKER",
        "REPORT_FILES",
        "REPORT_SCHEMA_VERSION",
        "MergeError",
        "Report",
        "ReportFolderError",
        "build_report",
        "claim_report_folder",
        "load_report",
        "load_run_folder",
        "merge_reports",
        "not_tested",
        "other_failures",
        "render_html",
        "render_junit",
        "render_markdown",
        "replay_command",
        "report_schema",
        "report_schema_text",
        "write_merged",
        "write_reports",
        "write_run",
    ],
    "harness.runner": [
        "Coverage",
        "RunResult",
        "ScenarioError",
        "WORKER_TIMEOUT",
        "run_scenario",
        "validate",
    ],
    "harness.scenarios": [
        "Commit",
        "EffectSite",
        "FAMILIES",
        "PLANTED_KEY",
        "ScenarioFileError",
        "TENANTS",
        "Universe",
        "WorkflowProfile",
        "episode",
        "exhaustive",
        "load_scenario_file",
        "probe_universe",
        "profile_workflow",
        "run_specs",
        "scenario_files",
        "scenarios",
        "schedule_kind",
        "targeted",
    ],
    "harness.session": [
        "Engine",
        "check_declarations",
        "probe_scenario",
        "run_exhaustive",
        "run_random_kill",
    ],
    "harness.world": [
        "ApprovalAuthority",
        "ArmedRule",
        "Caller",
        "CallerLike",
        "Capabilities",
        "DECISIONS",
        "ENV_WORLD_PATH",
        "FAULT_MODES",
        "FaultMode",
        "FaultRule",
        "FiredFault",
        "LOOKUP",
        "LOOKUP_FAULT_MODES",
        "MAX_SLOW_DELAY",
        "NotSupported",
        "OUTCOMES",
        "Outcome",
        "Rejected",
        "RequestRecord",
        "Response",
        "SCHEMA_VERSION",
        "SERVICES",
        "ServiceCounts",
        "ServiceFault",
        "ServiceKind",
        "ServiceSpec",
        "Unknown",
        "World",
        "WorldClient",
        "WorldError",
        "WorldUsageError",
        "canonical_json",
        "declare_services",
        "load_services",
        "open_world",
        "request_hash",
        "service_catalogue",
        "service_spec",
        "sign",
    ],
    "reference_runtime": [
        "Approval",
        "ArtifactRef",
        "AuditEvent",
        "CallContext",
        "Clock",
        "ConcurrencyConflict",
        "ConfigError",
        "Decision",
        "Delivery",
        "DuplicateRunError",
        "ExternalServices",
        "FileClock",
        "ForgedApprovalError",
        "FutureSchemaError",
        "IllegalTransitionError",
        "InboxMessage",
        "InputError",
        "LeaseLostError",
        "MalformedEventError",
        "ManualClock",
        "MemoryConflictError",
        "MemoryRecord",
        "ModelContext",
        "Operation",
        "OperationStatus",
        "OutcomeUnknown",
        "Provenance",
        "Run",
        "RunStatus",
        "Runtime",
        "RuntimeConfig",
        "RuntimeFault",
        "ServiceCapabilities",
        "ServiceError",
        "ServiceRejected",
        "ServiceResponse",
        "StaleWriteError",
        "StorageUnavailable",
        "SystemClock",
        "TRANSITIONS",
        "UnknownWorkflowError",
        "Worker",
        "WorkingState",
        "check_transition",
        "is_legal",
    ],
    "reference_runtime.store": [
        "Claim",
        "Commit",
        "RetentionPolicy",
        "Snapshot",
        "Store",
        "open_store",
    ],
}


def _names(package: str) -> list[str]:
    return list(importlib.import_module(package).__all__)


@pytest.mark.parametrize("package", sorted(EXPORTS))
def test_the_package_exports_what_it_promised(package: str) -> None:
    names = _names(package)
    assert len(names) == len(set(names)), f"{package}.__all__ repeats a name"
    assert sorted(names) == sorted(EXPORTS[package]), (
        f"{package}.__all__ changed: added {sorted(set(names) - set(EXPORTS[package]))}, "
        f"removed {sorted(set(EXPORTS[package]) - set(names))}"
    )
    module = importlib.import_module(package)
    missing = [n for n in names if not hasattr(module, n)]
    assert not missing, f"{package}.__all__ names what it does not have: {missing}"


def test_the_front_door_lists_the_public_api() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import harness; print(harness.__all__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "'run'" in out and "'Report'" in out and "'resilience_suite'" in out


def test_importing_harness_loads_nothing_heavy() -> None:
    """Worker processes import ``harness``: its names load on first use (only
    ``harness._lazy``, the standard-library hook that loads them, comes in)."""
    code = (
        "import sys, harness; "
        "print(sorted(m for m in sys.modules if m.startswith(('harness.', 'hypothesis', "
        "'pydantic', 'jinja2', 'rich'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['harness._lazy']", out


def test_an_unknown_name_is_an_attribute_error() -> None:
    import harness

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = harness.nope  # type: ignore[attr-defined]


if __name__ == "__main__":
    for pkg in sorted(EXPORTS):
        print(f"{pkg!r}: {sorted(_names(pkg))!r},")
