"""The seeded bug retry-unknown-commit: a checkpoint whose acknowledgement
is lost is written again as if it had failed. The lost-ack scenario that the
reference runtime passes catches it, naming the property it breaks."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import Engine, Settings
from harness.adapters.reference import ReferenceAdapter
from harness.model import CrashSpec, NetworkFault, Quiesce, RunSpec, RunWorker, Scenario, Submit
from reference_runtime._bugs import BUGS

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("netfilter")]

SCENARIO = Scenario(
    name="retry-unknown-commit",
    steps=(
        Submit(
            run=RunSpec(
                run_id="r1",
                tenant="acme",
                workflow="procurement",
                input={"item": "bolts", "quantity": 3},
            )
        ),
        RunWorker(worker_id="n0", crash=CrashSpec(site="checkpoint_stmt_commit", action="pause")),
        NetworkFault(kind="commit_ack_lost", worker_id="n0"),
        Quiesce(),
    ),
)


def _verdicts(postgres_url: str, tmp_path: Path, bugs: frozenset[str]) -> dict[str, str]:
    adapter = ReferenceAdapter("postgres", postgres_url=postgres_url, bugs=bugs)
    example = Engine(adapter, Settings(), workdir=tmp_path).execute(SCENARIO)
    return {r.name: r.verdict.value for r in example.results}


def test_a_lost_ack_written_again_as_if_it_had_failed_is_caught(
    postgres_url: str, tmp_path: Path
) -> None:
    bug = BUGS["retry-unknown-commit"]
    verdicts = _verdicts(postgres_url, tmp_path / "buggy", frozenset({bug.name}))
    assert verdicts[bug.breaks] == "fail", verdicts
    # The same scenario without the bug: every property holds.
    fixed = _verdicts(postgres_url, tmp_path / "fixed", frozenset())
    assert set(fixed.values()) == {"pass"}, fixed
