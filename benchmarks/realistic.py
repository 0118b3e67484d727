"""How many realistic runtime mistakes does the ``ci`` profile catch?

    python benchmarks/realistic.py                       # every mistake, full + sampled, SQLite
    python benchmarks/realistic.py --backend postgres    # Postgres + Redis (HARNESS_*_URL)
    python benchmarks/realistic.py --phases sampled --baseline HEAD~3
    python benchmarks/realistic.py --only memory-id-without-tenant --phases full

The mistakes are hand-written (``benchmarks/_realistic_mistakes.py``: each
an edit of the runtime with the one-line story its author would give), not
operator mutants: ``benchmarks/mutation.py`` measures those. Each runs on a
copy of ``reference_runtime/`` that carries it (``benchmarks/_mutants.py``;
the real runtime is never touched)::

    harness run --adapter reference --profile ci --stop-on-first --budget B [--seed S]

in two *phases*: ``full`` (the ``ci`` profile as CI runs it: targeted
schedules, then sampled) and ``sampled`` (``--no-targeted``: the sampled
search alone, the same number of scenarios). With ``--baseline REV`` a third
phase, ``sampled@REV``, runs the sampled search of the harness at git
revision ``REV`` (its ``harness/`` exported to a temporary folder) on the
same copies, interleaved with the others: the sampled search before and
after a change, on the same machine in the same hour.

Outcomes: ``caught`` (exit 1, a property failed), ``refused`` (exit 2: the
harness refused the adapter, i.e. the probe's fault-free run broke -- the
mistake was noticed, without a counterexample), ``missed`` (exit 0),
``inconclusive`` (exit 3), ``timeout``. The score is (caught + refused) /
(every outcome but timeouts): an inconclusive run did not catch the mistake.

Results are cached in ``--cache`` per (mistake, its edits, phase, budget,
backend, seed, harness revision), as in ``mutation.py``: a rerun after a
harness change re-tests everything, a rerun without one costs nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import _mutants
import mutation
from _realistic_mistakes import BY_NAME, MISTAKES, Mistake

PHASES = ("full", "sampled")
OUTCOMES = ("caught", "refused", "missed", "inconclusive", "timeout")
NOTICED = ("caught", "refused")


def outcome_of(run: _mutants.HarnessRun) -> str:
    """caught, refused, missed, inconclusive or timeout (see the module docstring).
    Exit 1 without a failed property in the report is a crash of the harness,
    counted inconclusive."""
    if run.returncode is None:
        return "timeout"
    if run.returncode == 1:
        try:
            return "caught" if run.failed_properties() else "inconclusive"
        except (OSError, ValueError, KeyError):
            return "inconclusive"
    return {0: "missed", 2: "refused"}.get(run.returncode, "inconclusive")


def phase_args(
    phase: str, budget: float, backend: str, seed: int, max_examples: int | None = None
) -> list[str]:
    extra = ["--no-targeted"] if phase.startswith("sampled") else []
    if max_examples is not None:
        extra += ["--max-examples", str(max_examples)]
    if backend == "postgres":
        extra += ["--adapter-opt", "backend=postgres", "--adapter-opt", "queue=redis"]
    if seed:
        extra += ["--seed", str(seed)]
    return _mutants.ci_args(*extra, budget=budget)


def tree_digest(root: Path) -> str:
    """A digest of every file under ``root/harness`` (a folder's revision)."""
    digest = hashlib.sha256()
    for p in sorted((root / "harness").rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            digest.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes())
    return f"dir-{digest.hexdigest()[:16]}"


@contextlib.contextmanager
def exported(rev: str) -> Iterator[tuple[Path, str]]:
    """``harness/`` of git revision ``rev`` in a temporary folder: (the
    folder, the full commit id). A folder holding a ``harness/`` package is
    used as it is (its revision a digest of its files): a tree assembled by
    hand, when the commit to measure cannot be checked out alone."""
    if (Path(rev) / "harness" / "__init__.py").is_file():
        yield Path(rev).resolve(), tree_digest(Path(rev))
        return
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        cwd=_mutants.REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if commit.returncode != 0:
        raise SystemExit(f"realistic: --baseline {rev!r} is not a commit: {commit.stderr.strip()}")
    sha = commit.stdout.strip()
    with tempfile.TemporaryDirectory(prefix="realistic-baseline-") as tmp:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", sha, "harness"],
            cwd=_mutants.REPO,
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield Path(tmp), sha


def run_phase(
    m: Mistake,
    phase: str,
    *,
    budget: float,
    backend: str,
    seed: int,
    timeout: float,
    repo: Path,
    max_examples: int | None = None,
) -> dict[str, Any]:
    """One phase of the ``ci`` profile on a copy carrying ``m``."""
    with tempfile.TemporaryDirectory(prefix="realistic-") as tmp:
        copy = _mutants.mutated_copy(Path(tmp) / "src", m.edits)
        run = _mutants.run_harness(
            copy,
            Path(tmp) / "report",
            phase_args(phase, budget, backend, seed, max_examples),
            timeout=timeout,
            repo=repo,
        )
        result: dict[str, Any] = {
            "outcome": outcome_of(run),
            "returncode": run.returncode,
            "seconds": round(run.seconds, 1),
        }
        with contextlib.suppress(OSError, ValueError, KeyError):
            report = run.report()
            result["failed"] = sorted(run.failed_properties())
            result["searched"] = report.get("searched_scenarios")
            found = run.counterexample()
            if found:
                result["counterexample_steps"] = len(found.get("steps") or ())
        if result["outcome"] in ("refused", "inconclusive"):
            lines = [ln for ln in run.stderr.splitlines() + run.stdout.splitlines() if ln.strip()]
            result["why"] = next(
                (ln for ln in lines if ln.startswith(("inconclusive", "harness: error"))),
                lines[-1] if lines else "",
            )[:300]
    return result


def edits_digest(m: Mistake) -> str:
    return hashlib.sha256(json.dumps([asdict(e) for e in m.edits]).encode()).hexdigest()[:16]


def judge(
    mistakes: Sequence[Mistake],
    phases: Sequence[str],
    *,
    budget: float,
    backend: str,
    seed: int,
    timeout: float,
    cache: mutation.Cache,
    revision: str,
    repo: Path,
    baseline: tuple[Path, str] | None,
    jobs: int,
    max_examples: int | None = None,
    log: Any = sys.stderr,
) -> dict[str, dict[str, dict[str, Any]]]:
    """{mistake: {phase: result}}, from the cache or run now; the work is
    ordered phase by phase within each mistake, so that the phases of one
    mistake run close together in time (a fair comparison on a busy machine)."""
    results: dict[str, dict[str, dict[str, Any]]] = {m.name: {} for m in mistakes}
    work: list[tuple[Mistake, str, dict[str, Any], Path]] = []
    for m in mistakes:
        for phase in phases:
            base = phase.startswith("sampled@")
            key = {
                "mistake": m.name,
                "edits": edits_digest(m),
                "phase": "sampled" if base else phase,
                "budget": budget,
                "backend": backend,
                "seed": seed,
                "revision": baseline[1] if base and baseline else revision,
            }
            if max_examples is not None:  # the key of a run with the profile's plan is as it was
                key["max_examples"] = max_examples
            hit = cache.get(key)
            if hit is not None:
                results[m.name][phase] = hit
            else:
                work.append((m, phase, key, baseline[0] if base and baseline else repo))
    started = time.monotonic()

    def one(item: tuple[Mistake, str, dict[str, Any], Path]) -> None:
        m, phase, key, repo = item
        result = run_phase(
            m,
            phase,
            budget=budget,
            backend=backend,
            seed=seed,
            timeout=timeout,
            repo=repo,
            max_examples=max_examples,
        )
        # A run a signal stopped (the benchmark's own ^C, a kill) says
        # nothing about the mistake: never cached as its result.
        if result["returncode"] not in (130, 143) and (result["returncode"] or 0) >= 0:
            cache.put(key, result)
        results[m.name][phase] = result
        print(
            f"realistic: [{time.monotonic() - started:6.0f} s] {phase:16} "
            f"{result['outcome']:12} {m.name} {' '.join(result.get('failed', []))}",
            file=log,
            flush=True,
        )

    if work:
        print(f"realistic: {len(work)} runs to do (cache hits skipped)", file=log, flush=True)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, work))
    return results


