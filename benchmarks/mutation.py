"""How many generated mutants of the reference runtime does the ``ci`` profile kill?

    pip install -e '.[bench]'
    python benchmarks/mutation.py                 # 60 mutants, seed 0, all three phases
    python benchmarks/mutation.py --n 20 --phases full

A mutant is one small change made by one of cosmic-ray's operators (``+`` to
``-``, ``<`` to ``<=``, ``True`` to ``False``, ``and`` to ``or``, a number
changed, a ``break`` made a ``continue``, a loop that never runs, a decorator
removed, an exception type swapped, ...) at one place in
``reference_runtime/``. The test is the main job of the project, run on a copy
of the runtime that carries the mutant (``benchmarks/_mutants.py``)::

    harness run --adapter reference --profile ci --stop-on-first --budget B

exit 1 = killed, 0 = survived, 2 or 3 = incompetent (not judged: the harness
refused the adapter, or could not reach a verdict), past the subprocess
timeout = timeout. Each mutant runs in up to three *phases*:

- ``full``: the ``ci`` profile as CI runs it (targeted schedules, then sampled);
- ``targeted``: the targeted schedules alone (``--max-examples T``, T the number
  of targeted schedules the unmutated runtime's site profile yields, at most
  the profile's ``max_examples``, counted once per harness revision by
  :func:`count_targeted`; a mutant that changes the site profile may plan a few
  more or fewer, and then a few sampled scenarios run or a few targeted ones do
  not);
- ``sampled``: the sampled search alone (``--no-targeted``).

cosmic-ray is used as a library (its operators and its mutation visitor), not
through its CLI and session database, for three reasons: its ``exec`` writes
each mutant into the module file in place, and here the package is an editable
install in a checkout shared with other engineers (their tests would import the
mutant); a result must be cached per (mutant, harness revision) so that a
rerun after a harness change re-tests everything and a rerun without one costs
nothing, where its session database is keyed by nothing but the job; and the
sample is drawn here, a place first and an operator at that place second, so
that the one line with five ``+`` signs does not get fifty of the sixty
mutants (cosmic-ray's own enumeration gives each ``+`` ten operators).

Results are cached in ``--cache`` (default ``~/.cache/stateful-agent-harness/
mutation``), one JSON file per (mutant, phase, budget, harness revision): the
revision is the commit plus a digest of the files under ``harness/``, so an
uncommitted change to the harness counts as a new revision.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import _mutants

#: files where a mutant means nothing here: the seeded-bug catalogue (its flags
#: are off in every run), the crash-point declarations (names and an arming
#: parser the harness reads once), the command line (help text and argument
#: parsing no harness run goes through), the service-URL lookup of the test
#: suite, and the Postgres and Redis backends, which the ``ci`` profile on
#: SQLite never runs (a mutant there survives by construction)
EXCLUDED = (
    "_bugs.py",
    "crashpoints.py",
    "__main__.py",
    "service_urls.py",
    "store/postgres.py",
    "store/redis_queue.py",
)

PHASES = ("full", "targeted", "sampled")

#: a phase's run: killed (exit 1), survived (0), incompetent (2, 3, other),
#: timeout (stopped past the subprocess timeout)
OUTCOMES = ("killed", "survived", "timeout", "incompetent")


@dataclass(frozen=True)
class Mutant:
    """One operator applied at one occurrence in one file of the runtime."""

    path: str  # relative to reference_runtime/
    operator: str
    occurrence: int
    line: int
    col: int

    @property
    def ident(self) -> str:
        return f"{self.path}:{self.line}:{self.col} {self.operator}#{self.occurrence}"


# -- enumerating and applying mutants ------------------------------------------


def runtime_files() -> list[Path]:
    """The runtime's modules that mutants are drawn from, sorted."""
    return sorted(
        p
        for p in _mutants.SOURCE.rglob("*.py")
        if p.relative_to(_mutants.SOURCE).as_posix() not in EXCLUDED
        and "__pycache__" not in p.parts
    )


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) of every annotation in ``source``, as (line, column).

    With ``from __future__ import annotations`` an annotation is a string no
    runtime reads (pydantic models aside, where ``str & None`` just fails to
    import), so a mutant inside one is equivalent or incompetent by
    construction: such places are not drawn.
    """
    import ast

    spans = []
    for node in ast.walk(ast.parse(source)):
        found: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        for a in found:
            if a is not None and a.end_lineno is not None and a.end_col_offset is not None:
                spans.append(((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset)))
    return spans


def _operators() -> list[tuple[str, Any]]:
    import cosmic_ray.plugins

    out = []
    for name in cosmic_ray.plugins.operator_names():
        cls = cosmic_ray.plugins.get_operator(name)
        if not cls.arguments():  # VariableReplacer/Inserter need a configuration
            out.append((name, cls()))
    return out


def enumerate_mutants(files: Iterable[Path]) -> list[Mutant]:
    """Every mutant cosmic-ray's argument-free operators offer in ``files``."""
    from cosmic_ray.ast import ast_nodes, get_ast_from_path

    operators = _operators()
    out: list[Mutant] = []
    for file in files:
        rel = file.relative_to(_mutants.SOURCE).as_posix()
        tree = get_ast_from_path(file)
        spans = annotation_spans(file.read_text(encoding="utf-8"))
        nodes = list(ast_nodes(tree))
        for name, op in operators:
            occurrence = 0
            for node in nodes:
                for start, _end in op.mutation_positions(node):
                    if not any(a <= start < b for a, b in spans):
                        out.append(Mutant(rel, name, occurrence, start[0], start[1]))
                    occurrence += 1
    return out


