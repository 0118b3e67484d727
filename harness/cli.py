"""``harness``: the command line. Scripts rely on this contract.

    harness run --adapter NAME|module:attr [--adapter-opt KEY=VALUE ...]
                [--profile dev|ci|thorough] [--seed N] [--budget SECONDS]
                [--report-dir DIR] [--exhaustive WORKFLOW]
                [--mode search|random-kill] [--stop-on-first] [--scenario FILE ...]
                [--shard K/N] [--jobs N|auto] [--example-db PATH|redis://...]
    harness merge DIR... --report-dir OUT [--partial] [--example-db PATH|redis://...]
    harness replay DIR | FILE --adapter NAME [--adapter-opt KEY=VALUE ...]
    harness report DIR
    harness check-adapter NAME|module:attr [--adapter-opt KEY=VALUE ...] [--preload-out FILE]
    harness list adapters|faults|properties|bugs|services
    harness init --shape queue|langgraph|dbos|temporal [--app MODULE:ATTR] [DIR]

Exit codes: 0 every property the adapter's capabilities allow was exercised
and held; 1 a property failed (or replay reproduced the failure); 2 usage,
configuration or adapter error (the message says what was wrong and how to
fix it); 3 inconclusive: a property that should have been judged could not
be, a fault family the run armed never fired, or the budget ended the search before
every kind of fault in its plan ran once (a later cut keeps the verdict and says what
did not run; the output says which; properties the adapter's capabilities leave
``not_tested`` are listed and do not make a run inconclusive); 130 / 143
interrupted by SIGINT / SIGTERM (workers killed, environments closed, a
partial report marked ``interrupted`` written; a second signal exits at once).
"""

from __future__ import annotations

import argparse
import difflib
import os
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn, TextIO

from ._errors import AdapterError, HarnessError, Interrupted, UsageError, is_adapter_fault
from ._signals import exit_code, handling_signals, sigint_is_ours, signal_received

# Import-light on purpose: what this module imports runs before main()
# installs the SIGINT/SIGTERM handlers, where a Ctrl-C would print Python's
# KeyboardInterrupt traceback. The settings, the engine and the rest are
# imported inside main(), with the handlers in place.

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3
#: the reader of stdout went away (128 + SIGPIPE, as a shell reports it)
EXIT_BROKEN_PIPE = 141


EXIT_CODES = """\
exit codes:
  0    every property the adapter's capabilities allow was exercised and held
  1    a property failed (replay: the failure was reproduced)
  2    usage, configuration or adapter error (the message says how to fix it)
  3    inconclusive: something that should have been judged was not (the
       report says what)
  130  interrupted by SIGINT, 143 by SIGTERM (a partial report is kept)
  141  the reader of its output went away (harness list faults | head)"""

RUN_EXAMPLES = """\
examples:
  harness run --adapter reference
  harness run --adapter reference --adapter-opt bug=retry-unknown-commit --profile ci
  PYTHONPATH=. harness run --adapter my_adapter:MyAdapter --report-dir reports/mine
  harness run --adapter reference --seed 0 --shard 2/4 --report-dir reports/shard2"""


class _Parser(argparse.ArgumentParser):
    """argparse, plus "did you mean" for a mistyped option."""

    #: the arguments being parsed (shared by a parser and its subparsers)
    argv: list[str]

    def error(self, message: str) -> NoReturn:
        hint = _option_hint(self, getattr(self, "argv", []))
        super().error(f"{message}{hint}")


