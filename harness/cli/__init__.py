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

One module a part: the parser (``_parser``), the checks made before the
engine is imported (``_checks``), ``harness list`` (``_lists``) and the exit
codes (``_exits``); here, :func:`main` and what an error prints.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TextIO

from .._errors import AdapterError, HarnessError, Interrupted, UsageError, is_adapter_fault
from .._signals import exit_code, handling_signals, sigint_is_ours, signal_received
from ._checks import _check_before_imports
from ._exits import (
    EXIT_BROKEN_PIPE,
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_USAGE,
)
from ._lists import list_command
from ._parser import RUN_EXAMPLES, _parser, _subparsers

# Import-light on purpose: what this package imports (its modules import the
# standard library only) runs before main() installs the SIGINT/SIGTERM
# handlers, where a Ctrl-C would print Python's KeyboardInterrupt traceback.
# The settings, the engine and the rest are imported inside main(), with the
# handlers in place.

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_CODES",
    "EXIT_FAILED",
    "EXIT_INCONCLUSIVE",
    "EXIT_OK",
    "EXIT_USAGE",
    "RUN_EXAMPLES",
    "main",
]


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
            return list_command(ns, out)
        if ns.command == "init":
            from .._scaffold import next_steps, write_scaffold

            for path in write_scaffold(ns.dir, ns.shape, ns.app):
                print(f"harness: wrote {path}", file=out)
            for line in next_steps(ns.shape):
                print(f"harness: {line}", file=out)
            return EXIT_OK
        _check_before_imports(ns)
        from .._commands import check_adapter, merge, replay, report, run

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
        return _interrupted(exc)
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
