"""The adapter's shape: its size, its status mapping, its app loading, check-adapter."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from code_size import lines_of_code
from oa_support import ADAPTER, CAREFUL, NAIVE

from harness.adapters.openai_agents import OpenAIAgentsAdapter
from harness.adapters.openai_agents._adapter import status_of
from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "harness" / "adapters" / "openai_agents"


def test_the_adapter_on_the_kit_is_at_most_126_lines_of_code() -> None:
    # 120 (issue 12), the runnable() probe that spares the final quiesce its
    # confirming worker, and the agent built once in the fork server with the
    # SDK's modules every worker imported preloaded (issue 33)
    total = sum(lines_of_code(p.read_text()) for p in PACKAGE.glob("*.py"))
    assert 60 < total <= 126, total


USER = {"role": "user", "content": "refund c-1"}
CALL = {"type": "function_call", "name": "refund", "call_id": "c", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c", "output": "pay-1"}
ANSWER = {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}


@pytest.mark.parametrize(
    ("items", "status"),
    [
        ([], "pending"),
        ([USER], "pending"),
        ([USER, CALL], "running"),
        ([USER, CALL, OUTPUT], "running"),
        ([USER, CALL, OUTPUT, ANSWER], "completed"),
        # a message resent after the answer is a new question, not an answer
        ([USER, CALL, OUTPUT, ANSWER, USER], "pending"),
    ],
)
def test_a_runs_status_is_derived_from_its_session_items(
    items: list[dict[str, object]], status: str
) -> None:
    assert status_of(items) == status


def test_an_app_option_that_names_no_agents_app_is_refused() -> None:
    with pytest.raises(ValueError, match="not an AgentsApp"):
        OpenAIAgentsAdapter(app="examples.openai_agents_refund._refund:REFUND")


def test_the_adapter_declares_what_it_offers_and_nothing_more() -> None:
    adapter = OpenAIAgentsAdapter(app=CAREFUL)
    assert {c.value for c in adapter.capabilities} == {"durable_state", "context"}
    assert [w.name for w in adapter.workflows()] == ["refund"]


@pytest.mark.parametrize("app", [NAIVE, CAREFUL])
def test_check_adapter_finds_each_example_app_ready(
    app: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no pyproject settings apply
    out = io.StringIO()
    code = main(["check-adapter", ADAPTER, "--adapter-opt", f"app={app}"], out=out)
    assert code == 0, out.getvalue()
    assert "performed payments.refund (as declared)" in out.getvalue()
    assert "ended completed" in out.getvalue()


def test_observe_hands_out_each_whole_context_line_once(tmp_path: Path) -> None:
    env = OpenAIAgentsAdapter(app=CAREFUL).open(tmp_path / "env", seed=0)
    try:
        record = {"run_id": "r1", "step": 0, "worker_id": "w0", "context": {"items": []}}
        line = json.dumps(record)
        log = tmp_path / "env" / "contexts.jsonl"
        # A worker is halfway through appending the second line.
        log.write_text(line + "\n" + line[:10])
        assert [c["step"] for c in env.observe().contexts] == [0]
        log.write_text(line + "\n" + line.replace('"step": 0', '"step": 1') + "\n")
        assert [c["step"] for c in env.observe().contexts] == [1]
        assert env.observe().contexts == ()
    finally:
        env.close()


WORKER_IN_A_FRESH_PROCESS = """
import json, sys
from pathlib import Path
from harness.adapters.openai_agents import OpenAIAgentsAdapter
from harness.adapters.openai_agents._adapter import worker_main
from harness.model import RunSpec
env = OpenAIAgentsAdapter(app=sys.argv[1]).open(Path(sys.argv[2]), seed=0)
env.submit(RunSpec(run_id="r1", tenant="acme", workflow="refund", input=json.loads(sys.argv[3])))
code = worker_main({**env.args, "worker_id": "w0"})
print(json.dumps({"code": code, "http": "httpcore2" in sys.modules or "httpcore" in sys.modules,
                  "runnable": env.runnable()}))
env.close()
"""


def test_a_worker_runs_a_turn_without_the_sdks_trace_exporter(tmp_path: Path) -> None:
    """Tracing is off; the SDK's default provider would still build an
    exporter with an HTTP client (119 modules imported in every worker,
    issue 33). After its turn the run is answered: nothing is runnable."""
    import subprocess
    import sys

    from oa_support import R1

    argv = [sys.executable, "-c", WORKER_IN_A_FRESH_PROCESS, CAREFUL, str(tmp_path / "env")]
    proc = subprocess.run(
        [*argv, json.dumps(R1.input)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == {"code": 0, "http": False, "runnable": False}
