"""An example database is data anyone who can write it chooses (issue 27:
defects 7, 9 and 10, their ``--example-db`` parts).

A folder or a Redis shared by a team, a CI cache: its entries are replayed
first by every run that names it. A symlinked key folder was followed (read,
written and deleted through), a FIFO entry blocked the run for ever, a Redis
key of another type (``WRONGTYPE``) or a junk shard ``scenario.json`` gave a
traceback, an entry with 5,000 times the steps ran 400 s under ``--budget
60``, ``/proc/1/x`` was accepted, and ``merge --example-db`` with an
unreachable Redis wrote the merged folder before exiting 2. Each case here
checks the mechanism directly (seconds), and one run end to end.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
import redis
from hypothesis.database import _hash

from harness._errors import UsageError
from harness._exampledb import ExampleDb, example_key, open_example_db
from harness._settings import PROFILES, load_settings
from harness.cli import main
from harness.model import Quiesce, Scenario
from harness.report._schema import AdapterInfo, Counterexample, Report, ShardInfo

SPEC = "hostile_example_db_tests:Adapter"


class _Said:
    """A log: the warnings an :class:`ExampleDb` gave."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, text: str) -> None:
        self.lines.append(text)

    def has(self, fragment: str) -> bool:
        return any(fragment in line for line in self.lines)


def _scenario(steps: int, name: str = "kept") -> Scenario:
    return Scenario(name=name, steps=tuple(Quiesce() for _ in range(steps)))


def _value(scenario: Scenario) -> bytes:
    return scenario.model_dump_json().encode()


def _key_folder(db: Path, spec: str = SPEC) -> Path:
    return db / _hash(example_key(spec, {}))


# -- the folder itself -----------------------------------------------------
@pytest.mark.parametrize("where", ["/proc/1/x", "/proc/self/harness-db"])
def test_a_folder_that_cannot_be_written_is_refused(where: str) -> None:
    with pytest.raises(UsageError, match="cannot write to this folder"):
        open_example_db(where)


