"""The minimal adapter of docs/adapters.md works as the guide says."""

from __future__ import annotations

from pathlib import Path

import pytest
from code_size import lines_of_code

from harness.adapters import Environment
from harness.adapters._loading import load_adapter
from harness.testing import run_suite

SPEC = "examples.minimal_adapter.adapter:ToyAdapter"
SOURCE = Path(__file__).resolve().parents[2] / "examples" / "minimal_adapter" / "adapter.py"


def test_the_guide_adapter_with_its_toy_runtime_is_at_most_80_lines_of_code() -> None:
    # The kit (harness.adapters.kit) keeps an adapter to its mapping.
    assert lines_of_code('"""doc"""\n\n# note\nx = 1  # one\n') == 1
    assert lines_of_code(SOURCE.read_text()) <= 80


def test_the_guide_adapter_loads_and_declares_no_capability() -> None:
    adapter = load_adapter(SPEC, {"keyed": "true"})
    assert adapter.name == "toy"
    assert adapter.capabilities == frozenset()


def test_what_the_toy_lacks_it_inherits_from_base_environment(tmp_path: Path) -> None:
    env = load_adapter(SPEC, {}).open(tmp_path, seed=0)
    try:
        assert isinstance(env, Environment)
        assert env.crash_points() == env.pause_points() == []
        assert env.approval_message("r1", "approved", "valid", "m1") is None
        assert env.storage_fault("pg_terminate") is False
        for call, capability in [
            (lambda: env.advance_clock(1.0), "clock"),
            (lambda: env.inject_memory({}), "memory_injection"),
            (lambda: env.cancel("r1"), "cancel"),
        ]:
            with pytest.raises(NotImplementedError, match=f"the {capability} capability"):
                call()
        with pytest.raises(NotImplementedError, match="ToyEnvironment takes no inbound"):
            env.deliver({})
    finally:
        env.close()


@pytest.mark.slow
@pytest.mark.parametrize("keyed", ["true", "false"])
def test_the_harness_passes_the_keyed_toy_and_finds_the_double_charge_without_a_key(
    keyed: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HARNESS_MAX_EXAMPLES", "15")
    monkeypatch.setenv("HARNESS_SEED", "3")
    monkeypatch.chdir(tmp_path)
    report = run_suite(SPEC, {"keyed": keyed}, None)
    verdicts = {p["name"]: p["verdict"] for p in report["properties"]}
    if keyed == "true":
        assert "fail" not in verdicts.values(), report["_log"]
        assert verdicts["exactly_once_effects"] == "pass"
    else:
        assert verdicts["exactly_once_effects"] == "fail", report["_log"]
        # a kill after the world applied the charge, or a timeout after it did
        assert any("arm world fault" in s for s in report["counterexample"]["steps"])
