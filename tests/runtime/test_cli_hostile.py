"""The reference runtime's command line under hostile and clumsy input (issue 13, defect 10).

Each test names one thing that used to end in a Python traceback (exit 1), a
stall, a write it should not have made, or a bad input accepted and then
retried forever. The rules they hold the CLI to: input errors exit 2 with one
line on stderr and no traceback; commands that only look never write; a
store URL that names something else is refused and left untouched.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reference_runtime import MalformedEventError, Runtime, RuntimeConfig

GOOD = {"customer_id": "c1", "amount_cents": 500, "currency": "EUR"}


def rr(
    *args: str | bytes,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``python -m reference_runtime ARGS`` with no RR_* from our environment."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("RR_")}
    full.update(env or {})
    proc = subprocess.run(
        [sys.executable.encode(), b"-m", b"reference_runtime", *map(os.fsencode, args)],
        env=full,
        input=stdin,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    return subprocess.CompletedProcess(
        proc.args,
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


def refused(proc: subprocess.CompletedProcess[str], *says: str) -> None:
    """Exit 2, one line on stderr saying ``says``, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for part in says:
        assert part in proc.stderr, proc.stderr


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for a folder)."""
    return {
        str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def store(tmp_path: Path) -> Iterator[str]:
    """A store URL with one refund run ``r1`` in it."""
    url = f"sqlite:{tmp_path / 'store' / 'runs.db'}"
    proc = rr(
        "submit",
        "refund",
        "--store",
        url,
        "--tenant",
        "acme",
        "--run-id",
        "r1",
        "--input",
        json.dumps(GOOD),
    )
    assert proc.returncode == 0, proc.stderr
    yield url


# -- store URLs naming something that is not a store -----------------------


def _foreign_sqlite(path: Path) -> None:
    import sqlite3

    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    db.execute("INSERT INTO users (name) VALUES ('ada')")
    db.commit()
    db.close()


HOSTILE_FILES = {
    "text-file": (lambda p: p.write_text("hello, not a database\n"), "not a SQLite database"),
    "binary-file": (lambda p: p.write_bytes(bytes(range(256)) * 8), "not a SQLite database"),
    "directory": (lambda p: (p.mkdir(), (p / "keep.txt").write_text("x")), "it is a directory"),
    "foreign-sqlite": (_foreign_sqlite, "another program's database (tables users"),
}


@pytest.mark.parametrize("command", ["status", "submit", "cancel", "worker"])
@pytest.mark.parametrize("kind", sorted(HOSTILE_FILES))
def test_a_store_url_naming_a_file_that_is_not_our_store_is_refused_and_left_untouched(
    tmp_path: Path, kind: str, command: str
) -> None:
    make, says = HOSTILE_FILES[kind]
    target = tmp_path / "thing"
    make(target)
    before = tree(tmp_path)
    args = {
        "status": ["status", "r1"],
        "cancel": ["cancel", "r1"],
        "worker": ["worker"],
        "submit": [
            "submit",
            "refund",
            "--tenant",
            "a",
            "--run-id",
            "r1",
            "--input",
            json.dumps(GOOD),
        ],
    }[command]
    proc = rr(*args, "--store", f"sqlite:{target}")
    refused(proc, str(target), says)
    assert tree(tmp_path) == before  # not one byte, not one -wal or -journal file


def test_status_never_writes_an_empty_file_or_creates_folders(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    refused(rr("status", "r1", "--store", f"sqlite:{empty}"), "there is no store", "empty")
    assert empty.read_bytes() == b""
    missing = tmp_path / "no" / "such" / "runs.db"
    refused(rr("status", "r1", "--store", f"sqlite:{missing}"), "there is no store")
    assert list(tmp_path.iterdir()) == [empty]


def test_status_and_cancel_on_a_real_store_do_not_change_its_folder(
    store: str, tmp_path: Path
) -> None:
    before = tree(tmp_path / "store")
    proc = rr("status", "r1", "--store", store)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["run_id"] == "r1"
    assert tree(tmp_path / "store") == before
    refused(rr("cancel", "ghost", "--store", store), "no run 'ghost'")


def test_cancel_and_deliver_refuse_a_missing_store_instead_of_creating_one(
    tmp_path: Path,
) -> None:
    url = f"sqlite:{tmp_path / 'nope' / 'runs.db'}"
    refused(rr("cancel", "r1", "--store", url), "there is no store")
    msg = {"message_id": "m", "tenant": "a", "run_id": "r1", "kind": "event", "payload": {}}
    refused(rr("deliver", "--store", url, "--message", json.dumps(msg)), "there is no store")
    assert list(tmp_path.iterdir()) == []


def test_the_library_refuses_another_programs_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    _foreign_sqlite(path)
    before = path.read_bytes()
    rt = Runtime(RuntimeConfig(store_url=f"sqlite:{path}"))
    with pytest.raises(Exception, match="another program's database") as info:
        rt.submit("refund", GOOD, tenant="a", run_id="r1")
    assert info.type.__name__ == "ForeignStoreError"
    rt.close()
    assert path.read_bytes() == before


# -- JSON input ---------------------------------------------------------------


def test_input_nested_900_deep_is_refused_with_the_limit(store: str) -> None:
    deep = {**GOOD, "note": json.loads("[" * 900 + "]" * 900)}
    proc = rr(
        "submit",
        "refund",
        "--store",
        store,
        "--tenant",
        "a",
        "--run-id",
        "r2",
        "--input",
        json.dumps(deep),
    )
    refused(proc, "--input nests deeper than 32 levels")
    assert rr("status", "r2", "--store", store).returncode == 1  # nothing written


def test_a_message_nested_50000_deep_on_stdin_is_refused(store: str) -> None:
    payload = "[" * 50_000 + "]" * 50_000
    text = '{"message_id": "m", "tenant": "acme", "run_id": "r1", "kind": "event", "payload": '
    proc = rr("deliver", "--store", store, stdin=(text + payload + "}").encode())
    refused(proc, "nests deeper than 32 levels")


def test_the_library_refuses_a_deep_input_it_cannot_store(tmp_path: Path) -> None:
    deep: object = 1
    for _ in range(900):
        deep = [deep]
    with Runtime(RuntimeConfig(store_url=f"sqlite:{tmp_path / 'r.db'}")) as rt:
        with pytest.raises(MalformedEventError, match="deeper than 32 levels"):
            rt.submit("refund", {**GOOD, "note": deep}, tenant="a", run_id="r1")
        assert rt.get("r1") is None


def test_a_message_that_is_not_utf8_on_stdin_is_refused(store: str) -> None:
    refused(rr("deliver", "--store", store, stdin=b'{"message_id": "\xff"}'), "not UTF-8")


# -- names and configuration ------------------------------------------------------


def test_a_tenant_that_is_not_utf8_is_refused(store: str) -> None:
    proc = rr(
        "submit",
        "refund",
        "--store",
        store,
        "--tenant",
        b"caf\xe9",
        "--run-id",
        "r2",
        "--input",
        json.dumps(GOOD),
    )
    refused(proc, "tenant", "not valid UTF-8")


def test_an_empty_rr_store_is_a_configuration_error(tmp_path: Path) -> None:
    refused(rr("status", "r1", env={"RR_STORE": ""}), "RR_STORE is empty")
    refused(rr("status", "r1", "--store", ""), "RR_STORE is empty")


def test_a_clock_file_in_a_missing_folder_is_a_configuration_error(
    store: str, tmp_path: Path
) -> None:
    clock = tmp_path / "missing" / "clock"
    proc = rr(
        "submit",
        "refund",
        "--store",
        store,
        "--tenant",
        "a",
        "--run-id",
        "r2",
        "--input",
        json.dumps(GOOD),
        "--clock",
        f"file:{clock}",
    )
    refused(proc, "cannot read the clock file", str(clock))
    assert not clock.parent.exists()


# -- workflow inputs --------------------------------------------------------------


@pytest.mark.parametrize(
    ("amount", "says"),
    [
        ('"lots"', "amount_cents: input should be a valid integer, got 'lots'"),
        ("NaN", "NaN is not a JSON number"),
        ("1e100", "amount_cents: input should be a valid integer, got 1e+100"),
        ("-5", "amount_cents: input should be greater than 0"),
        ("0", "amount_cents: input should be greater than 0"),
        ("true", "amount_cents: input should be a valid integer, got True"),
        (str(10**15), "amount_cents: input should be less than or equal to 1000000000000"),
    ],
)
def test_a_bad_amount_is_refused_at_submit_and_never_reaches_a_worker(
    store: str, amount: str, says: str
) -> None:
    text = f'{{"customer_id": "c", "amount_cents": {amount}, "currency": "EUR"}}'
    proc = rr(
        "submit", "refund", "--store", store, "--tenant", "a", "--run-id", "r2", "--input", text
    )
    refused(proc, says)
    assert rr("status", "r2", "--store", store).returncode == 1  # no run to retry


@pytest.mark.parametrize(
    ("workflow", "field", "value", "says"),
    [
        ("refund", "currency", "euro", "currency: string should match pattern"),
        ("refund", "approval_ttl", -1, "approval_ttl: input should be greater than 0"),
        ("procurement", "quantity", 2.5, "quantity: input should be a valid integer"),
        ("research", "sources", 10_000, "sources: input should be less than or equal to 100"),
        ("onboarding", "customer_id", "", "customer_id: string should have at least 1"),
    ],
)
def test_workflow_inputs_are_checked_by_type_and_range(
    tmp_path: Path, workflow: str, field: str, value: object, says: str
) -> None:
    good = {
        "refund": GOOD,
        "procurement": {"item": "bolts", "quantity": 3},
        "research": {"topic": "tides", "sources": 2},
        "onboarding": {"customer_id": "k1"},
    }[workflow]
    with Runtime(RuntimeConfig(store_url=f"sqlite:{tmp_path / 'r.db'}")) as rt:
        with pytest.raises(MalformedEventError, match=says):
            rt.submit(workflow, {**good, field: value}, tenant="a", run_id="r1")
        assert rt.get("r1") is None
        rt.submit(workflow, good, tenant="a", run_id="r1")  # the control: accepted


# -- Postgres ----------------------------------------------------------------------


@pytest.mark.postgres
def test_a_nul_character_is_refused_on_postgres_without_a_traceback(postgres_url: str) -> None:
    schema = f"test_cli_nul_{os.getpid()}"
    env = {"RR_SCHEMA": schema}
    try:
        bad = json.dumps({**GOOD, "customer_id": "c\x00"})
        proc = rr(
            "submit",
            "refund",
            "--store",
            postgres_url,
            "--tenant",
            "a",
            "--run-id",
            "r1",
            "--input",
            bad,
            env=env,
        )
        refused(proc, "NUL character")
        msg = {"message_id": "m\x00", "tenant": "a", "run_id": "r1", "kind": "event"}
        refused(
            rr("deliver", "--store", postgres_url, stdin=json.dumps(msg).encode(), env=env),
            "NUL character",
        )
    finally:
        from reference_runtime.store.postgres import PostgresStore

        cleanup = PostgresStore(postgres_url, schema=schema)
        cleanup.drop_schema()
        cleanup.close()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock.getsockname()[1]
    sock.close()


def test_an_unreachable_postgres_is_reported_within_seconds_naming_the_url(
    silent_server: int,
) -> None:
    url = f"postgresql://app:s3cret@127.0.0.1:{silent_server}/db"
    start = time.monotonic()
    proc = rr("status", "r1", "--store", url, timeout=40)
    took = time.monotonic() - start
    refused(proc, "cannot connect to PostgreSQL at", f"app:***@127.0.0.1:{silent_server}")
    assert "s3cret" not in proc.stderr
    assert took < 15, f"took {took:.1f} s"


# -- help ---------------------------------------------------------------------------


def test_the_help_says_the_cli_is_an_operator_tool_that_sees_every_tenant() -> None:
    proc = rr("--help")
    assert proc.returncode == 0
    assert "operator's tool" in proc.stdout
    assert "any tenant's runs" in proc.stdout
    assert "32 levels of nesting" in proc.stdout
