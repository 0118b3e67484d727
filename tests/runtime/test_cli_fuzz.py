"""A property of the reference runtime's command line: whatever argv it is given,
it exits 0, 1 or 2, never with an unhandled exception, and changes no file it
does not own (issue 13).

Hypothesis draws argv lists: a subcommand, options, and hostile values --
huge, negative and NaN numbers, deep and malformed JSON, control characters,
bytes that are not UTF-8, and store, clock and artifact paths that name text
files, binary files, directories, another program's database and missing
places. The CLI runs in-process through ``main(argv)`` (a subprocess per
example would take minutes); an exception escaping ``main`` is exactly what
would print a traceback, and Hypothesis shrinks it to the smallest argv.
The subprocess behaviour of the same paths is pinned by
``test_cli_hostile.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reference_runtime.__main__ import main

GOOD = {"customer_id": "c1", "amount_cents": 500, "currency": "EUR"}

# Placeholders, resolved against the test's folders: OUT holds files the CLI
# must never change; STORE is the CLI's own folder, where it may create stores.
STORES = [
    "sqlite:STORE/runs.db",
    "sqlite:STORE/new/sub/x.db",
    "sqlite:OUT/text.txt",
    "sqlite:OUT/bin.dat",
    "sqlite:OUT/dir",
    "sqlite:OUT/foreign.db",
    "sqlite:OUT/empty.db",
    "sqlite:OUT/text.txt/under-a-file.db",
    "sqlite:",
    "sqlite::memory:",
    "sqlite:///",
    "sqlite:STORE/runs.db?synchronous=BOGUS",
    "sqlite:STORE/runs.db?x=1",
    "postgresql://user:pw@127.0.0.1:1/db",
    "postgresql://user:pw@127.0.0.1:notaport/db",
    "mysql://localhost/db",
    "",
    " ",
]
CLOCKS = [
    "system",
    "file:OUT/clock",
    "file:OUT/text.txt",
    "file:OUT/dir",
    "file:STORE/missing/clock",
    "file:",
    "bogus",
]
#: commands that may create a store where ``--store`` names a missing or empty file
WRITING = ("submit", "deliver", "worker", "cancel")
NUMBERS = ["-1", "0", "1", "2", "99", "nan", "inf", "1e100", "-0", "0x10", "9" * 40]
WORKFLOWS = ["refund", "onboarding", "research", "procurement", "vendor_quote", "nope", ""]
NAMES = ["r1", "acme", "", "a\x00b", "caf\udce9", "\n", "-", "x" * 300, "\x1b[31m", "ü"]


def _json_text() -> st.SearchStrategy[str]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
    )
    values = st.recursive(
        leaves,
        lambda kids: st.one_of(
            st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=5), kids, max_size=3)
        ),
        max_leaves=8,
    )
    amounts = st.sampled_from(['"lots"', "NaN", "Infinity", "1e100", "-5", "0", "true", "12"])
    return st.one_of(
        values.map(json.dumps),
        amounts.map(lambda a: f'{{"customer_id": "c", "amount_cents": {a}, "currency": "EUR"}}'),
        st.integers(min_value=30, max_value=3000).map(lambda n: "[" * n + "]" * n),
        st.sampled_from(
            [json.dumps(GOOD), "{", "not json", '{"a": "\\ud800"}', '{"a": "\\u0000"}', "[]"]
        ),
        st.text(max_size=20),
    )


def _message() -> st.SearchStrategy[str]:
    fields = st.fixed_dictionaries(
        {
            "message_id": st.sampled_from(NAMES),
            "tenant": st.sampled_from(NAMES),
            "run_id": st.sampled_from(NAMES),
            "kind": st.sampled_from(["event", "webhook", "approval_decision", "nope", ""]),
        },
        optional={"payload": st.sampled_from([{}, {"event_key": "k"}, [1], "x", None])},
    )
    return st.one_of(fields.map(json.dumps), _json_text())


@st.composite
def argvs(draw: st.DrawFn) -> tuple[list[str], bytes]:
    """An argv list and the bytes on stdin."""
    command = draw(
        st.sampled_from(
            [
                "status",
                "cancel",
                "submit",
                "deliver",
                "worker",
                "workflows",
                "bugs",
                "crashpoints",
                "nope",
                "--help",
            ]
        )
    )
    argv = [command]
    if command in ("status", "cancel"):
        argv.append(draw(st.sampled_from(NAMES)))
    if command == "submit":
        argv += [draw(st.sampled_from(WORKFLOWS))]
        argv += ["--tenant", draw(st.sampled_from(NAMES))]
        argv += ["--run-id", draw(st.sampled_from(NAMES))]
        argv += ["--input", draw(_json_text())]
    if command in ("status", "cancel", "submit", "deliver", "worker") and draw(st.booleans()):
        argv += ["--store", draw(st.sampled_from(STORES))]
    options = {
        "--clock": st.sampled_from(CLOCKS),
        "--code-version": st.sampled_from(NUMBERS),
        "--schema": st.sampled_from(["public", "bad name", "x" * 80, "s1"]),
    }
    if command == "cancel":
        options["--reason"] = st.sampled_from(NAMES)
        options["--actor"] = st.sampled_from(NAMES)
    if command == "deliver":
        options["--message"] = _message()
    if command == "worker":
        options["--worker-id"] = st.sampled_from(NAMES)
        options["--queue"] = st.sampled_from(["store", "redis", "nope"])
        options["--redis-url"] = st.sampled_from(["redis://:pw@127.0.0.1:1/0", "nope://", ""])
        options["--tenant-key"] = st.sampled_from(["acme=00ff", "acme", "=", "acme=zz"])
        options["--artifacts"] = st.sampled_from(["STORE/artifacts", "STORE/runs.db"])
    for flag in draw(st.lists(st.sampled_from(sorted(options)), max_size=3, unique=True)):
        argv += [flag, draw(options[flag])]
    stdin = draw(
        st.one_of(
            _message().map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=30)
        )
    )
    return argv, stdin


def _tree(root: Path) -> dict[str, tuple[int, bytes | None]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mode, None if p.is_dir() else p.read_bytes())
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(OUT, STORE): files that must not change, and the CLI's own folder
    with a store holding run ``r1``."""
    for var in [v for v in os.environ if v.startswith("RR_")]:
        monkeypatch.delenv(var)
    out, store = tmp_path / "out", tmp_path / "store"
    out.mkdir()
    store.mkdir()
    (out / "text.txt").write_text("hello\n")
    (out / "bin.dat").write_bytes(bytes(range(256)))
    (out / "dir").mkdir()
    (out / "dir" / "keep").write_text("keep")
    (out / "empty.db").touch()
    (out / "clock").write_text("1700000000.0")
    db = sqlite3.connect(out / "foreign.db")
    db.execute("CREATE TABLE users (name TEXT)")
    db.commit()
    db.close()
    code = main(
        [
            "submit",
            "refund",
            "--store",
            f"sqlite:{store}/runs.db",
            "--tenant",
            "acme",
            "--run-id",
            "r1",
            "--input",
            json.dumps(GOOD),
        ]
    )
    assert code == 0
    return out, store


