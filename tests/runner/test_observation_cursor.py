"""The recorder observes again only when the environment's cursor moved.

Run against the reference runtime itself (SQLite, and Postgres with
``HARNESS_POSTGRES_URL``): every kind of change the harness or a worker makes
must move the cursor, else the recorder would report a stale state.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.adapters import RunState
from harness.adapters.reference import ReferenceAdapter
from harness.model import RunSpec
from harness.runner._recorder import HistoryRecorder

REFUND = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="refund",
    input={"customer_id": "c1", "amount_cents": 1250, "currency": "EUR"},
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def adapter(request: pytest.FixtureRequest) -> ReferenceAdapter:
    if request.param == "sqlite":
        return ReferenceAdapter()
    url = request.getfixturevalue("postgres_url")
    return ReferenceAdapter("postgres", postgres_url=url)


@pytest.fixture
def recorder(adapter: ReferenceAdapter, tmp_path: Path) -> Iterator[HistoryRecorder]:
    rec = HistoryRecorder(tmp_path / "history.jsonl")
    rec.env = adapter.open(tmp_path / "env", seed=0)
    try:
        yield rec
    finally:
        rec.env.close()
        rec.close()


def _state(rec: HistoryRecorder, run_id: str = "r1") -> RunState:
    return next(r.state for r in rec.observe().runs if r.run_id == run_id)


def test_an_unchanged_environment_is_not_read_again(recorder: HistoryRecorder) -> None:
    assert recorder.env is not None
    recorder.env.submit(REFUND)
    first = recorder.observe()
    assert [r.run_id for r in first.runs] == ["r1"]
    again = recorder.observe()
    assert again is recorder.observe(), "an unchanged cursor must reuse the last observation"
    assert again.runs == first.runs and again.transitions == () and again.contexts == ()


def test_each_change_moves_the_cursor_and_shows_in_the_next_observation(
    recorder: HistoryRecorder,
) -> None:
    env = recorder.env
    assert env is not None
    assert recorder.observe().runs == ()
    env.submit(REFUND)  # the harness's own write
    assert _state(recorder) is RunState.PENDING
    transitions = recorder.transitions
    # a worker's commits, in another process: the run waits for its approval
    handle = env.start_worker("w1")
    assert handle.wait(120).code == 0
    assert _state(recorder) is RunState.WAITING_APPROVAL
    assert recorder.transitions > transitions
    # the harness delivers the decision, another worker finishes the run
    message = env.approval_message("r1", "approved", "valid", "m1")
    assert message is not None and env.deliver(message)
    assert env.start_worker("w2").wait(120).code == 0
    final = recorder.observe()
    assert [r.state for r in final.runs] == [RunState.COMPLETED]
    assert recorder.observe() is recorder.observe()