def test_run_refuses_an_unwritable_example_db_before_the_run_starts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(
        ["run", "--adapter", "reference", "--example-db", "/proc/1/x", "--report-dir",
         str(tmp_path / "r")],
        out=io.StringIO(),
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--example-db /proc/1/x" in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


# -- what a folder holds ---------------------------------------------------
def test_a_symlinked_key_folder_is_not_followed(tmp_path: Path) -> None:
    """Not read (its scenarios are not replayed), not written, and nothing
    is deleted through it (the user's file it points at survives)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = _scenario(1, "planted")
    victim = elsewhere / _hash(_value(planted))
    victim.write_bytes(_value(planted))
    db = tmp_path / "db"
    db.mkdir()
    _key_folder(db).symlink_to(elsewhere)
    said = _Said()
    kept = ExampleDb(str(db), SPEC, {}, log=said)
    assert kept.saved() == []
    assert said.has("is a symlink, not followed")
    kept.db.delete(kept.key, _value(planted))
    kept.db.save(kept.key, _value(_scenario(2)))
    assert victim.read_bytes() == _value(planted)
    assert sorted(p.name for p in elsewhere.iterdir()) == [victim.name]


@pytest.mark.timeout(30)
def test_a_fifo_entry_is_skipped_not_waited_on(tmp_path: Path) -> None:
    db = tmp_path / "db"
    folder = _key_folder(db)
    folder.mkdir(parents=True)
    os.mkfifo(folder / "0000fifo")
    good = _scenario(2)
    (folder / _hash(_value(good))).write_bytes(_value(good))
    said = _Said()
    assert ExampleDb(str(db), SPEC, {}, log=said).saved() == [good]
    assert said.has("not a regular file")


def test_junk_and_deeply_nested_entries_are_skipped_with_a_warning(tmp_path: Path) -> None:
    db = tmp_path / "db"
    folder = _key_folder(db)
    folder.mkdir(parents=True)
    (folder / "junk").write_bytes(b"\x00not json")
    (folder / "deep").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (folder / "other").write_bytes(json.dumps({"steps": "no"}).encode())
    good = _scenario(3)
    (folder / "good").write_bytes(_value(good))
    said = _Said()
    assert ExampleDb(str(db), SPEC, {}, log=said).saved() == [good]
    assert said.has("skipped 3 entries that are not harness scenarios")


# -- bounded ---------------------------------------------------------------
def test_a_kept_scenario_far_longer_than_the_search_writes_is_skipped(tmp_path: Path) -> None:
    from harness._exampledb import replay_step_cap

    settings = load_settings("dev")
    cap = replay_step_cap(settings)
    # the profile's own scenarios fit, many times over (sampled: about 15-35 steps)
    assert 60 <= cap <= 400
    thorough = replay_step_cap(load_settings("thorough"))
    assert thorough >= cap and PROFILES["thorough"]["max_episodes"] > 4
    db = tmp_path / "db"
    folder = _key_folder(db)
    folder.mkdir(parents=True)
    huge, fine = _scenario(20_000, "huge"), _scenario(cap, "fine")
    for s in (huge, fine):
        (folder / s.name).write_bytes(_value(s))
    said = _Said()
    assert ExampleDb(str(db), SPEC, {}, log=said).saved(max_steps=cap) == [fine]
    assert said.has(f"skipped a kept scenario of 20000 steps ('huge'): more than {cap}")


# -- Redis -----------------------------------------------------------------
def test_a_redis_key_of_the_wrong_type_is_skipped_with_a_warning(redis_url: str) -> None:
    spec = f"{SPEC}_wrongtype_{os.getpid()}"
    client = redis.Redis.from_url(redis_url)
    key = b"harness-example:" + example_key(spec, {})
    client.set(key, b"a string, not a set")
    try:
        said = _Said()
        db = ExampleDb(redis_url, spec, {}, log=said)
        assert db.saved() == []
        db.db.save(db.key, _value(_scenario(1)))
        db.db.delete(db.key, _value(_scenario(1)))
        assert said.has("WRONGTYPE")
        assert client.get(key) == b"a string, not a set"  # left alone
    finally:
        client.delete(key)
        client.close()


# -- merge -----------------------------------------------------------------
def _shard(path: Path, k: int) -> Path:
    report = Report(
        verdict="fail",
        seed=0,
        profile="dev",
        adapter=AdapterInfo(
            spec="reference", options={}, name="reference", description={}, capabilities=[]
        ),
        duration_seconds=1.0,
        scenarios=1,
        properties=[],
        other_failures=[],
        faults={},
        crash_points={},
        absorbed_duplicates=0,
        not_tested=[],
        counterexample=Counterexample(
            steps=["quiesce"],
            failed_properties=["progress"],
            counterexample_for=["progress"],
            replay="harness replay x",
            fully_shrunk=True,
        ),
        shard=ShardInfo(k=k, n=2, plan=2),
    )
    path.mkdir(parents=True)
    (path / "report.json").write_text(report.model_dump_json())
    return path


def test_merge_keeps_no_junk_shard_scenario_and_shows_no_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shards = [_shard(tmp_path / f"s{k}", k) for k in (1, 2)]
    (shards[0] / "scenario.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (shards[1] / "scenario.json").write_text('{"steps": 7}')
    db = tmp_path / "db"
    code = main(
        ["merge", *map(str, shards), "--report-dir", str(tmp_path / "m"), "--example-db",
         str(db)],
        out=io.StringIO(),
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code != 2, err
    assert "Traceback" not in err
    assert "is not a readable scenario" in err
    assert not any(p.is_file() for p in db.rglob("*") if ".hypothesis-keys" not in p.parts)


def test_merge_refuses_an_unreachable_example_db_before_writing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shards = [_shard(tmp_path / f"s{k}", k) for k in (1, 2)]
    out = tmp_path / "m"
    code = main(
        ["merge", *map(str, shards), "--report-dir", str(out), "--example-db",
         "redis://127.0.0.1:1/0"],
        out=io.StringIO(),
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "cannot reach Redis" in err, err
    assert not (out / "report.json").exists(), "nothing written: the verdict is not hidden"


# -- end to end --------------------------------------------------------------
def test_a_run_skips_an_overlong_kept_scenario_and_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The kept scenario with 20,000 steps is not replayed (it would outlast
    the budget before the budget is next checked); the run goes on."""
    db = tmp_path / "db"
    folder = db / _hash(example_key("reference", {}))
    folder.mkdir(parents=True)
    huge = _scenario(20_000, "huge")
    (folder / "huge").write_bytes(_value(huge))
    out = io.StringIO()
    code = main(
        ["run", "--adapter", "reference", "--profile", "dev", "--max-examples", "1",
         "--no-targeted", "--seed", "0", "--example-db", str(db), "--report-dir",
         str(tmp_path / "r")],
        out=out,
    )  # fmt: skip
    text = out.getvalue() + capsys.readouterr().err
    assert code in (0, 3), text
    assert "skipped a kept scenario of 20000 steps ('huge')" in text
    assert "replaying its 0 kept scenario(s) first" in text
    ledger = (tmp_path / "r" / "scenarios.jsonl").read_text().splitlines()
    assert len(ledger) == 1, ledger  # the plan's one scenario, not the kept one
    assert (folder / "huge").is_file(), "left alone"
