"""The kit's crash points (issue 34): what a worker does with ``crash=``.

Each test runs a real worker process that passes sites, as a runtime's code
would, and looks at how it ended and what the crash log says: the nth hit
of the armed site kills it (SIGKILL) or stops it (SIGSTOP, continued by the
test as the harness would), other hits and sites pass, a traced worker
records every hit for ``crash_point_trace()``, and a stop sent from a
background thread stops the process before that thread can go on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.adapters import CrashPoints, CrashSpec, crash_point_trace, read_crash_log

#: A worker: passes a, b, a, b, a, each hit reported on stdout, then "done".
WORKER = """
import json, sys, threading
from harness.adapters import CrashPoints
log, crash = sys.argv[1], json.loads(sys.argv[2])
trace, threaded = sys.argv[3] == "1", sys.argv[4] == "1"
points = CrashPoints(log, crash, trace=trace, sites=["a", "b"])

def work():
    for site in ["a", "b", "a", "b", "a"]:
        n = points.hit(site, details=lambda: {"where": "in the test"})
        print(site, n, flush=True)

if threaded:
    t = threading.Thread(target=work)
    t.start()
    t.join()
else:
    work()
print("done", flush=True)
"""


def _start(
    log: Path, crash: CrashSpec | None, *, trace: bool = False, threaded: bool = False
) -> subprocess.Popen[str]:
    spec = json.dumps(None if crash is None else crash.model_dump())
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            WORKER,
            str(log),
            spec,
            "1" if trace else "0",
            "1" if threaded else "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_nth_hit_of_the_armed_site_kills_the_worker(tmp_path: Path) -> None:
    log = tmp_path / "crash.jsonl"
    proc = _start(log, CrashSpec(site="a", nth=2, action="kill"))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err
    # a 1, b 1 passed; the second a never returned
    assert out.split() == ["a", "1", "b", "1"]
    [line] = read_crash_log(log)
    assert line == {
        "pid": proc.pid, "site": "a", "hit": 2, "where": "in the test", "action": "kill",
    }  # fmt: skip


def _wait_stopped(pid: int) -> None:
    _, status = os.waitpid(pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), status


@pytest.mark.parametrize("threaded", [False, True])
def test_a_pause_stops_the_worker_there_until_it_is_continued(
    tmp_path: Path, threaded: bool
) -> None:
    log = tmp_path / "crash.jsonl"
    proc = _start(log, CrashSpec(site="b", nth=2, action="pause"), threaded=threaded)
    _wait_stopped(proc.pid)
    assert [e["action"] for e in read_crash_log(log)] == ["pause"]
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    # every hit returned, the paused one after the continue
    assert out.split() == ["a", "1", "b", "1", "a", "2", "b", "2", "a", "3", "done"]


def test_a_traced_worker_records_every_hit_for_crash_point_trace(tmp_path: Path) -> None:
    log = tmp_path / "crash.jsonl"
    first = _start(log, None, trace=True)
    assert first.communicate(timeout=60)[0].split()[-1] == "done"
    second = _start(log, CrashSpec(site="a", nth=2), trace=True)
    second.communicate(timeout=60)
    assert second.returncode == -signal.SIGKILL
    assert crash_point_trace(log) == [
        (first.pid, "a", 1), (first.pid, "b", 1), (first.pid, "a", 2),
        (first.pid, "b", 2), (first.pid, "a", 3),
        (second.pid, "a", 1), (second.pid, "b", 1), (second.pid, "a", 2),
    ]  # fmt: skip
    # the kill is logged beside the trace, and is no part of it
    assert [e["action"] for e in read_crash_log(log)][-1] == "kill"


def test_an_unarmed_worker_passes_every_site_and_logs_nothing(tmp_path: Path) -> None:
    log = tmp_path / "crash.jsonl"
    proc = _start(log, None)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out.split()[-1] == "done"
    assert not log.exists() and read_crash_log(log) == [] and crash_point_trace(log) == []


def test_counts_are_per_site_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    log = tmp_path / "crash.jsonl"
    points = CrashPoints(log, None, trace=True)
    assert [points.hit(s) for s in "abab"] == [1, 1, 2, 2]
    assert points.counts == {"a": 2, "b": 2}
    with open(log, "a") as fh:
        fh.write('{"pid": 1, "site": "a", "hi')  # a SIGKILL mid-write
    assert len(read_crash_log(log)) == 4


def test_a_spec_aimed_at_a_site_the_adapter_does_not_declare_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'c' is not a site of this adapter; its sites are a, b"):
        CrashPoints(tmp_path / "log", CrashSpec(site="c"), sites=["b", "a"])
    with pytest.raises(ValueError, match="action must be"):
        CrashPoints(tmp_path / "log", {"site": "a", "nth": 1, "action": "explode"})
    with pytest.raises(TypeError, match="pass the CrashSpec"):
        CrashPoints(tmp_path / "log", "a")
    # a dict (what a worker gets across a process boundary) works like the spec
    assert CrashPoints(tmp_path / "log", {"site": "a"}).armed("a")
