"""Deployments of the reference runtime wired to a world, one per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.adapters.reference._deployment import Deployment

VARIANTS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("postgres+redis", marks=[pytest.mark.postgres, pytest.mark.redis]),
]

Factory = Callable[..., Deployment]


@pytest.fixture
def make_deployment(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Factory]:
    made: list[Deployment] = []

    def make(variant: str = "sqlite", **kwargs: Any) -> Deployment:
        backend, _, queue = variant.partition("+")
        opts: dict[str, Any] = {"backend": backend, "queue": queue or "store"}
        if backend == "postgres":
            opts["postgres_url"] = request.getfixturevalue("postgres_url")
        if queue == "redis":
            opts["redis_url"] = request.getfixturevalue("redis_url")
        d = Deployment(tmp_path / f"d{len(made)}", **opts, **kwargs)
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()


@pytest.fixture(params=VARIANTS)
def deployment(request: pytest.FixtureRequest, make_deployment: Factory) -> Deployment:
    """The reference runtime on each backend variant in turn."""
    return make_deployment(request.param)