def _resolve(argv: list[str], out: Path, store: Path) -> list[str]:
    return [a.replace("OUT", str(out)).replace("STORE", str(store)) for a in argv]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=argvs())
@example(drawn=(["worker", "--store", "sqlite:OUT/empty.db"], b""))  # CI once found it flaky
@example(drawn=(["status", "r1", "--store", "sqlite:OUT/empty.db"], b""))
def test_any_argv_exits_0_1_or_2_and_changes_no_file_it_does_not_own(
    folders: tuple[Path, Path], drawn: tuple[list[str], bytes]
) -> None:
    out, store = folders
    argv, stdin = drawn
    # An empty file is a store not yet written (SQLite's own view, and what a
    # runtime racing another to create a new store sees): a command that
    # writes may make it one. Emptied before each example, so that no
    # example sees what an earlier one made of it (Hypothesis replays a
    # failure to confirm it: a leftover store would make it flaky).
    empty = out / "empty.db"
    for leftover in out.glob("empty.db-*"):
        leftover.unlink()
    empty.write_bytes(b"")
    adopts = argv[0] in WRITING and "sqlite:OUT/empty.db" in argv
    before = _tree(out)
    err = io.StringIO()
    real_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            try:
                code = main(_resolve(argv, out, store))
            except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stdin = real_stdin
    assert code in (0, 1, 2), (code, err.getvalue())
    assert "Traceback" not in err.getvalue()
    if code == 2:
        assert err.getvalue().strip(), "exit 2 must say why"
    after = _tree(out)
    if adopts and after.get("empty.db") != before["empty.db"]:
        # made a store of the empty file: its own tables and nothing else
        db = sqlite3.connect(f"file:{empty}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        finally:
            db.close()
        assert {"runs", "schema_migrations"} <= tables, tables
        after = {k: v for k, v in after.items() if not k.startswith("empty.db")}
        before = {k: v for k, v in before.items() if not k.startswith("empty.db")}
    assert after == before, f"{argv} changed files it does not own"
