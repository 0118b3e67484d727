"""Files every environment starts with are built once per process and copied."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from harness import _janitor
from harness.adapters.reference._deployment import Deployment
from harness.world import World
from reference_runtime import Runtime, RuntimeConfig


def test_a_template_is_built_once_and_copied(tmp_path: Path) -> None:
    built: list[Path] = []

    def build(path: Path) -> None:
        built.append(path)
        path.write_bytes(b"schema v1")

    _janitor.copy_template("test-once", build, tmp_path / "a")
    _janitor.copy_template("test-once", build, tmp_path / "b")
    assert len(built) == 1
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes() == b"schema v1"
    # A copy is the caller's own file: writing it leaves the template alone.
    (tmp_path / "a").write_bytes(b"changed")
    _janitor.copy_template("test-once", build, tmp_path / "c")
    assert (tmp_path / "c").read_bytes() == b"schema v1"
    # The template lives in a scratch folder of this process (swept if it dies).
    folder = built[0].parents[1]
    assert folder.name.startswith("harness-templates-")
    assert (folder / _janitor.LOCK_NAME).exists()


def test_a_template_that_leaves_files_beside_it_is_refused(tmp_path: Path) -> None:
    def build(path: Path) -> None:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (a)")
        conn.commit()
        # left open: the -wal file is still beside the database
        build.conn = conn  # type: ignore[attr-defined]

    with pytest.raises(RuntimeError, match="self-contained"):
        _janitor.copy_template("test-wal-left", build, tmp_path / "a")
    build.conn.close()  # type: ignore[attr-defined]


def test_the_template_folder_goes_at_exit(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from harness import _janitor
        seen = []
        build = lambda p: (seen.append(p), p.write_text("t"))
        _janitor.copy_template("x", build, Path(sys.argv[1]))
        print(seen[0].parents[1])
        """
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "copy")],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    folder = Path(out.stdout.strip())
    assert folder.parent == tmp_path
    assert not folder.exists()
    assert (tmp_path / "copy").read_text() == "t"


def test_deployments_start_from_a_copied_store_and_world(tmp_path: Path) -> None:
    with Deployment(tmp_path / "one") as one, Deployment(tmp_path / "two") as two:
        # The store is set up already: every migration is recorded before any
        # submit, and the two files are separate databases.
        assert one.runtime.store.applied_migrations() == [1, 2, 3]
        one.submit("research", {"topic": "t", "requester": "u"}, tenant="acme", run_id="r1")
        assert two.runtime.store.get_run("r1") is None
        assert one.snapshot("r1").run.run_id == "r1"
        assert one.world.effects() == two.world.effects() == []
        with pytest.raises(Exception, match="already exists"):
            World(one.world.path).create()


def test_closing_without_waiting_for_the_disk_keeps_what_was_written(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    runtime = Runtime(RuntimeConfig(store_url=url))
    runtime.submit("research", {"topic": "t", "requester": "u"}, tenant="acme", run_id="r1")
    runtime.close(durable=False)
    again = Runtime(RuntimeConfig(store_url=url))
    assert again.get("r1") is not None
    again.close()
    assert not Path(f"{tmp_path / 'r.db'}-wal").exists()  # checkpointed on close

    world = World(tmp_path / "w.db").create()
    world.close(durable=False)
    assert World(tmp_path / "w.db").open().effects() == []


def test_world_create_in_a_missing_folder_says_so() -> None:
    missing = Path(tempfile.gettempdir()) / "no-such-folder-for-a-world" / "w.db"
    with pytest.raises(Exception, match="folder exists"):
        World(missing).create()