def sample(mutants: Sequence[Mutant], n: int, seed: int) -> tuple[list[Mutant], int]:
    """``n`` mutants: a place (file, line, column) drawn uniformly without
    replacement, then one operator at that place. A mutant that does not
    compile (``*,`` made ``|,``) is put back and another place drawn; returns
    the sample and how many were put back."""
    places: dict[tuple[str, int, int], list[Mutant]] = {}
    for m in mutants:
        places.setdefault((m.path, m.line, m.col), []).append(m)
    rng = random.Random(seed)
    keys = sorted(places)
    rng.shuffle(keys)
    chosen: list[Mutant] = []
    rejected = 0
    for k in keys:
        if len(chosen) >= n:
            break
        m = rng.choice(places[k])
        try:
            compile(mutate(m)[1], m.path, "exec")
        except SyntaxError:
            rejected += 1
            continue
        chosen.append(m)
    return chosen, rejected


def from_list(mutants: Sequence[Mutant], lines: Iterable[str]) -> tuple[list[Mutant], list[str]]:
    """The mutants a ``--list`` printed, found again in today's source: a
    line ``path:line:col operator#occurrence  old  ->  new`` names the mutant
    of that file and operator whose change reads the same (the nearest to
    the listed line when several do), wherever edits since have moved it.
    Returns them, and the listed lines no mutant matches any more (their
    line was edited away)."""
    by_kind: dict[tuple[str, str], list[Mutant]] = {}
    for m in mutants:
        by_kind.setdefault((m.path, m.operator), []).append(m)
    found: list[Mutant] = []
    gone: list[str] = []
    for raw in lines:
        text = raw.rstrip("\n")
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        ident, _, change = text.partition("  ")
        where, _, op = ident.partition(" ")
        path, line_s, _col = where.rsplit(":", 2)
        operator = op.rsplit("#", 1)[0]
        before = change.strip().split("  ->  ", 1)[0]
        lines_of = _source_lines(path)
        same = []
        for m in by_kind.get((path, operator), []):
            # Only a mutant on a line that read the same can be the same;
            # the others are not mutated (cosmic-ray raises on a few
            # places it offers, e.g. an ``except (A, B)`` tuple).
            if lines_of[m.line - 1].strip() != before:
                continue
            source, mutated = mutate(m)
            if changed_line(source, mutated, m.line) == change.strip():
                same.append(m)
        if not same:
            gone.append(text)
            continue
        found.append(min(same, key=lambda m: (abs(m.line - int(line_s)), m.occurrence)))
    return found, gone


def _source_lines(path: str) -> list[str]:
    return (_mutants.SOURCE / path).read_text(encoding="utf-8").splitlines()


#: cosmic-ray's ExceptionReplacer names an exception nothing raises, which its
#: own runner does not define either: without this, the ``except`` clause would
#: raise NameError when an exception reaches it
_STAND_IN = (
    "\n\nclass CosmicRayTestingException(Exception):  # added by benchmarks/mutation.py\n    pass\n"
)


