"""Run the harness against a mutated copy of the reference runtime.

Shared by ``benchmarks/mutation.py`` (generated mutants) and ``tests/bugs``
(hand-written ones). The real ``reference_runtime/`` is never touched: it is
copied to a folder of its own, the copy is changed, and ``harness run`` is
started with ``PYTHONPATH`` naming the copy's parent.

Why ``PYTHONPATH`` wins over the editable install: setuptools' editable finder
is *appended* to ``sys.meta_path``, after the ordinary path finder, so a
``reference_runtime`` found on ``sys.path`` is imported first. Two things
could still put the real one ahead of the copy, and both are handled here:

- ``python -m`` puts the working directory at ``sys.path[0]``: the harness is
  started with the copy's parent as its working directory, never the
  repository root.
- The fork server is started with the repository root prepended to its
  ``PYTHONPATH``; it replaces its ``sys.path`` with the harness's before it
  preloads anything, and its workers are forked from it, so they run the
  modules the server preloaded from the copy.

``tests/bugs/test_hand_mutants.py`` checks this end to end: a mutant that
makes every worker write its pid and ``reference_runtime.__file__`` to a file
(:func:`import_probe`) shows that the workers ran the copy.

Only the standard library is used here: CI runs the tests without the
``bench`` extra.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "reference_runtime"
PACKAGE = "reference_runtime"

#: seconds a harness gets to clean up after SIGTERM before its group is killed
_TERM_GRACE = 10.0


class EditDoesNotApply(ValueError):
    """A hand-written edit's old text is not in its file exactly once: the
    runtime changed under the mutant, which must be rewritten."""


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` by ``new`` in ``path`` (relative to ``reference_runtime/``).

    ``old`` must occur exactly once, so that a change to the runtime that moves
    the code makes the mutant fail loudly instead of silently changing nothing.
    """

    path: str
    old: str
    new: str

    def apply(self, package: Path) -> None:
        """Apply this edit to the copy rooted at ``package`` (a ``reference_runtime`` folder)."""
        file = package / self.path
        text = file.read_text(encoding="utf-8")
        count = text.count(self.old)
        if count != 1:
            raise EditDoesNotApply(
                f"{self.path}: the text to replace occurs {count} times, expected once; "
                f"rewrite the mutant against the current runtime:\n{self.old}"
            )
        file.write_text(text.replace(self.old, self.new), encoding="utf-8")


def copy_runtime(dest: Path) -> Path:
    """Copy ``reference_runtime/`` into ``dest`` (created) and return ``dest``:
    the folder to put on ``PYTHONPATH``. Bytecode caches are not copied."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SOURCE, dest / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def mutated_copy(dest: Path, edits: Sequence[Edit] = ()) -> Path:
    """A copy of the runtime in ``dest`` with ``edits`` applied; returns ``dest``."""
    copy_runtime(dest)
    for edit in edits:
        edit.apply(dest / PACKAGE)
    return dest


def import_probe(log: Path) -> Edit:
    """An edit that makes every worker append ``pid file`` to ``log`` when it
    starts, ``file`` being the ``reference_runtime/__init__.py`` it imported."""
    anchor = "    args = dict(args or {})\n"
    probe = (
        "    import reference_runtime as _probe\n"
        f"    with open({str(log)!r}, 'a') as _f:\n"
        "        _f.write(f'{os.getpid()} {_probe.__file__}\\n')\n"
    )
    return Edit("_worker.py", anchor, probe + anchor)


#: the ``HARNESS_*`` variables a harness run on a copy keeps: where services are
SERVICE_SUFFIXES = ("_URL", "_TOXIPROXY_BIN")


def harness_env(pythonpath: Path, repo: Path = REPO) -> dict[str, str]:
    """The environment for a harness run on the copy in ``pythonpath``, with
    the harness of this tree (or of ``repo``: a folder holding another
    revision's ``harness/``, as ``benchmarks/realistic.py --baseline`` makes).

    The caller's ``HARNESS_*`` settings are dropped (where services are
    kept: their URLs and the Toxiproxy server's binary, else the network
    faults silently ran on the kernel backend), and so is ``CI``, so that
    the profile named on the command line is what runs.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "GITHUB_STEP_SUMMARY", "PYTHONPATH")
        and not (k.startswith("HARNESS_") and not k.endswith(SERVICE_SUFFIXES))
    }
    # The copy first (its runtime wins), then this tree: the harness under
    # test is the one beside this file, not whichever checkout is installed.
    env["PYTHONPATH"] = os.pathsep.join((str(pythonpath), str(repo)))
    # A mutant's bytecode must not land beside the copy for a later mutant of
    # the same file to pick up; the copies are thrown away anyway.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@dataclass(frozen=True)
