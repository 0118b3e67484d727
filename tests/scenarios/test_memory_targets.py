"""Where planted memory is aimed: ``WorkflowSpec.memory_targets`` (templates
over the run's input, checked when declared), the trust floor the runs read
at (``WorkflowSpec.memory_floor``, checked when declared), and what a report
says when the memory family found nowhere to aim."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from harness import run
from harness.adapters import MemoryTarget, WorkflowSpec
from harness.adapters._loading import load_adapter
from harness.adapters.reference import ReferenceAdapter
from harness.model import RunSpec
from harness.report import not_tested
from harness.scenarios import Universe


def test_a_target_names_input_fields_and_leaves_unknown_ones_as_written() -> None:
    t = MemoryTarget(namespace="research/{topic}", key="e-{n}", value=1)
    assert t.at({"topic": "tides", "n": 9}) == ("research/tides", "e-9")
    assert t.at({}) == ("research/{topic}", "e-{n}")
    assert MemoryTarget(namespace="a{{b}}", key="k").at({}) == ("a{b}", "k")


@pytest.mark.parametrize(
    ("namespace", "said"),
    [
        ("research/{topic", "is not a template"),
        ("research/{0}", "give an input field's name"),
        ("research/{a.b}", "give an input field's name"),
        ("", "at least 1 character"),
    ],
)
def test_a_bad_template_is_refused_with_how_to_fix_it(namespace: str, said: str) -> None:
    with pytest.raises(ValidationError, match="namespace") as err:
        MemoryTarget(namespace=namespace, key="k")
    assert said in str(err.value)


@pytest.mark.parametrize(
    ("floor", "held"),
    [
        (1.0, 1.0),
        (0, 0.0),
        ({"policy": 1, "notes/{user}": 0.5}, {"policy": 1.0, "notes/{user}": 0.5}),
        (None, None),
    ],
)
def test_a_memory_floor_is_a_trust_or_one_per_namespace(floor: object, held: object) -> None:
    assert WorkflowSpec(name="w", inputs=({},), memory_floor=floor).memory_floor == held


@pytest.mark.parametrize(
    ("floor", "said"),
    [
        (1.5, "memory_floor is 1.5: give the lowest trust"),
        (-0.1, "memory_floor is -0.1"),
        (float("nan"), "memory_floor is nan"),
        (True, "memory_floor is True"),  # not 1.0: a flag is not a trust
        ("verified", "memory_floor is 'verified'"),
        ({}, "empty mapping"),
        ({"policy": 2}, "memory_floor['policy'] is 2"),
        ({"notes/{user": 0.5}, "'notes/{user' is not a template"),
        ({"": 0.5}, "give a namespace template"),
    ],
)
def test_a_memory_floor_off_the_trust_scale_is_refused_with_how_to_fix_it(
    floor: object, said: str
) -> None:
    with pytest.raises(ValidationError, match="memory_floor") as err:
        WorkflowSpec(name="w", inputs=({},), memory_floor=floor)
    assert said in str(err.value)


def test_the_reference_workflows_declare_where_their_runs_read() -> None:
    adapter = load_adapter("reference")
    u = Universe(
        workflows=tuple(adapter.workflows()),
        crash_points=(),
        capabilities=frozenset(adapter.capabilities),
    )
    refund = RunSpec(run_id="r1", tenant="acme", workflow="refund", input={})
    research = RunSpec(run_id="r2", tenant="acme", workflow="research", input={"topic": "tides"})
    procurement = RunSpec(run_id="r3", tenant="acme", workflow="procurement", input={})
    assert [t[:2] for t in u.memory_targets(refund)] == [("policy", "auto_approve_below_cents")]
    assert [t[:2] for t in u.memory_targets(research)] == [("research/tides", "evidence-9")]
    assert u.memory_targets(procurement) == ()  # reads no memory: nothing to plant at
    assert "memory" in u.enabled()
    # and the floors they read at (reference_runtime/_workflows.py: min_trust)
    floors = {w.name: w.memory_floor for w in adapter.workflows()}
    assert floors == {"refund": 1.0, "research": 0.0, "onboarding": None, "procurement": None}


def test_a_memory_family_with_nowhere_to_aim_is_reported_not_tested() -> None:
    adapter = load_adapter("reference")
    gaps = not_tested(adapter, asked=None, ran=("crash", "world"))
    (memory,) = [g for g in gaps if g["capability"] == "memory_injection"]
    assert "memory_targets" in memory["what"]
    # not when it ran, not when it was not asked for, not without a run's families
    assert not [
        g for g in not_tested(adapter, ran=("memory",)) if g["capability"] == "memory_injection"
    ]
    assert not [
        g
        for g in not_tested(adapter, asked=("crash",), ran=("crash",))
        if g["capability"] == "memory_injection"
    ]
    assert not [g for g in not_tested(adapter) if g["capability"] == "memory_injection"]


class _RefundNamesNoMemory(ReferenceAdapter):
    """The reference runtime, its refund workflow alone and declared without
    memory targets: its fault-free run's contexts list no memory record."""

    def workflows(self) -> list[WorkflowSpec]:
        (refund,) = [w for w in super().workflows() if w.name == "refund"]
        return [refund.model_copy(update={"memory_targets": ()})]


def test_a_run_whose_memory_family_found_nowhere_to_aim_says_so(tmp_path: Path) -> None:
    log: list[str] = []
    report = run(
        _RefundNamesNoMemory(),
        profile="dev",
        max_examples=2,
        seed=0,
        report_dir=tmp_path / "report",
        log=log.append,
    )
    assert "memory" not in report.families
    (gap,) = [g for g in report.not_tested if g.capability == "memory_injection"]
    assert "memory_targets" in gap.what
    said = [line for line in log if "not tested (memory_injection" in line]
    assert said and "declared, but nowhere to aim it" in said[0], log
    assert report.faults.get("memory") is None  # nothing planted, nothing counted