def mutate(m: Mutant) -> tuple[str, str]:
    """(original source, mutated source) of ``m``'s file."""
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    source = (_mutants.SOURCE / m.path).read_text(encoding="utf-8")
    mutated = mutate_code(source, get_operator(m.operator)(), m.occurrence)
    if mutated is None:
        raise LookupError(f"{m.ident}: cosmic-ray applied no mutation")
    if "CosmicRayTestingException" in mutated:
        mutated += _STAND_IN
    return source, mutated


def changed_line(source: str, mutated: str, line: int) -> str:
    """``old -> new`` for the mutated line (the first differing line near it)."""
    a, b = source.splitlines(), mutated.splitlines()
    for i in range(max(0, line - 1), min(len(a), len(b))):
        if a[i] != b[i]:
            return f"{a[i].strip()}  ->  {b[i].strip()}"
    return "(no visible change)"


# -- revisions and the cache ----------------------------------------------------


def harness_revision() -> str:
    """The commit plus a digest of every file under ``harness/`` (so an
    uncommitted change to the harness is a revision of its own)."""
    digest = hashlib.sha256()
    root = _mutants.REPO / "harness"
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            digest.update(p.relative_to(root).as_posix().encode() + b"\0")
            digest.update(p.read_bytes())
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=_mutants.REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "nogit"
    return f"{commit}-{digest.hexdigest()[:12]}"


