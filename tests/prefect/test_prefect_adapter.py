"""The Prefect adapter's parts: its size, its registration, its options, its recovery rule."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from code_size import package_lines_of_code
from prefect_support import PREFECT  # noqa: F401  (skips the module without Prefect)

from harness.adapters import Capability
from harness.adapters._registry import SHIPPED
from harness.adapters.kit import FileClock
from harness.adapters.prefect import PrefectAdapter
from harness.adapters.prefect._adapter import LEASE, TABLE, due

ROOT = Path(__file__).resolve().parents[2]
APP = "examples.prefect_refund.careful:APP"


def test_the_adapter_on_the_kit_is_at_most_200_lines_of_code() -> None:
    assert 100 < package_lines_of_code(ROOT / "harness" / "adapters" / "prefect") <= 200


def test_it_is_registered_by_short_name_with_its_extra() -> None:
    assert SHIPPED["prefect"].target == "harness.adapters.prefect:PrefectAdapter"
    assert SHIPPED["prefect"].extra == "prefect"


def test_exit_detection_declares_no_clock_heartbeats_do() -> None:
    exit_ = PrefectAdapter(app=APP)
    assert exit_.capabilities == {Capability.CRASH_POINTS, Capability.CONCURRENT_WORKERS}
    beating = PrefectAdapter(app=APP, crash_detection="heartbeat")
    assert Capability.CLOCK in beating.capabilities
    assert beating.describe()["crash_detection"] == "heartbeat"
    assert exit_.describe()["workload"] == "examples.prefect_refund.workload:WORKLOAD"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"app": "examples.prefect_refund.workload:REFUND"}, "WorkflowSpec"),
        ({"app": APP, "workload": "examples.prefect_refund.careful:APP"}, "Flow"),
        ({"app": APP, "crash_detection": "lease"}, "'lease'"),
    ],
)
def test_what_is_not_a_flow_a_workload_or_a_detection_is_refused(
    options: dict[str, str], named: str
) -> None:
    with pytest.raises(ValueError, match="a Prefect flow, workload: a PrefectWorkload") as err:
        PrefectAdapter(**options)
    assert named in str(err.value)


def test_an_ended_run_moves_no_more() -> None:
    assert TABLE["COMPLETED"] == [] and TABLE["FAILED"] == []
    assert TABLE["CRASHED"] == ["SCHEDULED"]  # AwaitingRetry, the retry automation


def run(kind: str, owner: str | None = None) -> Any:
    return SimpleNamespace(
        id="fr-1", state_type=SimpleNamespace(value=kind), infrastructure_pid=owner
    )


def test_exit_detection_crashes_a_run_whose_process_is_gone(tmp_path: Path) -> None:
    me = f"host:{os.getpid()}"
    assert due(run("RUNNING", me), tmp_path, None) is None
    assert due(run("RUNNING", "host:999999999"), tmp_path, None) == "crash"
    assert due(run("PENDING", None), tmp_path, None) == "crash"
    assert due(run("CRASHED"), tmp_path, None) == "retry"
    assert due(run("SCHEDULED"), tmp_path, None) == "claim"
    assert due(run("COMPLETED"), tmp_path, None) is None


def test_heartbeat_detection_crashes_a_run_that_stopped_beating(tmp_path: Path) -> None:
    clock = FileClock(tmp_path / "clock", start=1000.0)
    FileClock(tmp_path / "heartbeat-fr-1", start=1000.0)
    me = f"host:{os.getpid()}"  # alive: only the heartbeat counts
    assert due(run("RUNNING", me), tmp_path, clock) is None
    clock.advance(LEASE - 1)
    assert due(run("RUNNING", me), tmp_path, clock) is None
    clock.advance(1)
    assert due(run("RUNNING", me), tmp_path, clock) == "crash"
