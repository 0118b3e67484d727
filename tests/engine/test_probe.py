"""Before a search, each workflow's fault-free run is checked against what the
adapter declares: a mismatch would make every aimed fault miss (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_support import harness_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("adapter", "expected"),
    [
        (
            "DeclaresRefund",
            "workflow 'charge' declares effect kind(s) payments.refund that its fault-free "
            "run never performed (it performed: payments.charge)",
        ),
        (
            "DeclaresNothing",
            "workflow 'charge' performed effect kind(s) payments.charge that it does not declare",
        ),
        (
            "NeverFinishes",
            "workflow 'charge' with input {'customer_id': 'c-1', 'amount_cents': 500} "
            "did not finish without faults (state pending",
        ),
    ],
)
def test_a_declaration_the_fault_free_run_contradicts_is_refused_with_exit_2(
    adapter: str, expected: str, tmp_path: Path
) -> None:
    proc = harness_cli(
        "run",
        "--adapter",
        f"mismatched_adapters:{adapter}",
        "--max-examples",
        "3",
        "--report-dir",
        str(tmp_path / "r"),
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r" / "report.json").exists(), "no search ran, no report"


def test_the_guide_toy_passes_the_probe(tmp_path: Path) -> None:
    proc = harness_cli(
        "run",
        "--adapter",
        "examples.minimal_adapter.adapter:ToyAdapter",
        "--max-examples",
        "3",
        "--report-dir",
        str(tmp_path / "r"),
        cwd=ROOT,
    )
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    assert (tmp_path / "r" / "report.json").exists()
