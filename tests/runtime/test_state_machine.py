from __future__ import annotations

import pytest

from reference_runtime import TRANSITIONS, IllegalTransitionError, RunStatus, check_transition
from reference_runtime._states import TERMINAL

S = RunStatus


def test_terminal_statuses_have_no_successors() -> None:
    assert {s for s in S if not TRANSITIONS[s]} == set(TERMINAL)


def test_every_status_has_an_entry_in_the_transition_table() -> None:
    assert set(TRANSITIONS) == set(S)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (S.CREATED, S.RUNNING),
        (S.RUNNING, S.WAITING_FOR_APPROVAL),
        (S.WAITING_FOR_APPROVAL, S.RUNNING),
        (S.WAITING_FOR_APPROVAL, S.CANCELLED),
        (S.RUNNING, S.RECONCILING),
        (S.RECONCILING, S.RUNNING),
        (S.RUNNING, S.RETRY_SCHEDULED),
        (S.RETRY_SCHEDULED, S.RUNNING),
        (S.RUNNING, S.COMPLETED),
    ],
)
def test_the_documented_transitions_are_legal(src: RunStatus, dst: RunStatus) -> None:
    check_transition("r1", src, dst)


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (S.WAITING_FOR_APPROVAL, S.COMPLETED),
        (S.COMPLETED, S.RUNNING),
        (S.CREATED, S.COMPLETED),
        (S.CANCELLED, S.RUNNING),
        (S.RECONCILING, S.COMPLETED),
    ],
)
def test_an_illegal_transition_is_rejected_with_the_allowed_ones_named(
    src: RunStatus, dst: RunStatus
) -> None:
    with pytest.raises(IllegalTransitionError) as info:
        check_transition("r1", src, dst)
    msg = str(info.value)
    assert f"{src.value} -> {dst.value}" in msg
    assert "r1" in msg
    for allowed in TRANSITIONS[src]:
        assert allowed.value in msg