def table(
    mistakes: Sequence[Mistake], phases: Sequence[str], results: dict[str, dict[str, Any]]
) -> str:
    width = max(len(m.name) for m in mistakes)
    cols = [max(len(p), 12) for p in phases]
    head = f"{'mistake':{width}}  {'area':9} " + " ".join(
        f"{p:{c}}" for p, c in zip(phases, cols, strict=True)
    )
    lines = [head, "-" * len(head)]
    for m in mistakes:
        cells = []
        for p, c in zip(phases, cols, strict=True):
            r = results[m.name].get(p)
            cells.append(f"{(r['outcome'] if r else 'not run'):{c}}")
        lines.append(f"{m.name:{width}}  {m.area:9} " + " ".join(cells))
    lines.append("")
    masked = [m for m in mistakes if m.masked]
    for p in phases:
        # a mistake the runtime's other defences mask is shown, never scored
        got = [
            results[m.name][p]["outcome"] for m in mistakes if p in results[m.name] and not m.masked
        ]
        c = Counter(got)
        judged = len(got) - c["timeout"]
        noticed = sum(c[o] for o in NOTICED)
        score = f"{noticed}/{judged} = {noticed / judged:.0%}" if judged else "n/a"
        counts = ", ".join(f"{o} {c[o]}" for o in OUTCOMES if c[o])
        lines.append(f"score {p:16} {score:12}  ({counts})")
    lines.append(
        "(score = (caught + refused) / (all but timeouts); refused = the probe's "
        "fault-free run broke, exit 2)"
    )
    for m in masked:
        lines.append(f"  not scored, masked: {m.name}: {m.masked}")
    for m in mistakes:
        for p in phases:
            r = results[m.name].get(p, {})
            if r.get("outcome") == "caught":
                lines.append(f"  {m.name} [{p}]: {', '.join(r.get('failed', []))}")
            elif r.get("why"):
                lines.append(f"  {m.name} [{p}] {r['outcome']}: {r['why'][:160]}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma-separated, of {', '.join(PHASES)} (default both)",
    )
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument(
        "--baseline",
        metavar="REV",
        help="also run the sampled phase with the harness of git revision REV "
        "(or of a folder holding a harness/ package)",
    )
    ap.add_argument(
        "--harness",
        metavar="REV",
        help="run the harness of git revision REV (exported; or of a folder holding a "
        "harness/ package), not this working tree's: a checkout others are editing "
        "measures their unfinished changes too",
    )
    ap.add_argument("--only", help="comma-separated mistake names (default: every one)")
    ap.add_argument("--seed", type=int, default=0, help="harness --seed (default 0)")
    ap.add_argument(
        "--max-examples",
        type=int,
        help="harness --max-examples (default: the ci profile's plan)",
    )
    ap.add_argument(
        "--budget",
        type=float,
        default=180.0,
        help="harness --budget per run, seconds (default 180, the ci profile's own)",
    )
    ap.add_argument(
        "--timeout", type=float, help="subprocess timeout per run (default 2 x budget + 60)"
    )
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time (default 1)")
    ap.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "stateful-agent-harness"
        / "realistic",
    )
    ap.add_argument("--json", type=Path, help="also write every result to this file")
    ap.add_argument("--list", action="store_true", help="print the mistakes and stop")
    ns = ap.parse_args(argv)
    phases = [p.strip() for p in ns.phases.split(",") if p.strip()]
    if not phases or set(phases) - set(PHASES):
        ap.error(f"--phases: choose from {', '.join(PHASES)}, got {ns.phases!r}")
    chosen = list(MISTAKES)
    if ns.only:
        names = [n.strip() for n in ns.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            ap.error(f"--only: no mistake named {', '.join(unknown)}; see --list")
        chosen = [BY_NAME[n] for n in names]
    if ns.list:
        for m in chosen:
            print(f"{m.name:45} {m.area:9} {m.story}")
        return 0
    if ns.backend == "postgres" and not (
        os.environ.get("HARNESS_POSTGRES_URL") and os.environ.get("HARNESS_REDIS_URL")
    ):
        ap.error("--backend postgres needs HARNESS_POSTGRES_URL and HARNESS_REDIS_URL")
    timeout = ns.timeout or 2 * ns.budget + 60
    revision = mutation.harness_revision()
    with contextlib.ExitStack() as stack:
        repo = _mutants.REPO
        if ns.harness:
            repo, revision = stack.enter_context(exported(ns.harness))
        baseline = None
        if ns.baseline:
            baseline = stack.enter_context(exported(ns.baseline))
            if "sampled" in phases:
                i = phases.index("sampled")
                phases.insert(i, f"sampled@{ns.baseline}")
            else:
                phases.append(f"sampled@{ns.baseline}")
        print(f"realistic: harness revision {revision}", file=sys.stderr)
        results = judge(
            chosen,
            phases,
            budget=ns.budget,
            backend=ns.backend,
            seed=ns.seed,
            timeout=timeout,
            cache=mutation.Cache(ns.cache),
            revision=revision,
            repo=repo,
            baseline=baseline,
            jobs=ns.jobs,
            max_examples=ns.max_examples,
        )
    plan = "" if ns.max_examples is None else f", --max-examples {ns.max_examples}"
    print(
        f"realistic-mistakes benchmark: {len(chosen)} mistakes, harness {revision}, "
        f"ci profile{plan}, {ns.backend}, seed {ns.seed}, --budget {ns.budget:g}"
    )
    print(table(chosen, phases, results))
    if ns.json:
        ns.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
