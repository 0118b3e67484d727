"""A COMMIT lost on its way (``commit_lost``, Toxiproxy): to the worker the
same as a lost acknowledgement -- its connection ends with no reply -- but
the server never applied it. A runtime must find out which before it acts
on the commit (the reference reads the run back on a fresh connection); one
that takes an unknown commit for a success calls the service with no
durable record, and the next worker calls again.

The commit-fault pairs aim it at the commit of an effect a second call
harms most: the research workflow's at-most-once report e-mail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mutants_support import load_mutants

from harness.adapters.reference import from_options
from harness.scenarios import probe_universe
from harness.scenarios._schedules.pairs import commit_fault_pairs
from harness.vocabulary import PROXY_NETWORK_KINDS

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.usefixtures("toxiproxy")]


mutants = load_mutants()

#: a mistake of the class (an unknown commit taken for a success), written
#: as its author would: "the row is still under our lease, so no one else
#: wrote it: it is ours" -- at the version before the commit, too
OURS_MEANS_COMMITTED = mutants.Edit(
    "_executor/_step.py",
    "        if ours and row.model_dump(exclude=lease) == new.model_dump(exclude=lease):\n",
    "        if ours:\n",
)


@pytest.fixture(scope="module")
def sent_mark_pair(postgres_url: str, redis_url: str) -> dict[str, Any]:
    opts = {"backend": "postgres", "queue": "redis"}
    u = probe_universe(from_options(**opts), network_kinds=PROXY_NETWORK_KINDS)
    (pair,) = [
        p for p in commit_fault_pairs(u) if (p.kind, p.fault) == ("sent_mark", "commit_lost")
    ]
    assert pair.scenario is not None, pair.why
    return json.loads(pair.scenario.model_dump_json())


def test_the_pair_aims_at_the_at_most_once_effect(sent_mark_pair: dict[str, Any]) -> None:
    assert sent_mark_pair["name"].startswith("targeted/research/commit_fault/sent_mark/commit_lost")


@pytest.mark.parametrize(
    ("edits", "failed"),
    [((), set()), ((OURS_MEANS_COMMITTED,), {"exactly_once_effects"})],
    ids=["correct", "ours-means-committed"],
)
def test_a_lost_commit_taken_for_a_success_sends_twice(
    sent_mark_pair: dict[str, Any], tmp_path: Path, edits: tuple[Any, ...], failed: set[str]
) -> None:
    copy = mutants.mutated_copy(tmp_path / "src", edits)
    opts = {"backend": "postgres", "queue": "redis"}
    run = mutants.execute(copy, sent_mark_pair, tmp_path / "work", opts)
    events = [json.loads(line) for line in run.history.read_text().splitlines()]
    faults = [e["value"] for e in events if e["f"] == "fault"]
    (lost,) = [f for f in faults if f["kind"] == "commit_lost"]
    assert lost["fired"] is True and lost["backend"] == "toxiproxy", lost
    sends = [e for e in events if e["f"] == "effect" and e["value"]["kind"] == "email.send"]
    assert len(sends) == (2 if failed else 1), sends
    assert failed <= set(run.failed) and (failed or not run.failed), run.failed


def test_the_seeded_bug_commit_lost_as_applied_is_found_by_a_lost_commit(
    sent_mark_pair: dict[str, Any], tmp_path: Path
) -> None:
    """The seeded ``commit-lost-as-applied`` swallows an error raised by the
    COMMIT itself: a lost COMMIT is then acted on, and the report mailed
    twice. Through the same pair's schedule, one run."""
    copy = mutants.mutated_copy(tmp_path / "src")
    opts = {"backend": "postgres", "queue": "redis", "bug": "commit-lost-as-applied"}
    run = mutants.execute(copy, sent_mark_pair, tmp_path / "work", opts)
    assert "exactly_once_effects" in run.failed, run.failed


def test_the_seeded_bug_is_harmless_to_a_lost_acknowledgement(
    sent_mark_pair: dict[str, Any], tmp_path: Path
) -> None:
    """The same commit's acknowledgement lost (the COMMIT applied): taking it
    for applied is right, so the bug shows nothing -- it is the lost COMMIT
    that finds it."""
    lost_ack = json.loads(json.dumps(sent_mark_pair).replace('"commit_lost"', '"commit_ack_lost"'))
    copy = mutants.mutated_copy(tmp_path / "src")
    opts = {"backend": "postgres", "queue": "redis", "bug": "commit-lost-as-applied"}
    run = mutants.execute(copy, lost_ack, tmp_path / "work", opts)
    events = [json.loads(line) for line in run.history.read_text().splitlines()]
    kinds = [e["value"]["kind"] for e in events if e["f"] == "fault"]
    assert "commit_ack_lost" in kinds and "commit_lost" not in kinds, kinds
    assert run.failed == [], run.failed