class Cache:
    """One JSON file per key, written atomically."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def _path(self, key: dict[str, Any]) -> Path:
        name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
        return self.folder / f"{name}.json"

    def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads(self._path(key).read_text())
        except (OSError, ValueError):
            return None
        return data if data.get("key") == key else None

    def put(self, key: dict[str, Any], value: dict[str, Any]) -> None:
        path = self._path(key)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**value, "key": key}, indent=1))
        tmp.replace(path)


def count_targeted(cache: Cache, revision: str, timeout: float) -> int:
    """How many targeted schedules the ``ci`` profile plans for the unmutated
    runtime (the site profile decides it), cached per harness revision."""
    key = {"what": "targeted-count", "revision": revision}
    hit = cache.get(key)
    if hit is not None:
        return int(hit["count"])
    code = (
        "from harness import load_settings\n"
        "from harness.adapters._loading import load_adapter\n"
        "from harness.scenarios import probe_universe\n"
        "from harness.scenarios._targeted import targeted\n"
        "s = load_settings('ci')\n"
        "u = probe_universe(load_adapter('reference', {}), families=s.families or None,\n"
        "                   max_runs=s.max_runs, max_episodes=s.max_episodes)\n"
        # The ci profile runs at most max_examples of them: targeted-only is
        # then the prefix of what the full run does.
        "print(min(len(targeted(u)), s.max_examples))\n"
    )
    with tempfile.TemporaryDirectory(prefix="mutation-count-") as tmp:
        copy = _mutants.copy_runtime(Path(tmp))
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=copy,
            env=_mutants.harness_env(copy),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        ).stdout
    count = int(out.strip().splitlines()[-1])
    cache.put(key, {"count": count})
    return count


# -- running -------------------------------------------------------------------


def phase_args(phase: str, budget: float, targeted: int) -> list[str]:
    extra = {
        "full": [],
        "targeted": ["--max-examples", str(targeted)],
        "sampled": ["--no-targeted"],
    }[phase]
    return _mutants.ci_args(*extra, budget=budget)


def outcome_of(run: _mutants.HarnessRun) -> str:
    """killed, survived, timeout or incompetent. Exit 1 counts as killed only
    with a report that names a failed property: Python exits 1 on an uncaught
    exception too (a mutant that breaks the runtime's import crashes the
    harness with a traceback and exit 1), and that is no finding."""
    if run.returncode is None:
        return "timeout"
    if run.returncode == 1:
        try:
            return "killed" if run.failed_properties() else "incompetent"
        except (OSError, ValueError, KeyError):
            return "incompetent"
    return {0: "survived"}.get(run.returncode, "incompetent")


def run_phase(
    m: Mutant, mutated: str, phase: str, budget: float, targeted: int, timeout: float
) -> dict[str, Any]:
    """Run one phase of the ``ci`` profile on a copy carrying ``m``."""
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        copy = _mutants.copy_runtime(Path(tmp) / "src")
        (copy / _mutants.PACKAGE / m.path).write_text(mutated, encoding="utf-8")
        run = _mutants.run_harness(
            copy, Path(tmp) / "report", phase_args(phase, budget, targeted), timeout=timeout
        )
        result: dict[str, Any] = {
            "outcome": outcome_of(run),
            "returncode": run.returncode,
            "seconds": round(run.seconds, 1),
        }
        try:
            report = run.report()
            result["failed"] = sorted(run.failed_properties())
            result["searched"] = report.get("searched_scenarios")
        except (OSError, ValueError, KeyError):
            pass
        if result["outcome"] == "incompetent":
            lines = [ln for ln in run.stderr.splitlines() + run.stdout.splitlines() if ln.strip()]
            result["why"] = next(
                (ln for ln in lines if ln.startswith(("inconclusive", "harness: error"))),
                lines[-1] if lines else "",
            )
    return result


@dataclass
class Row:
    mutant: Mutant
    change: str
    results: dict[str, dict[str, Any]]


def judge(
    mutants: Sequence[Mutant],
    phases: Sequence[str],
    *,
    budget: float,
    timeout: float,
    cache: Cache,
    revision: str,
    jobs: int,
    max_seconds: float | None = None,
    log: Any = sys.stderr,
) -> list[Row]:
    """Every phase of every mutant, from the cache or run now. Past
    ``max_seconds`` no new run starts: the rest stays not run (and uncached)."""
    targeted = count_targeted(cache, revision, timeout) if "targeted" in phases else 0
    if targeted:
        print(f"mutation: {targeted} targeted schedules in the ci profile", file=log)
    rows: list[Row] = []
    work: list[tuple[Row, str, str, dict[str, Any]]] = []
    for m in mutants:
        source, mutated = mutate(m)
        row = Row(m, changed_line(source, mutated, m.line), {})
        rows.append(row)
        for phase in phases:
            key = {
                "mutant": asdict(m),
                "source": hashlib.sha256(source.encode()).hexdigest(),
                "phase": phase,
                "budget": budget,
                "targeted": targeted if phase == "targeted" else None,
                "revision": revision,
            }
            hit = cache.get(key)
            if hit is not None:
                row.results[phase] = hit
            else:
                work.append((row, phase, mutated, key))
    started = time.monotonic()

    def one(item: tuple[Row, str, str, dict[str, Any]]) -> None:
        row, phase, mutated, key = item
        if max_seconds is not None and time.monotonic() - started > max_seconds:
            return
        result = run_phase(row.mutant, mutated, phase, budget, targeted, timeout)
        cache.put(key, result)
        row.results[phase] = result
        print(
            f"mutation: [{time.monotonic() - started:6.0f} s] {phase:8} {result['outcome']:11} "
            f"{row.mutant.ident}",
            file=log,
            flush=True,
        )

    if work:
        print(
            f"mutation: {len(work)} runs to do ({len(rows)} mutants, cache hits skipped)", file=log
        )
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, work))
    return rows


# -- printing ------------------------------------------------------------------


def summary(rows: Sequence[Row], phases: Sequence[str]) -> str:
    lines = [f"{'phase':9} " + " ".join(f"{o:>11}" for o in OUTCOMES) + "   kill rate"]
    for phase in phases:
        c = Counter(r.results[phase]["outcome"] for r in rows if phase in r.results)
        judged = c["killed"] + c["survived"]
        rate = f"{c['killed'] / judged:6.1%} of {judged}" if judged else "  n/a"
        lines.append(f"{phase:9} " + " ".join(f"{c[o]:>11}" for o in OUTCOMES) + f"   {rate}")
    lines.append(
        "(kill rate = killed / (killed + survived); timeouts and incompetent mutants are "
        "not judged; equivalent mutants are not removed: see benchmarks/README.md)"
    )
    for phase in phases:
        res = [r.results[phase] for r in rows if phase in r.results]
        refused = sum(1 for x in res if x["outcome"] == "incompetent" and x.get("returncode") == 2)
        c = Counter(x["outcome"] for x in res)
        if refused:
            noticed = c["killed"] + refused
            lines.append(
                f"{phase}: {refused} of the incompetent were refused (exit 2: the runtime "
                f"raised inside the adapter's own methods, open() or close(); a runtime that "
                f"no longer finishes a fault-free run is a progress failure, killed); "
                f"counted as killed: {noticed / (noticed + c['survived']):.1%} of "
                f"{noticed + c['survived']}"
            )
    missing = sum(1 for r in rows for p in phases if p not in r.results)
    if missing:
        lines.append(f"{missing} runs not done (--max-seconds): rerun to finish from the cache")
    for phase in phases:
        survivors = [r for r in rows if r.results.get(phase, {}).get("outcome") == "survived"]
        if survivors:
            lines.append(f"\nsurvivors of {phase}:")
            for r in sorted(survivors, key=lambda r: (r.mutant.path, r.mutant.line)):
                m = r.mutant
                op = m.operator.split("/")[-1]
                lines.append(f"  reference_runtime/{m.path}:{m.line}  {op}: {r.change}")
    others = [
        (r, p)
        for r in rows
        for p in phases
        if r.results.get(p, {}).get("outcome") in ("timeout", "incompetent")
    ]
    if others:
        lines.append("\nnot judged:")
        for r, p in others:
            res = r.results[p]
            why = f"exit {res.get('returncode')}"
            if isinstance(res.get("why"), str) and not res["why"].startswith("report:"):
                text = res["why"]
                why += f": {text[:150]}..." if len(text) > 150 else f": {text}"
            lines.append(
                f"  {p:8} {res['outcome']:11} reference_runtime/{r.mutant.path}:"
                f"{r.mutant.line} {r.change}  [{why}]"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=60, help="mutants to sample (default 60)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    ap.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma-separated, of {', '.join(PHASES)} (default all)",
    )
    ap.add_argument(
        "--budget",
        type=float,
        default=180.0,
        help="harness --budget per run, seconds (default 180, the ci profile's own)",
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="subprocess timeout per run, seconds (default 2 x budget + 60)",
    )
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time (default 1)")
    ap.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="start no run after this many seconds; print what is done",
    )
    ap.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "stateful-agent-harness"
        / "mutation",
    )
    ap.add_argument("--json", type=Path, help="also write every result to this file")
    ap.add_argument("--list", action="store_true", help="print the sample and stop")
    ap.add_argument(
        "--mutants",
        type=Path,
        help="judge the mutants a --list printed (a file of its lines), found again in "
        "today's source, instead of drawing a sample: the same sample across runtime edits",
    )
    ns = ap.parse_args(argv)
    phases = [p.strip() for p in ns.phases.split(",") if p.strip()]
    if not phases or set(phases) - set(PHASES):
        ap.error(f"--phases: choose from {', '.join(PHASES)}, got {ns.phases!r}")
    timeout = ns.timeout or 2 * ns.budget + 60

    everything = enumerate_mutants(runtime_files())
    places = len({(m.path, m.line, m.col) for m in everything})
    if ns.mutants is not None:
        try:
            listed = ns.mutants.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            ap.error(f"--mutants: cannot read {ns.mutants}: {exc}")
        chosen, gone = from_list(everything, listed)
        print(
            f"mutation: {len(chosen)} of {len(everything)} mutants at {places} places, "
            f"as listed in {ns.mutants}; {len(gone)} listed no longer found",
            file=sys.stderr,
        )
        for line in gone:
            print(f"mutation: not found (its line was edited): {line}", file=sys.stderr)
        sampled_as = f"from {ns.mutants}"
    else:
        chosen, rejected = sample(everything, ns.n, ns.seed)
        print(
            f"mutation: {len(chosen)} of {len(everything)} mutants at {places} places "
            f"(seed {ns.seed}; {rejected} drawn that do not compile, put back)",
            file=sys.stderr,
        )
        sampled_as = f"seed {ns.seed}"
    if ns.list:
        for m in chosen:
            source, mutated = mutate(m)
            print(f"{m.ident}  {changed_line(source, mutated, m.line)}")
        return 0
    revision = harness_revision()
    print(f"mutation: harness revision {revision}", file=sys.stderr)
    rows = judge(
        chosen,
        phases,
        budget=ns.budget,
        timeout=timeout,
        cache=Cache(ns.cache),
        revision=revision,
        jobs=ns.jobs,
        max_seconds=ns.max_seconds,
    )
    print(
        f"mutation benchmark: {len(rows)} mutants of reference_runtime/ ({sampled_as}), "
        f"harness {revision}, ci profile, --budget {ns.budget:g}"
    )
    print(summary(rows, phases))
    if ns.json:
        ns.json.write_text(
            json.dumps(
                [{"mutant": asdict(r.mutant), "change": r.change, **r.results} for r in rows],
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
