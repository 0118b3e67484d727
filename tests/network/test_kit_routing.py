"""The adapter kit routes a worker (``WorkerSet.spawn(services=...)``): on
the Toxiproxy backend every connection the worker opens, a new one after
the fault began too, goes through a proxy of its own, so a fault there
reaches that worker and no other; elsewhere its URLs are left alone."""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from harness import _toxiproxy
from harness.adapters.kit import WorkerSet

pytestmark = [pytest.mark.postgres]

SUPPORT = "kit_routing_support"


class Env:
    """An environment, as the harness sees one: the scope of its routes."""


def _lines(path: Path, n: int) -> list[dict[str, object]]:
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        got = path.read_text().splitlines() if path.exists() else []
        if len(got) >= n:
            return [json.loads(line) for line in got]
        time.sleep(0.01)
    raise AssertionError(f"{path} has {len(got)} of {n} lines")


@pytest.mark.usefixtures("toxiproxy")
def test_a_routed_workers_new_connections_go_through_its_own_proxy(
    postgres_url: str, tmp_path: Path
) -> None:
    env = Env()
    workers = WorkerSet(tmp_path, [SUPPORT, "psycopg"], environment=env)
    services = {"postgres": postgres_url}
    try:
        for wid in ("w1", "w2"):
            args = {"url": postgres_url, "out": str(tmp_path / f"{wid}.jsonl")}
            workers.spawn(
                wid,
                f"{SUPPORT}:connect_twice",
                {**args, "go": str(tmp_path / "go")},
                services=services,
            )
        routes = {wid: _toxiproxy.routes_of(env, wid)["postgres"] for wid in ("w1", "w2")}
        assert routes["w1"].name != routes["w2"].name
        store = urlsplit(postgres_url)
        assert routes["w1"].upstream == f"{store.hostname}:{store.port or 5432}"
        first = {wid: _lines(tmp_path / f"{wid}.jsonl", 1)[0] for wid in routes}
        # each worker's first connection went to its own proxy, not the store
        assert first["w1"] == {"i": 1, "ok": True, "peer": routes["w1"].listen_port}, first
        assert first["w2"] == {"i": 1, "ok": True, "peer": routes["w2"].listen_port}, first
        # a fault on w1's proxy (refusing every connection), then both open a new one
        srv = _toxiproxy.server()
        srv.set_enabled(routes["w1"], False)
        try:
            (tmp_path / "go").touch()
            second = {wid: _lines(tmp_path / f"{wid}.jsonl", 2)[1] for wid in routes}
            for w in workers.workers:
                assert w.wait(30.0).code == 0
        finally:
            srv.set_enabled(routes["w1"], True)
        assert second["w1"]["ok"] is False, second  # its new connection met the fault
        assert second["w2"] == {"i": 2, "ok": True, "peer": routes["w2"].listen_port}, second
    finally:
        workers.close()
    # handed back with the workers
    assert _toxiproxy.routes_of(env, "w1") == {}


def test_without_the_toxiproxy_backend_the_worker_gets_the_urls_as_given(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_toxiproxy.ENV_BACKEND, "kernel")
    env = Env()
    workers = WorkerSet(tmp_path, [SUPPORT, "psycopg"], environment=env)
    try:
        out = tmp_path / "w1.jsonl"
        (tmp_path / "go").touch()
        w = workers.spawn(
            "w1",
            f"{SUPPORT}:connect_twice",
            {"url": postgres_url, "out": str(out), "go": str(tmp_path / "go")},
            services={"postgres": postgres_url},
        )
        assert w.wait(30.0).code == 0
        assert _toxiproxy.routes_of(env, "w1") == {}
        peers = {line["peer"] for line in _lines(out, 2)}
        assert peers == {urlsplit(postgres_url).port or 5432}
    finally:
        workers.close()


def test_routing_needs_the_environment(tmp_path: Path) -> None:
    workers = WorkerSet(tmp_path, [SUPPORT])
    with pytest.raises(ValueError, match=r"WorkerSet\(environment=\.\.\.\)"):
        workers.spawn("w1", f"{SUPPORT}:connect_twice", {}, services={"postgres": "x"})
