"""``harness check-adapter``: load an adapter as ``harness run`` does, run
each workflow once without faults, and say in plain words what is right
and wrong with it (and what its workers import after the fork)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from .._errors import UsageError
from .._settings import load_settings
from ..adapters._guard import close_adapter, guard, setup_adapter
from ..adapters._loading import load_adapter, parse_opts
from ..adapters._specs import pythonpath_for, with_pythonpath
from ..nemesis import resolve_worker_timeout, worker_timeout_limit
from ..procs._child import IMPORT_LOG_ENV
from ..session import Engine
from ._output import _line


def check_adapter(ns: argparse.Namespace, out: TextIO) -> int:
    """``harness check-adapter SPEC``: load the adapter as ``harness run``
    does, probe each workflow without faults, and say in plain words what is
    right and wrong with it; 0 when all is well, 2 naming the cause."""
    from ..report import not_tested
    from ..session._check import check_workflows

    opts = parse_opts(ns.adapter_opt)
    preload_out: Path | None = getattr(ns, "preload_out", None)
    if preload_out is not None and (preload_out.exists() or preload_out.is_symlink()):
        raise UsageError(
            f"--preload-out {preload_out}: the file exists, and check-adapter writes only a new "
            "file: remove it or name another"
        )
    adapter = guard(load_adapter(ns.spec, opts))
    caps = sorted(c.value for c in adapter.capabilities)
    # Workers forked from now on log what they import after the fork.
    imports = Path(tempfile.mkdtemp(prefix="harness-imports-")) / "imports.jsonl"
    os.environ[IMPORT_LOG_ENV] = str(imports)
    _line(out, f"harness: checking adapter {adapter.name} {adapter.describe()} ({ns.spec})")
    _line(out, f"  capabilities: {', '.join(caps) or 'none declared'}")
    engine = Engine(adapter, load_settings(ns.profile))
    try:
        setup_adapter(adapter, log=lambda line: _line(out, line))
        limit = resolve_worker_timeout(engine.settings.worker_timeout, adapter)
        with worker_timeout_limit(limit):
            checks = check_workflows(adapter, engine)
    except BaseException as exc:
        engine.close()
        close_adapter(adapter, failing=exc)
        shutil.rmtree(imports.parent, ignore_errors=True)
        raise
    finally:
        os.environ.pop(IMPORT_LOG_ENV, None)
    engine.close()
    close_adapter(adapter)
    for check in checks:
        _render_check(out, check)
    _report_imports(out, imports, preload_out)
    aims = [c.memory_aims for c in checks if c.memory_aims is not None]
    # memory_injection declared, but no workflow gives it a place to aim:
    # a run would leave the family out and say so; say it here first
    ran = None if not aims or any(aims) else ()
    gaps = not_tested(adapter, ran=ran)
    if gaps:
        _line(out, "left untested (what the adapter does not declare or give a place to aim):")
        for gap in gaps:
            _line(out, f"  {gap['capability']:19} {gap['what']}")
    bad = [c for c in checks if not c.ok]
    if not bad:
        _line(
            out,
            f"harness: adapter {adapter.name} is ready: {len(checks)} workflow(s) ran without "
            f"faults as declared{_warned(checks)} (next: "
            + with_pythonpath(
                shlex.join(["harness", "run", "--adapter", ns.spec, *_opt_words(ns.adapter_opt)])
                + " --profile ci",
                pythonpath_for(ns.spec, opts),
            )
            + ")",
        )
        return 0
    causes = "; ".join(f"workflow {c.workflow!r}: {', '.join(c.causes)}" for c in bad)
    verdict = f"harness: adapter check failed ({causes})"
    _line(out, verdict)
    if not _same_sink(out, sys.stderr):  # a CI log of stderr alone shows it too
        print(verdict, file=sys.stderr)
    return 2


def _report_imports(out: TextIO, log: Path, preload_out: Path | None) -> None:
    """Say what the workers imported after the fork (each worker pays for
    it: a framework that imports itself lazily defeats the fork server's
    preload), and write the list where ``--preload-out`` asks."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    finally:
        shutil.rmtree(log.parent, ignore_errors=True)
    workers = [json.loads(line) for line in lines if line.strip()]
    if not workers:
        return
    counts = sorted(len(w["modules"]) for w in workers)
    cpu = sorted(float(w["cpu"]) for w in workers)
    seen: dict[str, int] = {}
    for w in workers:
        for name in w["modules"]:
            seen[name] = seen.get(name, 0) + 1
    modules = sorted(seen)
    median = counts[len(counts) // 2]
    _line(
        out,
        f"  imports: {len(workers)} worker(s) imported a median of {median} modules after the "
        f"fork ({len(modules)} in all; a worker's median CPU {cpu[len(cpu) // 2] * 1000:.0f} ms)"
        + (
            ": a preload list saves each worker that (--preload-out FILE writes it; "
            "then WorkerSet(workdir, [..., '@FILE']))"
            if median >= PRELOAD_HINT
            else ""
        ),
    )
    if preload_out is not None:
        with preload_out.open("x", encoding="utf-8") as fh:
            json.dump(modules, fh, indent=0)
            fh.write("\n")
        _line(out, f"  preload list: {len(modules)} modules written to {preload_out}")


#: modules a worker imports after the fork past which check-adapter suggests a preload list
PRELOAD_HINT = 20


def _same_sink(a: TextIO, b: TextIO) -> bool:
    """Whether two streams end up in one place (a terminal both write to,
    one file or pipe after ``2>&1``): a line written to both shows twice."""
    try:
        fa, fb = os.fstat(a.fileno()), os.fstat(b.fileno())
    except (OSError, ValueError, AttributeError):  # io.StringIO and the like
        return False
    if a.isatty() and b.isatty():
        return True
    return (fa.st_dev, fa.st_ino) == (fb.st_dev, fb.st_ino)


def _warned(checks: list[Any]) -> str:
    n = sum(len(c.warnings) for c in checks)
    return f", with {n} warning{'s' if n != 1 else ''} above to read first" if n else ""


def _memory_line(check: Any) -> str:
    where = ", ".join(check.memory_aims)
    if check.memory_aimed_by == "declared":
        return f"planted at {where} (declared in memory_targets)"
    if check.memory_aimed_by == "read":
        return f"planted at {where} (a new key in each namespace the fault-free run read)"
    return (
        "nowhere to plant: no memory_targets declared and the fault-free run's contexts "
        "list no memory record (declare where the runs read in WorkflowSpec.memory_targets)"
    )


def _opt_words(pairs: list[str]) -> list[str]:
    return [w for pair in pairs for w in ("--adapter-opt", pair)]


def _render_check(out: TextIO, check: Any) -> None:
    """One workflow's block of ``harness check-adapter``."""
    status = "ok" if check.ok else f"PROBLEM: {', '.join(check.causes)}"
    _line(out, f"workflow {check.workflow}: {status}")
    declared = ", ".join(check.declared) or "none"
    # in the order declared, then the rest
    order = [k for k in check.declared if k in check.performed]
    performed = ", ".join(order + [k for k in check.performed if k not in order]) or "none"
    same = " (as declared)" if set(check.declared) == set(check.performed) else ""
    if check.ran:
        _line(out, f"  effects: declared {declared}; performed {performed}{same}")
    else:
        _line(out, f"  effects: declared {declared}; not run (the adapter raised first)")
    for run in check.runs:
        ended = run.state or "no state reported"
        raw = f" (raw status {run.raw_status!r})" if run.raw_status is not None else ""
        how = "" if run.settled else ": neither terminal nor a legitimate wait"
        err = f"; {run.error}" if run.error else ""
        _line(out, f"  run {run.run_id} {run.input}: ended {ended}{raw}{how}{err}")
    if check.transitions is not None:
        _line(out, f"  transitions: {check.transitions.verdict.value}: {check.transitions.message}")
    crashed = f", {len(check.crashes)} crashed" if check.crashes else ", none crashed"
    if check.workers:
        _line(out, f"  workers: {check.workers} started{crashed}")
    for crash in check.crashes[:3]:
        _line(out, f"    worker {crash.worker_id} {crash.exit}")
    if check.crash_points is not None:
        sites = len(check.crash_points)
        hits = sum(check.crash_points.values())
        _line(
            out,
            f"  crash points: {sites} passed ({hits} hits) on the fault-free path"
            if sites
            else "  crash points: none passed on the fault-free path (crash_point_trace() "
            "gives nothing: no targeted schedule can be aimed)",
        )
    if check.memory_aims is not None:
        _line(out, "  memory: " + _memory_line(check))
    for cause in check.causes:
        for problem in check.problems[cause]:
            _line(out, f"  {cause}: {problem}")
    for warning in check.warnings:
        _line(out, f"  warning: {warning}")
    for text in check.log_tail:
        _line(out, f"    | {text}")
