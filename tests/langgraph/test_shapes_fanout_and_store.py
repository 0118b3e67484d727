"""Two more shapes LangGraph users build (issue 17): a ``Send`` fan-out and a long-term ``Store``.

``examples/langgraph_fanout``: one parallel branch per order line, each
refunding its line, then a reduce node. The naive app's key is a fresh uuid
per call: a kill after one branch's refund makes the resumed branch refund
that line again. ``examples/langgraph_store``: a node puts a memory item in
LangGraph's ``Store`` and then charges; the naive app keys the item by a
fresh uuid, and a kill after the charge leaves two items (``state_equivalence``
sees the store through the adapter's durable state).

Each finding is one explicit scenario on both checkpointers; then one short
search per app on SQLite, as ``harness run`` does it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from lg_support import adapter, execute, failed, result

from harness.history import History
from harness.model import (
    ArmWorldFault,
    EventF,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
    Verdict,
)
from harness.testing import run_suite

pytestmark = pytest.mark.slow

ADAPTER = "harness.adapters.langgraph:LangGraphAdapter"
FANOUT_NAIVE = "examples.langgraph_fanout.naive:APP"
FANOUT_CORRECT = "examples.langgraph_fanout.correct:APP"
STORE_NAIVE = "examples.langgraph_store.naive:APP"
STORE_CORRECT = "examples.langgraph_store.correct:APP"

ORDER = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="refund_order",
    input={
        "order_id": "o-1",
        "customer_id": "c-1",
        "currency": "EUR",
        "lines": [
            {"sku": "mug", "amount_cents": 1250},
            {"sku": "tea", "amount_cents": 480},
            {"sku": "pot", "amount_cents": 3900},
        ],
    },
)
SUBSCRIPTION = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="subscribe",
    input={"customer_id": "c-1", "plan": "pro", "amount_cents": 1900, "currency": "EUR"},
)


def kill_after(run: RunSpec, kind: str, nth: int = 1) -> Scenario:
    """The worker is killed right after the world applied the ``nth`` call of ``kind``."""
    service, _, action = kind.partition(".")
    return Scenario(
        name=f"kill-after-{kind}-{nth}",
        steps=(
            Submit(run=run),
            ArmWorldFault(service=service, action=action, nth=nth, mode="kill_after_apply"),
            RunWorker(worker_id="w1"),
            Quiesce(),
        ),
    )


def applied(history: History, kind: str) -> list[dict[str, Any]]:
    """The world's effects of ``kind`` that were applied (not deduplicated)."""
    return [
        e.value
        for e in history.by_f(EventF.EFFECT)
        if e.value.get("kind") == kind and e.value.get("applied") and not e.value["deduplicated"]
    ]


def per_line(history: History) -> Counter[str]:
    return Counter(v["request"]["sku"] for v in applied(history, "payments.refund"))


def store_items(history: History) -> list[dict[str, Any]]:
    state = next(e.value["state"] for e in history.by_f(EventF.STATE))
    items: list[dict[str, Any]] = state["__store__"]
    return items


# -- the fan-out ----------------------------------------------------------------------


def test_a_kill_after_one_branchs_refund_refunds_that_line_twice_in_the_naive_fanout(
    checkpointer: tuple[str, str | None], tmp_path: Path
) -> None:
    ex = execute(
        adapter(FANOUT_NAIVE, *checkpointer), kill_after(ORDER, "payments.refund"), tmp_path
    )
    once = result(ex, "exactly_once_effects")
    assert once.verdict is Verdict.FAIL, once.message
    assert "payments.refund" in once.message and "applied 2 times" in once.message
    history = History.load(ex.folder / "history.jsonl")
    twice = [history.events[i].value for i in once.witness]
    # One line, refunded by the killed worker and by the one that resumed,
    # each time with a key of its own: nothing the service could deduplicate.
    assert len({v["request"]["sku"] for v in twice}) == 1
    keys = [v["idempotency_key"] for v in twice]
    assert None not in keys and len(set(keys)) == 2
    # Every line was refunded, the run completed.
    assert set(per_line(history)) == {"mug", "tea", "pot"}
    assert "progress" not in failed(ex)


def test_with_sync_durability_a_kill_in_the_reduce_node_runs_no_branch_again(
    checkpointer: tuple[str, str | None], tmp_path: Path
) -> None:
    # The checkpoint that closes the fan-out superstep is written before the
    # reduce node starts: the resume runs the reduce node alone (its
    # at-least-once notification twice), even without stable keys.
    ex = execute(
        adapter(FANOUT_NAIVE, *checkpointer, durability="sync"),
        kill_after(ORDER, "email.notify"),
        tmp_path,
    )
    history = History.load(ex.folder / "history.jsonl")
    assert per_line(history) == {"mug": 1, "tea": 1, "pot": 1}
    assert len(applied(history, "email.notify")) == 2
    assert failed(ex) == []