def _option_hint(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    """``; did you mean --max-examples?`` for each unknown option of
    ``argv``, among the options of the subcommand it names."""
    known = dict(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = next((w for w in argv if w in action.choices), None)
            if chosen is not None:
                known = dict(action.choices[chosen]._option_string_actions)
    hints = []
    for word in argv:
        if not word.startswith("--"):
            continue
        name = word.split("=", 1)[0]
        if name in known:
            continue
        close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
        if close:
            hints.append(f"{name}: did you mean {close[0]}?")
    return ("; " + "; ".join(hints)) if hints else ""


def _shard(value: str) -> tuple[int, int]:
    """``--shard K/N``, strictly: an empty value (an unset ``$CI_NODE_INDEX``)
    is refused, not taken for "no shard" (the whole search on every machine).
    Raises :class:`UsageError` (exit 2, the message says how to fix it)."""
    from ._settings import SHARD_FIX, parse_shard

    if not value.strip():
        raise UsageError(
            f"--shard {value!r} is empty (an unset variable, such as $CI_NODE_INDEX?); {SHARD_FIX}"
        )
    shard = parse_shard(value)
    if shard is None:  # "none": leave --shard out instead
        raise UsageError(f"shard {value!r} from the command line is not K/N; {SHARD_FIX}")
    return shard


class _Version(argparse.Action):
    """``--version``, looked up only when asked (reading the installed
    package's metadata takes a fifth of a second on every start)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(_version())
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"harness (stateful-agent-harness) {version('stateful-agent-harness')}"
    except PackageNotFoundError:
        return "harness (stateful-agent-harness, not installed)"


def _adapter_opts(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--adapter-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"an option of {what}, handed to it as a keyword argument (repeatable); "
        "the reference adapter's: backend=sqlite|postgres, queue=store|redis, "
        "bug=NAME[,NAME] (harness list bugs), lease_seconds, postgres_url, redis_url",
    )


def _property_opt(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--property",
        dest="properties",
        action="append",
        default=[],
        metavar="module:attr",
        help=f"{what}: your own invariant, an @harness.invariant (or a list of them) "
        "importable from PYTHONPATH, or a module to take every one it defines (repeatable; "
        "see docs/invariants.md)",
    )


def _setting_opts(parser: argparse.ArgumentParser) -> None:
    """An option for each setting that has a flag, made from the
    :class:`~harness._settings.Option` its ``Settings`` field carries (the
    one place a setting is spelled): ``dest`` is the field's name, and a flag
    not given is None, so that ``[tool.harness]`` and ``HARNESS_*`` stand."""
    from ._settings import setting_options

    for name, option in setting_options():
        if option.flag is None:
            continue
        if option.switch is not None:
            parser.add_argument(
                option.flag,
                dest=name,
                action="store_const",
                const=option.switch,
                default=None,
                help=option.help,
            )
            continue
        # argparse's own int and float: its "invalid int value" message
        typed: dict[str, Any] = {} if option.type is None else {"type": option.type}
        parser.add_argument(
            option.flag,
            dest=name,
            choices=option.choices,
            metavar=option.metavar,
            default=None,
            help=option.help,
            **typed,
        )


def _parser() -> argparse.ArgumentParser:
    from ._settings import PROFILES

    p = _Parser(
        prog="harness",
        description="Chaos verification for stateful agent runtimes.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{EXIT_CODES}\n\n{RUN_EXAMPLES}\n\n'harness COMMAND --help' tells more.",
        # A prefix that works today would become ambiguous, or change meaning,
        # when an option is added: scripts name options whole.
        allow_abbrev=False,
    )
    p.add_argument(
        "--version", action=_Version, nargs=0, help="show the harness's version and exit"
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    r = sub.add_parser(
        "run",
        help="search for failing scenarios and write a report",
        description="Search an adapter's runtime for property violations under faults, "
        "shrink each failure to a minimal counterexample, and write a report folder.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{EXIT_CODES}\n\n{RUN_EXAMPLES}",
        allow_abbrev=False,
    )
    r.add_argument(
        "--adapter",
        required=True,
        metavar="NAME|module:attr",
        help="the runtime to test: an installed adapter by name (reference, langgraph, "
        "openai_agents, dbos, temporal, or one a package registers: harness list adapters), "
        "or your own as 'package.module:attr' importable from PYTHONPATH",
    )
    _adapter_opts(r, "the adapter")
    _property_opt(r, "judge it in every scenario beside the built-in properties")
    _setting_opts(r)
    r.add_argument(
        "--network-backend",
        dest="network_backend",
        choices=("auto", "toxiproxy", "kernel"),
        help="where the network faults run: toxiproxy (a server at HARNESS_TOXIPROXY_URL, or "
        "one the harness starts from HARNESS_TOXIPROXY_BIN or toxiproxy-server on PATH; no "
        "root), kernel (netfilter rules: root and iptables), or auto (default, "
        "HARNESS_NETWORK_BACKEND): Toxiproxy if a server can be had, else the kernel",
    )
    r.add_argument(
        "--scenario",
        dest="scenarios",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="a scenario file (a run folder's scenario.json), or a folder of them, to run "
        "first as a regression (repeatable)",
    )
    r.add_argument(
        "--exhaustive",
        metavar="WORKFLOW",
        help="instead of sampling, kill at every (crash point x hit) of one workflow",
    )
    rp = sub.add_parser(
        "replay",
        help="re-run the kept scenario of a run folder, or a scenario file against --adapter",
        description="Run the scenario a run folder kept (its minimal counterexample) again, "
        "against the adapter it recorded or the one --adapter names (say, your fix).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"{EXIT_CODES}\n\nexamples:\n  harness replay reports\n"
        "  harness replay reports --adapter reference --adapter-opt backend=sqlite\n"
        "  PYTHONPATH=. harness replay reports/scenario.json --adapter my_adapter:Fixed",
        allow_abbrev=False,
    )
    rp.add_argument(
        "dir",
        type=Path,
        metavar="DIR|FILE",
        help="a run folder (--report-dir of a harness run), or a scenario file",
    )
    rp.add_argument(
        "--adapter",
        default=None,
        metavar="NAME|module:attr",
        help="the adapter to replay against (required for a scenario file; for a run folder "
        "it replaces the one recorded, options too: to replay against your fix)",
    )
    _adapter_opts(rp, "--adapter (only with --adapter: the recorded options go with it)")
    _property_opt(
        rp, "check it again on the kept scenario (the replay command a run prints names it)"
    )
    rp.add_argument(
        "--trust-adapter",
        action="store_true",
        help="import the adapter the run folder records even though it is not built in, "
        "and the invariants its run was given (a report folder may come from anyone: only "
        "for folders you trust)",
    )
    rp.add_argument(
        "--profile",
        choices=list(PROFILES),
        help="the settings to replay under (default: the run folder's)",
    )
    mg = sub.add_parser(
        "merge",
        help="merge the report folders of a search's shards (harness run --shard K/N) into "
        "one report: evidence and coverage summed, verdicts judged again, every "
        "counterexample kept",
        allow_abbrev=False,
    )
    mg.add_argument("dirs", type=Path, nargs="+", metavar="DIR", help="a shard's report folder")
    mg.add_argument(
        "--report-dir", required=True, type=Path, metavar="OUT", help="where to write the merge"
    )
    mg.add_argument(
        "--partial",
        action="store_true",
        help="merge even when shards are missing (the merged verdict is then inconclusive, "
        "naming them)",
    )
    mg.add_argument(
        "--example-db",
        dest="example_db",
        metavar="PATH|redis://...",
        default=None,
        help="keep the merged search's counterexamples in this example database (shards "
        "run with --example-db only read it), and drop what it replayed that no longer fails",
    )
    rr = sub.add_parser(
        "report",
        help="re-render report.json/html, junit.xml and summary.md of a run folder",
        allow_abbrev=False,
    )
    rr.add_argument("dir", type=Path, metavar="DIR", help="a run folder")
    ca = sub.add_parser(
        "check-adapter",
        help="run each workflow of an adapter once without faults and say what is wrong "
        "with the adapter, in plain words (exit 0: ready; 2: the cause is printed)",
        allow_abbrev=False,
    )
    ca.add_argument(
        "spec",
        metavar="ADAPTER",
        help="an installed adapter's name (harness list adapters) or 'package.module:attr' "
        "(importable from PYTHONPATH)",
    )
    _adapter_opts(ca, "the adapter")
    ca.add_argument(
        "--profile",
        choices=list(PROFILES),
        help="the settings to check under (default: dev, or ci when $CI is set)",
    )
    ca.add_argument(
        "--preload-out",
        type=Path,
        metavar="FILE",
        help="write the modules the adapter's workers imported after the fork (a JSON list) "
        "to FILE, a new file: give it to the fork server as the preload entry '@FILE' "
        "(WorkerSet(workdir, [..., '@FILE'])) and each worker imports none of them again",
    )
    ls = sub.add_parser("list", help="list what exists", allow_abbrev=False)
    ls.add_argument("what", choices=["adapters", "faults", "properties", "bugs", "services"])
    _property_opt(ls, "with 'properties': list it too")
    ls.add_argument(
        "--adapter",
        default=None,
        metavar="NAME|module:attr",
        help="with 'properties': list the invariants this adapter's properties() returns too; "
        "with 'bugs': the adapter whose seeded bugs to list (default: reference)",
    )
    _adapter_opts(ls, "--adapter")
    ls.add_argument(
        "--services",
        metavar="FILE",
        type=Path,
        help="with `services`: your service declarations (TOML or JSON) too, checked "
        "(default: $HARNESS_SERVICES_FILE when set)",
    )
    it = sub.add_parser(
        "init",
        help="write an adapter for your runtime, a pytest suite and a CI workflow "
        "(never over an existing file)",
        description="Write harness_adapter.py, tests/test_resilience.py and "
        ".github/workflows/resilience.yml into DIR for your runtime's shape: 'queue' (a "
        "job queue with leases: fill in the four marked calls into your queue), or "
        "'langgraph', 'dbos', 'temporal' (the built-in adapter on your --app).",
        epilog="examples:\n  harness init --shape queue\n"
        "  harness init --shape langgraph --app myproject.graph:APP",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    it.add_argument(
        "--shape", required=True, choices=["queue", "langgraph", "dbos", "temporal"],
        help="how your runtime is built",
    )  # fmt: skip
    it.add_argument("--app", metavar="MODULE:ATTR", help="the framework app (not for queue)")
    it.add_argument(
        "dir", nargs="?", type=Path, default=Path("."), help="the project root (default: .)"
    )
    return p


def main(argv: list[str] | None = None, *, out: TextIO | None = None) -> int:
    """``harness ARGS``: the exit code (see the module's docstring).

    SIGINT and SIGTERM are handled from here on, before the arguments are
    parsed and the engine imported (a second or more on a loaded machine):
    a signal during start-up exits 130 / 143 with one line, like one later.
    Whatever ends a command without its result (``sys.exit()`` in code the
    harness called, a ``KeyboardInterrupt`` no signal caused) exits 2,
    never 0: exit 0 means a command finished and said so.
    """
    try:
        with handling_signals():
            try:
                return _main(argv, out=out)
            except Interrupted:
                raise
            except (SystemExit, KeyboardInterrupt, GeneratorExit) as exc:
                return _escaped(exc, argv)
    except Interrupted as exc:  # in start-up, or while the line below was printed
        return _interrupted(exc)
    except BrokenPipeError:
        # The reader went away (``harness list faults | head``): no
        # traceback, and nothing more written where no one reads. Python's
        # own advice: point stdout at /dev/null so the exit flush is quiet.
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _interrupted(exc: Interrupted) -> int:
    name = signal.Signals(exc.signum).name
    kept = exc.report
    where = f"; partial report in {kept.folder}" if kept is not None and kept.folder else ""
    print(f"harness: {name}: stopped, workers killed, cleaned up{where}", file=sys.stderr)
    return exit_code(exc.signum)


def _escaped(exc: BaseException, argv: list[str] | None) -> int:
    """The exit code for ``exc``, a ``BaseException`` that no command
    turned into its result: the user's interruption (130), else 2 with
    where it was raised (the adapter boundary names adapter code itself,
    see ``harness.adapters._guard``; this is the last line of defence)."""
    if isinstance(exc, KeyboardInterrupt):
        got = signal_received()
        if got is not None or not sigint_is_ours():
            return _interrupted(Interrupted(got or signal.SIGINT))
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    at = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    words = sys.argv[1:2] if argv is None else argv[:1]
    what = f"harness {words[0]}" if words else "harness"
    shown = f"SystemExit({exc.code!r})" if isinstance(exc, SystemExit) else type(exc).__name__
    print(
        f"harness: error: {shown} raised{at} ended `{what}` before it finished: nothing was "
        "judged to the end, so this is not a pass (exit 2); code the harness calls must raise "
        "an exception, not exit",
        file=sys.stderr,
    )
    return EXIT_USAGE


def _main(argv: list[str] | None, *, out: TextIO | None) -> int:
    out = out or sys.stdout
    parser = _parser()
    words = list(sys.argv[1:] if argv is None else argv)
    for each in (parser, *_subparsers(parser)):
        each.argv = words  # type: ignore[attr-defined]  # for "did you mean"
    try:
        ns = parser.parse_args(words)
    except SystemExit as exc:  # argparse already printed the usage error
        return EXIT_USAGE if exc.code else EXIT_OK
    try:
        if ns.command == "list":
            if ns.what == "properties":
                return _list_properties(ns, out)
            if ns.what == "bugs" and not ns.properties:
                return _list_bugs(ns, out)
            if ns.properties or ns.adapter:
                raise UsageError(
                    "--property and --adapter go with 'harness list properties' (--adapter "
                    f"also with 'harness list bugs'), not 'harness list {ns.what}'"
                )
            return _list(ns.what, out, ns.services)
        if ns.command == "init":
            from ._scaffold import next_steps, write_scaffold

            for path in write_scaffold(ns.dir, ns.shape, ns.app):
                print(f"harness: wrote {path}", file=out)
            for line in next_steps(ns.shape):
                print(f"harness: {line}", file=out)
            return EXIT_OK
        _check_before_imports(ns)
        from ._commands import check_adapter, merge, replay, report, run

        with handling_signals():
            if ns.command == "run":
                return run(ns, out)
            if ns.command == "check-adapter":
                return check_adapter(ns, out)
            if ns.command == "report":
                return report(ns.dir, out)
            if ns.command == "merge":
                return merge(ns, out)
            return replay(ns, out)
    except Interrupted as exc:
        name = signal.Signals(exc.signum).name
        kept = exc.report
        where = f"; partial report in {kept.folder}" if kept is not None and kept.folder else ""
        print(f"harness: {name}: stopped, workers killed, cleaned up{where}", file=sys.stderr)
        return exit_code(exc.signum)
    except AdapterError as exc:
        kind = "adapter error" if is_adapter_fault(exc) else "error"
        print(f"harness: {kind}: {exc}", file=sys.stderr)
        if exc.saved_to:
            print(f"harness: the adapter's traceback is in {exc.saved_to}", file=sys.stderr)
        elif exc.detail:
            last = exc.detail.strip().splitlines()
            print(
                f"harness: where: {' | '.join(line.strip() for line in last[-3:])}", file=sys.stderr
            )
        return EXIT_USAGE
    except UsageError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except HarnessError as exc:
        print(f"harness: internal error (please file a bug): {exc}", file=sys.stderr)
        return EXIT_USAGE


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    return [
        sp
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for sp in action.choices.values()
    ]


def _check_before_imports(ns: argparse.Namespace) -> None:
    """What the command line alone shows to be wrong, refused before the
    engine is imported (seconds on a loaded machine): an adapter spec that
    cannot name an adapter, options for no adapter."""
    from .adapters._specs import check_spec

    spec = getattr(ns, "spec", None) or getattr(ns, "adapter", None)
    if spec is not None:
        check_spec(spec)
    if getattr(ns, "shard", None) is not None:
        ns.shard = _shard(ns.shard)
    if getattr(ns, "network_backend", None):
        # Through the environment: --jobs children and shards choose alike.
        os.environ["HARNESS_NETWORK_BACKEND"] = ns.network_backend
    elif os.environ.get("HARNESS_NETWORK_BACKEND", "").strip().lower() not in (
        "",
        "auto",
        "toxiproxy",
        "kernel",
    ):
        raise UsageError(
            f"HARNESS_NETWORK_BACKEND={os.environ['HARNESS_NETWORK_BACKEND']!r} is not auto, "
            "toxiproxy or kernel: set one of those (or --network-backend)"
        )
    _check_toxiproxy_url()
    if ns.command == "replay" and ns.adapter is None and ns.adapter_opt:
        raise UsageError(
            f"--adapter-opt {ns.adapter_opt[0]!r} without --adapter: the options go with the "
            "adapter you name; to replay against other options (your fix), name the adapter "
            "too: harness replay DIR --adapter NAME --adapter-opt KEY=VALUE (the folder's "
            "adapter and options are in its report.json)"
        )


def _check_toxiproxy_url() -> None:
    """A Toxiproxy server named in ``HARNESS_TOXIPROXY_URL`` answers, unless
    the kernel backend was asked for: every worker's connections would go
    through it, so a dead one is the user's to fix before the run starts."""
    import urllib.request

    url = os.environ.get("HARNESS_TOXIPROXY_URL", "").strip().rstrip("/")
    mode = os.environ.get("HARNESS_NETWORK_BACKEND", "").strip().lower()
    if not url or mode == "kernel":
        return
    api = url if "://" in url else f"http://{url}"
    try:
        with urllib.request.urlopen(f"{api}/version", timeout=5):
            return
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"HARNESS_TOXIPROXY_URL={url!r} does not answer ({exc}): start the Toxiproxy "
            "server there (its HTTP API, port 8474 by default), point the variable at the one "
            "you run, or unset it (or --network-backend kernel)"
        ) from exc


def _list(what: str, out: TextIO, services: Path | None = None) -> int:
    if what == "adapters":
        _list_adapters(out)
    elif what == "faults":
        from .vocabulary import FAULT_FAMILIES

        for fam in FAULT_FAMILIES:
            doc = fam.doc
            if fam.name == "network":
                doc = f"{doc[:-1]}; here: {_network_backend()})"
            print(f"{fam.name:14} {doc}", file=out)
    elif what == "services":
        code = _list_services(out, services)
        print(f"network faults run on: {_network_backend()}", file=out)
        return code
    return EXIT_OK


def _list_bugs(ns: argparse.Namespace, out: TextIO) -> int:
    """``harness list bugs [--adapter NAME]``: what the adapter's optional
    ``seeded_bugs()`` hook says (the reference adapter's by default)."""
    from .adapters._guard import call
    from .adapters._loading import load_adapter, parse_opts

    spec = ns.adapter or "reference"
    adapter = load_adapter(spec, parse_opts(ns.adapter_opt))
    hook = getattr(adapter, "seeded_bugs", None)
    if hook is None:
        print(f"adapter {spec} has no seeded bugs (it defines no seeded_bugs() hook)", file=out)
        return EXIT_OK
    bugs = list(call(f"adapter {spec}: seeded_bugs()", hook))
    print(f"seeded bugs of {spec} (--adapter {spec} --adapter-opt bug=NAME):", file=out)
    for bug in bugs:
        print(f"{bug.name:28} breaks {bug.breaks:21} {bug.description}", file=out)
    return EXIT_OK


def _list_adapters(out: TextIO) -> None:
    """One line per installed adapter name (the ``harness.adapters`` entry
    points, read as metadata: nothing is imported), then your own."""
    from collections import Counter

    from .adapters._registry import BUILTIN, registered

    found = registered()
    twice = Counter(r.name for r in found)
    for r in found:
        if r.shipped is not None:
            about = r.shipped.options
            if r.name in BUILTIN:
                about = f"built in; {about}"
            elif r.shipped.extra:
                about = (
                    f"needs the {r.shipped.extra} extra: pip install "
                    f"'stateful-agent-harness[{r.shipped.extra}]'; {about}"
                )
        else:
            about = r.summary or "no summary"
        if twice[r.name] > 1:
            about += (
                f"; another package registers {r.name!r} too: --adapter {r.name} is refused, "
                "name the target"
            )
        print(f"{r.name:14} {r.target}  [{r.who}]  ({about})", file=out)
    print(
        f"{'any':14} package.module:attr  (your own, importable from PYTHONPATH; or register "
        'it by name under [project.entry-points."harness.adapters"]: see docs/adapters.md)',
        file=out,
    )


def _list_properties(ns: argparse.Namespace, out: TextIO) -> int:
    """``harness list properties``: the built-in ones, then the user's
    invariants: those named (``--property``), the adapter's (``--adapter``)
    and the installed ones (the ``harness.properties`` entry points)."""
    from ._properties import adapter_properties, resolve_properties
    from .checkers import BUILTIN

    def needs(p: Any) -> str:
        parts = [*p.needs, *([f"family {p.family}"] if p.family else [])]
        return f" (needs {', '.join(parts)})" if parts else ""

    for name, p in BUILTIN.items():
        print(f"{name:22} {p.summary}{needs(p)}", file=out)
    mine = resolve_properties(ns.properties, installed=False)
    hooked: tuple[Any, ...] = ()
    if ns.adapter is not None:
        from .adapters._loading import load_adapter, parse_opts

        hooked = adapter_properties(load_adapter(ns.adapter, parse_opts(ns.adapter_opt)))
    for p in resolve_properties([*mine, *hooked]):
        source = (
            "--property" if p in mine else f"adapter {ns.adapter}" if p in hooked else "installed"
        )
        print(f"{p.name:22} {p.summary}{needs(p)} [your invariant: {source}, {p.origin}]", file=out)
    return EXIT_OK


def _network_backend() -> str:
    """Which backend the network faults would run on here, and why."""
    from . import _toxiproxy

    try:
        return _toxiproxy.choose().describe()
    except ValueError as exc:
        return str(exc)


def _list_services(out: TextIO, file: Path | None) -> int:
    """The world's effect kinds: what ``WorkflowSpec.effects`` may name; with
    ``file`` (or ``$HARNESS_SERVICES_FILE``), the user's declared ones too."""
    from .world import WorldUsageError, declare_services, load_services, service_catalogue

    if file is None and os.environ.get("HARNESS_SERVICES_FILE", "").strip():
        file = Path(os.environ["HARNESS_SERVICES_FILE"])
    declared: set[str] = set()
    if file is not None:
        try:
            declared = {s.name for s in declare_services(load_services(file))}
        except WorldUsageError as exc:
            print(f"harness: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    print(
        "effect kinds of the world's services (name them in WorkflowSpec.effects and "
        "Declarations.delivery):",
        file=out,
    )
    print(
        f"  {'kind':27} {'answers':10} {'idempotency keys':17} {'lookup':16} {'http':30} delivery",
        file=out,
    )
    for k in service_catalogue():
        caps = k.capabilities
        lookup = (
            "by key"
            if caps.lookup_by_key
            else "by business key"
            if caps.lookup_by_business_key
            else "none"
        )
        keys = "yes" if caps.idempotency_keys else "no (ignored)"
        where = f"{k.method} {k.path}"
        print(
            f"  {k.kind:27} {k.status:10} {keys:17} {lookup:16} {where:30} {k.delivery}",
            file=out,
        )
    if declared:
        print(f"declared in {file}: {', '.join(sorted(declared))}", file=out)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
