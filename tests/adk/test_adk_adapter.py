"""The ADK adapter's parts: its size, its statuses, its declarations, its preload list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from adk_support import app
from code_size import package_lines_of_code

from harness.adapters import Capability
from harness.adapters._registry import SHIPPED
from harness.adapters.adk import ADKAdapter
from harness.adapters.adk._adapter import said, status_of

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "harness" / "adapters" / "adk"


def test_the_adapter_on_the_kit_is_at_most_200_lines_of_code() -> None:
    assert 60 < package_lines_of_code(PACKAGE) <= 200


def event(inv: str, content: dict[str, Any] | None = None, end: bool = False) -> dict[str, Any]:
    actions = {"end_of_agent": True} if end else {}
    return {"invocation_id": inv, "author": "refunds", "content": content, "actions": actions}


USER = {"role": "user", "parts": [{"text": "{}"}]}
CALL = {"role": "model", "parts": [{"function_call": {"name": "refund", "args": {}}}]}
REPLY = {"role": "user", "parts": [{"function_response": {"name": "refund", "response": {}}}]}
ANSWER = {"role": "model", "parts": [{"text": "Refunded"}]}


@pytest.mark.parametrize(
    ("events", "status"),
    [
        ([], "pending"),
        ([event("i", USER), event("i", CALL)], "running"),
        # the answer stored, end_of_agent not yet: ADK resumes it (ADK 2's gap)
        ([event("i", USER), event("i", CALL), event("i", REPLY), event("i", ANSWER)], "running"),
        (
            [
                event("i", USER),
                event("i", CALL),
                event("i", REPLY),
                event("i", ANSWER),
                event("i", end=True),
            ],
            "completed",
        ),
        # a tool that raised, then a resume: ADK ends the invocation on the call (ADK 1)
        ([event("i", USER), event("i", CALL), event("i"), event("i", end=True)], "failed"),
        # only the last invocation counts
        ([event("a", USER), event("a", ANSWER), event("a", end=True), event("b", USER)], "running"),
    ],
)
def test_statuses_come_from_the_last_invocation(events: list[dict[str, Any]], status: str) -> None:
    assert status_of(events)[0] == status


def test_durable_state_is_the_conversation_without_markers_or_error_events() -> None:
    events = [event("i", USER), event("i"), event("i", ANSWER), event("i", end=True)]
    assert [e["content"] for e in said(events)] == [USER, ANSWER]


def test_a_scripted_app_declares_crash_points_durable_state_and_the_model() -> None:
    adapter = ADKAdapter(app=app("careful"))
    assert adapter.capabilities == {
        Capability.CRASH_POINTS,
        Capability.DURABLE_STATE,
        Capability.MODEL_ENDPOINT,
    }
    assert Capability.CONCURRENT_WORKERS not in adapter.capabilities  # ADK 3: not atomic
    assert adapter.describe()["workload"] == "examples.adk_refund.workload:WORKLOAD"


def test_a_workload_that_is_not_one_is_refused_with_what_it_is() -> None:
    spec = "examples.adk_refund.workload:REFUND"
    with pytest.raises(ValueError, match=r"must name an ADKWorkload \(it is a WorkflowSpec\)"):
        ADKAdapter(app=app("careful"), workload=spec)


def test_it_is_registered_by_short_name_with_its_extra() -> None:
    assert SHIPPED["adk"].target == "harness.adapters.adk:ADKAdapter"
    assert SHIPPED["adk"].extra == "adk"


def test_the_preload_list_names_adks_lazy_modules_and_no_app() -> None:
    modules = json.loads((PACKAGE / "modules.json").read_text())
    assert "google.adk.flows.llm_flows.base_llm_flow" in modules
    assert not [m for m in modules if m.startswith("examples")]
