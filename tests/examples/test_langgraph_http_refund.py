"""The LangGraph support agent of examples/langgraph_http_refund, tested as it is.

One targeted scenario each through ``Engine.execute``: the world kills the
worker right after the payments API applied the refund, and the next worker
carries the ticket's thread on from its last checkpoint. Without an
``Idempotency-Key`` the tool call runs again and refunds twice; with one the
provider answers the repeat with the first refund. A model fault at the
world's endpoint fires into ``ChatOpenAI`` and the run still ends as a
fault-free one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.model import ArmModelFault, ArmWorldFault, Step

pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs the langgraph extra")
pytest.importorskip(
    "langchain_openai", reason="needs langchain-openai (the langgraph extra): the app's model"
)
pytest.importorskip("uvicorn", reason="needs the http extra: the world's HTTP face")

pytestmark = pytest.mark.slow

KILL_AFTER_REFUND = ArmWorldFault(service="payments", action="refund", mode="kill_after_apply")


def _example(
    app: str,
    workdir: Path,
    faults: tuple[Step, ...] = (KILL_AFTER_REFUND,),
    history: list[dict[str, Any]] | None = None,
) -> dict[str, str]:
    from examples.langgraph_http_refund.adapter import LangGraphHttpRefundAdapter
    from harness import Engine, load_settings
    from harness.model import Quiesce, RunSpec, RunWorker, Scenario, Submit

    run = RunSpec(
        run_id="r1",
        tenant="acme",
        workflow="refund",
        input={"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
    )
    scenario = Scenario(
        name="faults-around-the-refund",
        steps=(Submit(run=run), *faults, RunWorker(worker_id="w1"), Quiesce()),
    )
    adapter = LangGraphHttpRefundAdapter(app)
    engine = Engine(adapter, load_settings("dev", start=workdir), workdir=workdir)
    example = engine.execute(scenario, folder=workdir / "example")
    if history is not None:
        lines = (workdir / "example" / "history.jsonl").read_text().splitlines()
        history.extend(json.loads(line) for line in lines)
    return {r.name: r.verdict.value for r in example.results}


def test_a_kill_after_the_refund_refunds_twice_without_a_key(tmp_path: Path) -> None:
    """The next worker runs the checkpointed tool call again: a second refund."""
    verdicts = _example("naive", tmp_path)
    assert verdicts["exactly_once_effects"] == "fail", verdicts


def test_the_same_kill_is_harmless_with_an_idempotency_key(tmp_path: Path) -> None:
    history: list[dict[str, Any]] = []
    verdicts = _example("careful", tmp_path, history=history)
    assert verdicts["exactly_once_effects"] == "pass", verdicts
    assert verdicts["resume_equivalence"] == "pass", verdicts
    # the world killed w1 after the refund; the next worker ran the
    # checkpointed tool call again, with the same key: one refund applied
    killed = [e["value"] for e in history if e["f"] == "worker" and e["value"].get("signal")]
    assert [w["worker_id"] for w in killed] == ["w1"], killed
    refunds = [e["value"] for e in history if e["f"] == "effect"]
    assert len(refunds) == 2 and {r["idempotency_key"] for r in refunds} == {"r1:refund"}, refunds
    calls = [e["value"] for e in history if e["f"] == "model"]
    assert calls and all(c["run_id"] == "r1" and c["tenant"] == "acme" for c in calls), calls


def test_a_rate_limit_fires_into_chat_openai_and_the_run_ends_as_a_fault_free_one(
    tmp_path: Path,
) -> None:
    history: list[dict[str, Any]] = []
    verdicts = _example("careful", tmp_path, (ArmModelFault(mode="rate_limited"),), history)
    assert verdicts["exactly_once_effects"] == "pass", verdicts
    assert verdicts["resume_equivalence"] == "pass", verdicts
    faults = [e["value"].get("fault") for e in history if e["f"] == "model"]
    assert "rate_limited" in faults, faults


def test_nothing_in_the_apps_path_loads_a_tiktoken_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """langchain-openai brings tiktoken, which downloads its BPE files the
    first time an encoding is loaded: the app must run a ticket without one."""
    import tiktoken.load

    from examples.langgraph_http_refund import careful, support_agent
    from examples.langgraph_http_refund.adapter import SCRIPT
    from harness.world import World, parse_chat_script

    def offline(*args: object, **kwargs: object) -> bytes:
        raise AssertionError(f"tiktoken would read or download {args}")

    monkeypatch.setattr(tiktoken.load, "read_file_cached", offline)
    world = World(tmp_path / "world.db").create()
    face = world.serve_http(model=parse_chat_script(SCRIPT))
    try:
        monkeypatch.setenv("PAYMENTS_API_URL", face.url)
        monkeypatch.setenv("OPENAI_BASE_URL", face.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "not-needed-for-the-world")
        db = support_agent.connect(tmp_path / "support.db")
        saver = support_agent.checkpointer(tmp_path / "support.db")
        graph = support_agent.build_graph(careful.TOOLS, saver)
        request = {"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"}
        support_agent.open_ticket(db, "t1", request)
        answer = support_agent.answer_ticket(db, graph, "t1")
        assert answer.startswith("Refunded: "), answer
        assert support_agent.open_tickets(db, graph) == []
        saver.conn.close()
        db.close()
    finally:
        face.close()
        world.close()
