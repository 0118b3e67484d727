"""The file clock a controller shares with its worker processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reference_runtime import ConfigError, FileClock
from reference_runtime._clock import RECORD_SIZE, _record


def test_set_writes_in_place_after_the_first_time(tmp_path: Path) -> None:
    clock = FileClock(tmp_path / "clock", start=1_700_000_000.0)
    inode = os.stat(clock.path).st_ino
    clock.advance(31.5)
    assert clock.now() == 1_700_000_031.5
    # overwritten, not replaced: no rename (and its writeback) per set
    assert os.stat(clock.path).st_ino == inode
    assert os.path.getsize(clock.path) == RECORD_SIZE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clock"]
    # another process's reader sees the same time
    assert FileClock(clock.path).now() == 1_700_000_031.5


def test_a_file_holding_just_a_number_is_read_and_then_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "clock"
    path.write_text("1700000000.25")
    assert FileClock(path).now() == 1_700_000_000.25
    FileClock(path).set(5.0)
    assert FileClock(path).now() == 5.0


def test_a_torn_record_is_read_again_and_a_broken_one_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "clock"
    new, old = _record(1000.0), _record(999.5)
    torn = new[:6] + old[6:]  # what a read racing a pwrite could see
    path.write_bytes(torn)
    reads = iter([torn, torn, new])
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: next(reads, None) or real_read(fd, n))
    assert FileClock(path).now() == 1000.0
    monkeypatch.undo()
    with pytest.raises(ConfigError, match="no consistent time"):
        FileClock(path).now()


def test_a_record_that_is_not_a_time_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "clock"
    path.write_text("nan")
    with pytest.raises(ConfigError, match="not a time"):
        FileClock(path).now()
    path.write_text("soon")
    with pytest.raises(ConfigError, match="cannot read the clock file"):
        FileClock(path).now()