@pytest.mark.parametrize(
    "scenario",
    [
        kill_after(ORDER, "payments.refund"),
        kill_after(ORDER, "payments.refund", nth=3),
        kill_after(ORDER, "email.notify"),
    ],
    ids=lambda s: s.name,
)
def test_the_correct_fanout_refunds_each_line_once_whatever_branch_runs_again(
    checkpointer: tuple[str, str | None], scenario: Scenario, tmp_path: Path
) -> None:
    ex = execute(adapter(FANOUT_CORRECT, *checkpointer), scenario, tmp_path)
    assert failed(ex) == []
    history = History.load(ex.folder / "history.jsonl")
    assert per_line(history) == {"mug": 1, "tea": 1, "pot": 1}
    assert result(ex, "state_equivalence").verdict is Verdict.PASS
    if scenario.name.startswith("kill-after-payments.refund"):
        # the killed branch ran again; the service absorbed its repeat
        assert result(ex, "exactly_once_effects").counts["absorbed_duplicates"] >= 1


# -- the store ------------------------------------------------------------------------


def test_a_kill_after_the_charge_leaves_two_memories_in_the_naive_store_app(
    checkpointer: tuple[str, str | None], tmp_path: Path
) -> None:
    ex = execute(
        adapter(STORE_NAIVE, *checkpointer), kill_after(SUBSCRIPTION, "payments.charge"), tmp_path
    )
    # The charge is keyed by the thread id: applied once. The memory is not.
    assert failed(ex) == ["state_equivalence"]
    message = result(ex, "state_equivalence").message
    assert "$.__store__[1]" in message and "(absent) in the oracle" in message
    history = History.load(ex.folder / "history.jsonl")
    assert len(applied(history, "payments.charge")) == 1
    items = store_items(history)
    assert len(items) == 2 and items[0] == items[1]
    assert items[0]["namespace"] == ["memories", "acme", "c-1"]


@pytest.mark.parametrize(
    "kind", ["payments.charge", "email.notify"], ids=lambda k: f"kill-after-{k}"
)
def test_the_correct_store_app_keeps_one_memory(
    checkpointer: tuple[str, str | None], kind: str, tmp_path: Path
) -> None:
    ex = execute(adapter(STORE_CORRECT, *checkpointer), kill_after(SUBSCRIPTION, kind), tmp_path)
    assert failed(ex) == []
    equivalence = result(ex, "state_equivalence")
    assert equivalence.verdict is Verdict.PASS and equivalence.evidence == 1
    history = History.load(ex.folder / "history.jsonl")
    assert [i["value"]["plan"] for i in store_items(history)] == ["pro"]


# -- searches, as harness run does them -----------------------------------------------


def search(app: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    monkeypatch.setenv("HARNESS_MAX_EXAMPLES", "8")
    monkeypatch.setenv("HARNESS_SEED", "0")
    monkeypatch.chdir(tmp_path)  # no pyproject settings apply
    return run_suite(ADAPTER, {"app": app}, None)


def steps_of(report: dict[str, Any], prop: dict[str, Any]) -> list[dict[str, Any]]:
    where = Path(report["_folder"]) / prop["counterexample"] / "scenario.json"
    steps: list[dict[str, Any]] = json.loads(where.read_text())["steps"]
    return steps


@pytest.mark.parametrize(
    ("app", "expected", "kind"),
    [
        (FANOUT_NAIVE, "exactly_once_effects", "payments.refund"),
        (STORE_NAIVE, "state_equivalence", "payments.charge"),
    ],
    ids=["fanout", "store"],
)
def test_a_short_search_finds_the_naive_apps_bug_with_a_minimal_counterexample(
    app: str, expected: str, kind: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    report = search(app, monkeypatch, tmp_path)
    assert report["verdict"] == "fail", report["_log"]
    props = {p["name"]: p for p in report["properties"]}
    assert props[expected]["verdict"] == "fail", report["_log"]
    steps = steps_of(report, props[expected])
    assert len(steps) <= 6, steps
    assert steps[-1]["op"] == "quiesce"
    kills = [s for s in steps if s["op"] == "arm_world_fault" and s["mode"] == "kill_after_apply"]
    assert [f"{s['service']}.{s['action']}" for s in kills] == [kind]


@pytest.mark.parametrize("app", [FANOUT_CORRECT, STORE_CORRECT], ids=["fanout", "store"])
def test_a_short_search_finds_no_failure_in_the_correct_apps(
    app: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    report = search(app, monkeypatch, tmp_path)
    assert report["verdict"] == "pass", report["_log"]
    verdicts = {p["name"]: p["verdict"] for p in report["properties"]}
    for prop in (
        "exactly_once_effects",
        "resume_equivalence",
        "progress",
        "legal_transitions",
        "state_equivalence",
    ):
        assert verdicts[prop] == "pass", (prop, report["_log"])
    assert report["scenarios"] >= 8
