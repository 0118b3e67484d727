"""A store reached over a Unix socket (``postgresql:///test``, a normal URL
on a developer's machine) cannot be faulted by netfilter rules, which match
TCP ports. The network faults on it are never armed, and the report says
they were not tested and why, naming the store; a fault a scenario file
arms there anyway is recorded not fired with that cause, and never lands on
another store's connection (the Redis queue's, before: a blind spot that
read as coverage). Every "never fired" names its cause from the history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from harness.adapters._netinfo import network_gaps, offered_network_kinds, unix_socket
from harness.model import CrashSpec, NetworkFault, Quiesce, RunSpec, RunWorker, Scenario, Submit
from harness.outcome._verdicts import judge

ROOT = Path(__file__).resolve().parents[2]
SOCKETS = Path("/var/run/postgresql")
KINDS = ("commit_ack_lost", "reset_mid_transaction", "partition")


@pytest.mark.parametrize(
    ("url", "socket"),
    [
        ("postgresql:///test", "libpq's default socket directory"),
        ("postgresql://postgres@/test?host=/var/run/postgresql", "/var/run/postgresql"),
        ("postgresql://%2Ftmp/test", "/tmp"),
        ("dbname=test user=postgres", "libpq's default socket directory"),
        ("unix:///run/redis.sock", "/run/redis.sock"),
        ("postgresql://postgres@127.0.0.1:5432/test", None),
        ("postgresql://localhost/test", None),
        ("host=127.0.0.1 dbname=test", None),
        ("postgresql:///test?hostaddr=127.0.0.1", None),
        ("redis://127.0.0.1:6379/0", None),
        ("sqlite:///runs.db", None),
    ],
)
def test_a_url_says_whether_its_server_is_reached_over_a_unix_socket(
    url: str, socket: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGHOST", raising=False)
    assert unix_socket(url) == socket


class _Services:
    """An adapter as far as its network services go."""

    def __init__(self, **urls: str) -> None:
        self.urls = urls

    def network_services(self) -> dict[str, str]:
        return dict(self.urls)


def test_faults_on_a_store_over_a_unix_socket_are_not_offered_and_the_others_are() -> None:
    tcp, sock = "postgresql://postgres@127.0.0.1:5432/test", "postgresql://postgres@/test"
    redis_tcp, redis_sock = "redis://127.0.0.1:6379/0", "unix:///run/redis.sock"
    assert offered_network_kinds(_Services(postgres=tcp, redis=redis_tcp), KINDS) == KINDS
    # The store of the transactions over a socket: nothing can be armed.
    assert offered_network_kinds(_Services(postgres=sock, redis=redis_tcp), KINDS) == ()
    # The queue over a socket: the store's own faults still, no partition
    # (it could not cut the worker from the queue).
    offered = offered_network_kinds(_Services(postgres=tcp, redis=redis_sock), KINDS)
    assert offered == ("commit_ack_lost", "reset_mid_transaction")
    gaps = network_gaps(_Services(postgres=sock, redis=redis_tcp))
    assert list(gaps) == ["postgres"] and "Unix socket" in gaps["postgres"]
    # An adapter that names no services: every kind, as before.
    assert offered_network_kinds(object(), KINDS) == KINDS


def test_a_family_armed_and_never_fired_names_the_causes_the_history_recorded() -> None:
    socket = "the postgres connection is a Unix socket"
    judged = judge(
        {},
        capabilities=[],
        families=["network", "world"],
        faults_armed={"commit_ack_lost": 2, "reset_mid_transaction": 1, "world_fault": 3},
        faults_fired={},
        unfired={
            "commit_ack_lost": {socket: 2},
            "reset_mid_transaction": {"the worker never reached its pause point": 1},
        },
    )
    network = next(r for r in judged.inconclusive if "network fault family" in r)
    assert f"{socket} (2 of 3)" in network, network
    assert "the worker never reached its pause point (1 of 3)" in network, network
    assert "never reached where it was aimed" not in network, network
    # No cause recorded (a world rule no call reached): said so.
    world = next(r for r in judged.inconclusive if "world fault family" in r)
    assert "the runtime never reached where it was aimed" in world, world


@pytest.fixture
def socket_url(postgres_url: str) -> str:
    """The test server's database through its Unix socket (skips where the
    server listens on none)."""
    parts = urlsplit(postgres_url)
    port = parts.port or 5432
    if not (SOCKETS / f".s.PGSQL.{port}").exists():
        pytest.skip(f"no Postgres Unix socket at {SOCKETS}/.s.PGSQL.{port}")
    user = f"{parts.username}@" if parts.username else ""
    return f"postgresql://{user}/{parts.path.lstrip('/')}?host={SOCKETS}&port={port}"


def _harness(tmp_path: Path, *args: str, families: str | None = None) -> tuple[int, dict[str, Any]]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "GITHUB_STEP_SUMMARY")
        and not (k.startswith("HARNESS_") and not k.endswith("_URL"))
    }
    if families is not None:
        env["HARNESS_FAMILIES"] = families
    report_dir = tmp_path / "report"
    cmd = [sys.executable, "-m", "harness.cli", "run", "--adapter", "reference", *args]
    proc = subprocess.run(
        [*cmd, "--report-dir", str(report_dir)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert (report_dir / "report.json").exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.returncode, json.loads((report_dir / "report.json").read_text(encoding="utf-8"))


def _postgres_gap(report: dict[str, Any]) -> str:
    gaps = [str(g["what"]) for g in report["not_tested"] if g["capability"] == "network_faults"]
    on_postgres = [g for g in gaps if "on postgres" in g]
    assert on_postgres, report["not_tested"]
    return on_postgres[0]


@pytest.mark.postgres
def test_a_search_on_a_socket_url_arms_no_network_fault_and_says_why(
    socket_url: str, tmp_path: Path
) -> None:
    """Issue 29: armed 11 times, fired 0, exit 3. Now: not tested, with the
    reason, and the run's verdict is not made inconclusive by it."""
    code, report = _harness(
        tmp_path,
        *("--adapter-opt", "backend=postgres", "--adapter-opt", f"postgres_url={socket_url}"),
        *("--adapter-opt", "bug=retry-unknown-commit", "--max-examples", "1", "--seed", "0"),
        "--no-targeted",
        families="network",
    )
    assert "Unix socket" in _postgres_gap(report)
    armed = {k: v["armed"] for k, v in report["faults"].items() if k in KINDS}
    assert not any(armed.values()), armed
    # Not inconclusive for that reason (one scenario may leave another
    # property unjudged: a reason of its own, exit 3 then).
    assert not any("network" in r or "Unix" in r for r in report["inconclusive"]), report
    assert code in (0, 1, 3), (code, report["inconclusive"])
    assert code == 3 or not report["inconclusive"], (code, report["inconclusive"])


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.usefixtures("netfilter")
def test_a_fault_armed_at_a_socket_store_is_not_fired_on_the_redis_queue_and_says_why(
    socket_url: str, redis_url: str, tmp_path: Path
) -> None:
    """A scenario file arms a lost acknowledgement at a checkpoint commit:
    the Postgres connection is a Unix socket. Before, the fault fired on the
    worker's Redis connection and the run passed with the bug on."""
    scenario = Scenario(
        name="lost-ack-over-a-socket",
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
    code, report = _harness(
        tmp_path,
        *("--adapter-opt", "backend=postgres", "--adapter-opt", "queue=redis"),
        *("--adapter-opt", f"postgres_url={socket_url}", "--adapter-opt", f"redis_url={redis_url}"),
        *("--adapter-opt", "bug=retry-unknown-commit", "--scenario", str(path)),
        *("--no-targeted", "--max-examples", "1"),
    )
    gap = _postgres_gap(report)
    assert "Unix socket" in gap and "no network fault is armed" in gap, gap
    lost = report["faults"]["commit_ack_lost"]
    assert (lost["armed"], lost["fired"]) == (1, 0), lost
    assert any("Unix socket" in why for why in lost["unfired"]), lost
    # Never passed: the one fault asked for did not fire, and the report
    # says why, from the history.
    assert report["verdict"] != "pass" and code == 3, (code, report["verdict"])
    line = next(r for r in report["inconclusive"] if "network fault family" in r)
    assert "Unix socket" in line, line
    # and so do the summary and the HTML coverage matrix
    folder = tmp_path / "report"
    summary = (folder / "summary.md").read_text(encoding="utf-8")
    assert "Armed but never fired: commit_ack_lost (the postgres connection is a Unix" in summary
    html = (folder / "report.html").read_text(encoding="utf-8")
    assert "never fired: the postgres connection is a Unix socket" in html
