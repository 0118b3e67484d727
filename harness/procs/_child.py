"""What runs inside a worker: resolving a target and running it like a process.

Shared by the fork server (after ``fork``) and by :class:`DirectSpawner`, which
runs :func:`main` in a fresh interpreter, so that
both give a target the same life: called with its args dict, its return value
or exception turned into an exit status, stdio flushed, ``os._exit``.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, cast

from harness.procs._wire import die_with_parent

Target = Callable[[dict[str, Any]], object]

# Exit status of a worker whose setup (not its target) failed: distinct from 1
# (the target raised) so that a harness bug does not pass for a runtime crash.
SETUP_FAILED_EXIT = 70
#: Where a forked worker appends the modules it imported after the fork (one
#: JSON line each: its target, the modules, its CPU seconds), when this
#: variable names a file in the fork server's environment
#: (``harness check-adapter`` sets it).
IMPORT_LOG_ENV = "HARNESS_IMPORT_LOG"
#: A preload entry that starts with this names a JSON file holding a list of
#: modules to import (each skipped if it fails: another release of a
#: framework may lack some), e.g. what ``check-adapter --preload-out`` wrote.
LIST_PREFIX = "@"


def log_imports(path: str, target: str, before: set[str], cpu: float) -> None:
    """Append to ``path`` the modules this worker imported since ``before``
    (one ``O_APPEND`` write: lines of concurrent workers never interleave)."""
    loaded = list(sys.modules.items())
    new = sorted(name for name, mod in loaded if mod is not None and name not in before)
    line = json.dumps({"target": target, "modules": new, "cpu": round(cpu, 4)}) + "\n"
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def listed_modules(entry: str) -> list[str]:
    """The modules a preload ``entry`` names: itself, or (``@FILE``) the JSON
    list in that file."""
    if not entry.startswith(LIST_PREFIX):
        return [entry]
    with open(entry[len(LIST_PREFIX) :], encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, list) or not all(isinstance(m, str) for m in data):
        raise ValueError(f"{entry[len(LIST_PREFIX) :]} is not a JSON list of module names")
    return data


def target_format_problem(target: object) -> str | None:
    """Return why ``target`` is not a ``"package.module:function"`` string, or None."""
    if not isinstance(target, str):
        return f"a target must be a str, got {type(target).__name__}"
    module, sep, attr = target.partition(":")
    if not sep or not module.strip() or not attr.strip():
        return "a target must look like 'package.module:function'"
    return None


def resolve(target: str) -> Target:
    """Import the target's module and return its callable.

    Raises the original exception (ImportError, AttributeError, ...) or
    TypeError if the attribute is not callable.
    """
    module_name, _, attr = target.partition(":")
    try:
        obj: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name + ".").startswith(exc.name + "."):
            raise  # the module exists; something it imports does not
        raise ModuleNotFoundError(
            f"No module named {exc.name!r}: check the spelling of the target's module, and "
            "that its folder is on the harness's sys.path (PYTHONPATH)",
            name=exc.name,
        ) from None
    where = module_name
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AttributeError(
                f"{'module' if where == module_name else 'object'} {where!r} has no attribute "
                f"{part!r}{_did_you_mean(obj, part, target, attr)}"
            ) from None
        obj = getattr(obj, part)
        where = f"{where}:{part}" if where == module_name else f"{where}.{part}"
    if not callable(obj):
        raise TypeError(f"{target} is a {type(obj).__name__}, not a function")
    return obj


def _did_you_mean(obj: object, part: str, target: str, attr: str) -> str:
    """``; did you mean 'module:name'?`` for the callables of ``obj`` whose
    names are close to the missing ``part`` (empty when none is)."""
    names = [n for n in dir(obj) if not n.startswith("__") and callable(getattr(obj, n, None))]
    close = difflib.get_close_matches(part, names, n=1, cutoff=0.6)
    if not close:
        return ""
    head, _, _ = target.rpartition(":" + attr)
    fixed = attr.split(".")
    fixed[fixed.index(part)] = close[0]
    return f"; did you mean {head + ':' + '.'.join(fixed)!r}?"


def describe_failure(exc: BaseException) -> str:
    """The traceback of a failed :func:`resolve`, without the import machinery's frames.

    What remains points into the user's module (a syntax error, an exception
    raised at import time) or is just the final line ("No module named ...").
    """
    tb = traceback.TracebackException.from_exception(exc)
    tb.stack = traceback.StackSummary.from_list(
        [
            frame
            for frame in tb.stack
            if frame.filename not in (__file__, importlib.__file__)
            and not frame.filename.startswith("<frozen importlib")
        ]
    )
    return "".join(tb.format())


def reset_signals() -> None:
    """Undo the fork server's signal handling: give the worker the dispositions
    of a fresh Python process (the server has already cleared its signal mask)."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run(func: Target, args: dict[str, Any], hooks: Sequence[Target] = ()) -> int:
    """Call each of ``hooks`` (no arguments: the worker's configuration
    hooks, run after its environment is set), then ``func(args)``; return
    the exit status it stands for.

    An int result is the status; any other result is 0; ``SystemExit`` keeps
    its meaning; any other exception (a hook's too) prints its traceback to
    stderr and is 1.
    """
    try:
        for hook in hooks:
            cast("Callable[[], object]", hook)()
        result = func(args)
        status = result if isinstance(result, int) and not isinstance(result, bool) else 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            status = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            status = 1
    except BaseException:
        traceback.print_exc()
        status = 1
    return status & 0xFF


def finish(status: int) -> None:
    """Flush stdio and end the process now (atexit handlers do not run)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def main(argv: list[str]) -> None:
    """Entry point of a :class:`DirectSpawner` worker; never returns.

    ``argv[1]`` is a JSON spec: target, args, configure (hooks), sys_path,
    err_fd, and the parent pid when the worker should die with its parent. The outcome of resolving
    the target is written to ``err_fd`` (empty means success) before the target runs.
    """
    status = SETUP_FAILED_EXIT
    try:
        spec = json.loads(argv[1])
        if spec["parent"] is not None:
            die_with_parent(spec["parent"])
        sys.path[:] = spec["sys_path"]
        if spec["pythonpath"] is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = spec["pythonpath"]
        err_fd: int = spec["err_fd"]
        try:
            func = resolve(spec["target"])
            hooks = [resolve(name) for name in spec.get("configure", ())]
        except BaseException as exc:
            os.write(err_fd, describe_failure(exc).encode())
            finish(SETUP_FAILED_EXIT)
        os.close(err_fd)
        status = run(func, spec["args"], hooks)
    except BaseException:
        traceback.print_exc()
    finish(status)


if __name__ == "__main__":
    main(sys.argv)
