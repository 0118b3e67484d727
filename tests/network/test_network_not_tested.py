"""Without iptables the network fault family is reported not tested, with
the reason -- never passed. Simulated by a harness whose PATH has no
iptables (the machine has it: CI installs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.model import (
    CrashSpec,
    NetworkFault,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
)

ROOT = Path(__file__).resolve().parents[2]
HARNESS = "from harness.cli import main; raise SystemExit(main())"


@pytest.mark.postgres
def test_a_run_whose_machine_lacks_iptables_reports_the_network_family_not_tested(
    postgres_url: str, tmp_path: Path
) -> None:
    scenario = Scenario(
        name="lost-ack-without-iptables",
        steps=(
            Submit(
                run=RunSpec(
                    run_id="r1",
                    tenant="acme",
                    workflow="procurement",
                    input={"item": "bolts", "quantity": 3},
                )
            ),
            RunWorker(
                worker_id="n0", crash=CrashSpec(site="checkpoint_stmt_commit", action="pause")
            ),
            NetworkFault(kind="commit_ack_lost", worker_id="n0"),
            Quiesce(),
        ),
    )
    path = tmp_path / "scenario.json"
    path.write_text(scenario.model_dump_json(), encoding="utf-8")
    report_dir = tmp_path / "report"
    # Only the interpreter's own folder: no iptables, no ss.
    bare = str(Path(sys.executable).parent)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            HARNESS,
            "run",
            "--adapter",
            "reference",
            "--adapter-opt",
            "backend=postgres",
            "--adapter-opt",
            f"postgres_url={postgres_url}",
            "--scenario",
            str(path),
            "--no-targeted",
            "--max-examples",
            "1",
            "--report-dir",
            str(report_dir),
            # the kernel's backend: a Toxiproxy server the machine has is not asked
            "--network-backend",
            "kernel",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PATH": bare, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    report = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    gaps = {g["capability"]: g["what"] for g in report["not_tested"]}
    assert "iptables and ss not installed" in gaps.get("network_faults", ""), (
        gaps,
        proc.stderr[-2000:],
    )
    # said on the console too, with the real reason: declared, not exercisable here
    line = next(x for x in proc.stdout.splitlines() if "not tested (network_faults" in x)
    assert "network_faults declared, but this machine cannot exercise it" in line, line
    assert "iptables and ss not installed" in line, line
    assert "network_faults missing" not in proc.stdout
    lost = report["faults"]["commit_ack_lost"]
    assert (lost["armed"], lost["fired"]) == (1, 0), lost
    # Armed and never fired: the run is inconclusive, not passed.
    assert report["verdict"] != "pass"
    assert any("network fault family" in line for line in report["inconclusive"])


#: An iptables that lists rules but refuses to add any (as one without the
#: comment match would), and an ss that finds nothing.
REFUSING = """#!/bin/sh
case "$*" in
  *" -S"*) exit 0 ;;
  *) echo "iptables: No chain/target/match by that name." >&2; exit 1 ;;
esac
"""


@pytest.mark.postgres
def test_a_rule_the_kernel_refuses_is_recorded_not_fired_and_the_worker_goes_on(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness import Engine, Settings
    from harness.adapters.reference import ReferenceAdapter
    from harness.history import History

    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("iptables", "ss"):
        (tools / name).write_text(REFUSING, encoding="utf-8")
        (tools / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    monkeypatch.setenv("HARNESS_NETWORK_BACKEND", "kernel")
    adapter = ReferenceAdapter("postgres", postgres_url=postgres_url)
    example = Engine(adapter, Settings(), workdir=tmp_path / "engine").execute(
        Scenario(
            steps=(
                Submit(
                    run=RunSpec(
                        run_id="r1",
                        tenant="acme",
                        workflow="procurement",
                        input={"item": "bolts", "quantity": 3},
                    )
                ),
                RunWorker(
                    worker_id="n0", crash=CrashSpec(site="checkpoint_stmt_commit", action="pause")
                ),
                NetworkFault(kind="commit_ack_lost", worker_id="n0"),
                Quiesce(),
            )
        )
    )
    (history,) = example.folder.rglob("history.jsonl")
    (fault,) = History.load(history).faults("commit_ack_lost")
    assert fault.value["fired"] is False
    assert "No chain/target/match" in fault.value["reason"]
    # Nothing was inflicted: the run went on as without the fault.
    assert {r.verdict.value for r in example.results} == {"pass"}
