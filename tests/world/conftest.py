"""Fixtures for the world's tests: a fresh world per test, a virtual clock."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.world import Caller, World, WorldClient


@pytest.fixture
def clock() -> Callable[[], float]:
    """A clock that ticks one second per reading: deterministic timestamps."""
    ticks = itertools.count(1_700_000_000)
    return lambda: float(next(ticks))


@pytest.fixture
def world(tmp_path: Path, clock: Callable[[], float]) -> World:
    return World(tmp_path / "world.db", clock=clock).create()


@pytest.fixture
def client(world: World) -> WorldClient:
    return world.client()


@pytest.fixture
def caller() -> Caller:
    return Caller(tenant="t1", run_id="r1", op_id="op1", worker_id="w1", fencing_token=1)
