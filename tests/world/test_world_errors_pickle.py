"""Every world exception survives pickle: runtimes that record a step's error
by pickling it (DBOS does) must get the same exception back, not a warning
that ``__init__`` is missing arguments."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import harness.world
from harness.world import (
    Caller,
    FaultRule,
    NotSupported,
    Rejected,
    ServiceFault,
    Unknown,
    World,
    WorldClient,
    WorldError,
    WorldUsageError,
)

#: one example of each world exception type, built as the world builds it
EXAMPLES: dict[type[WorldError], WorldError] = {
    WorldError: WorldError("the world file is gone"),
    ServiceFault: ServiceFault("payments", "charge", "card declined"),
    Rejected: Rejected("payments", "charge", "injected fault: reject"),
    Unknown: Unknown("payments", "refund", "timed out after applying"),
    NotSupported: NotSupported("email", "lookup by idempotency key"),
    WorldUsageError: WorldUsageError("unknown service 'paymnets'"),
}


def _subclasses(cls: type[Any]) -> set[type[Any]]:
    out = set(cls.__subclasses__())
    for sub in list(out):
        out |= _subclasses(sub)
    return out


def _fields(exc: BaseException) -> tuple[Any, ...]:
    return (type(exc), str(exc), exc.args, dict(vars(exc)))


def test_every_world_exception_type_has_an_example_here() -> None:
    public = {
        v for v in vars(harness.world).values() if isinstance(v, type) and issubclass(v, WorldError)
    }
    assert public == set(EXAMPLES), "add an example of each new world exception to EXAMPLES"
    assert _subclasses(WorldError) <= set(EXAMPLES)


@pytest.mark.parametrize("exc", list(EXAMPLES.values()), ids=lambda e: type(e).__name__)
def test_a_world_exception_round_trips_through_pickle(exc: WorldError) -> None:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(exc, protocol=protocol))
        assert _fields(back) == _fields(exc)


def test_attributes_set_after_the_exception_was_made_travel_too() -> None:
    exc = Rejected("payments", "charge", "declined")
    exc.add_note("step 3 of run r1")
    exc.attempt = 2  # type: ignore[attr-defined]
    back = pickle.loads(pickle.dumps(exc))
    assert back.attempt == 2 and back.__notes__ == ["step 3 of run r1"]
    assert (back.service, back.action, back.reason) == ("payments", "charge", "declined")


def test_what_a_service_raises_round_trips(
    world: World, client: WorldClient, caller: Caller
) -> None:
    """The exceptions a real call raises, not only hand-made ones."""
    world.arm(FaultRule("payments", nth=1, mode="reject"))
    world.arm(FaultRule("payments", nth=2, mode="apply_then_timeout"))
    raised: list[BaseException] = []
    for _ in range(2):
        with pytest.raises(ServiceFault) as info:
            client.call("payments", "charge", {"amount": 5}, idempotency_key="k1", caller=caller)
        raised.append(info.value)
    with pytest.raises(NotSupported) as missing:
        client.lookup("email", idempotency_key="k1", tenant="t1")
    raised.append(missing.value)
    assert [type(e) for e in raised] == [Rejected, Unknown, NotSupported]
    for exc in raised:
        back = pickle.loads(pickle.dumps(exc))
        assert _fields(back) == _fields(exc)
        assert isinstance(back, WorldError)
    assert isinstance(pickle.loads(pickle.dumps(raised[1])), TimeoutError)