class HarnessRun:
    """What one ``harness run`` on a copy did. ``returncode`` is None when it
    was stopped for running past its timeout."""

    returncode: int | None
    stdout: str
    stderr: str
    report_dir: Path
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def report(self) -> dict[str, Any]:
        """The run's ``report.json``."""
        data: dict[str, Any] = json.loads((self.report_dir / "report.json").read_text())
        return data

    def counterexample(self) -> dict[str, Any] | None:
        """The report's counterexample (its ``steps``, ``failed_properties``,
        ``replay``), None when the run found none. (``scenario.json`` is not
        it: a passing run leaves its last scenario there.)"""
        found: dict[str, Any] | None = self.report().get("counterexample")
        return found

    def failed_properties(self) -> set[str]:
        return {p["name"] for p in self.report()["properties"] if p["verdict"] == "fail"}

    def tail(self, n: int = 3000) -> str:
        """The end of the output, for an assertion message."""
        return self.stdout[-n:] + "\n--- stderr ---\n" + self.stderr[-n:]


def run_harness(
    pythonpath: Path,
    report_dir: Path,
    args: Sequence[str],
    *,
    timeout: float,
    repo: Path = REPO,
) -> HarnessRun:
    """Run ``harness <args> --report-dir report_dir`` on the copy in ``pythonpath``.

    Its working directory is ``pythonpath`` (see the module docstring). Past
    ``timeout`` seconds the harness gets SIGTERM, then its process group
    SIGKILL; its fork server and workers die with it (their parent-death
    signals). ``repo``: whose ``harness/`` runs (see :func:`harness_env`).
    """
    report_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "harness.cli", *args, "--report-dir", str(report_dir)]
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=pythonpath,
        env=harness_env(pythonpath, repo),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        code = None
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=_TERM_GRACE)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
    finally:
        # Whatever the harness left in its group (it should leave nothing).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return HarnessRun(code, out, err, report_dir, time.monotonic() - start)


def ci_args(*extra: str, budget: float, stop_on_first: bool = True) -> list[str]:
    """``run --adapter reference --profile ci --budget B [--stop-on-first] extra...``."""
    args = ["run", "--adapter", "reference", "--profile", "ci", "--budget", f"{budget:g}"]
    if stop_on_first:
        args.append("--stop-on-first")
    return [*args, *extra]


_EXECUTE = """
import json, sys
from pathlib import Path
from harness import Engine, load_settings
from harness.adapters._loading import load_adapter
from harness.model import Scenario
opts, scenario, work = json.loads(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3])
engine = Engine(load_adapter("reference", opts), load_settings("ci"), workdir=work)
example = engine.execute(Scenario.model_validate(scenario), folder=work / "example")
print(json.dumps([r.name for r in example.results if r.verdict.value == "fail"]))
"""


@dataclass(frozen=True)
class Execution:
    """One scenario run on a copy: the properties it failed and its history."""

    failed: list[str]
    history: Path  # history.jsonl of the run


def execute(
    pythonpath: Path,
    scenario: dict[str, Any],
    workdir: Path,
    opts: dict[str, str] | None = None,
    *,
    timeout: float = 300,
) -> Execution:
    """Run one scenario (no search) on the copy in ``pythonpath``, judged by
    every property; the history is kept in ``workdir/example``."""
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-c", _EXECUTE, json.dumps(opts or {}), json.dumps(scenario), workdir],
        cwd=pythonpath,
        env=harness_env(pythonpath),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"scenario did not run (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    failed = json.loads(proc.stdout.strip().splitlines()[-1])
    return Execution(failed, workdir / "example" / "history.jsonl")
