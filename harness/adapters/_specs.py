"""Adapter specs as text: a spec's syntax (an installed adapter's name, or
``package.module:attr``), what a mistyped one probably meant, and the
``PYTHONPATH`` a printed command needs to import it again.

Import-light on purpose (the standard library only): ``harness`` checks a
spec here before it imports the engine, so a mistyped ``--adapter`` is
refused at once, with a suggestion, rather than after seconds of imports.
"""

from __future__ import annotations

import difflib
import importlib.machinery
import os
import re
import site
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from pathlib import Path

from .._errors import AdapterLoadError
from ._registry import BUILTIN, SHIPPED, Registered, lookup, registered

__all__ = ["BUILTIN", "SHIPPED", "check_spec", "pythonpath_for", "with_pythonpath"]

FORM = "'package.module:attr'"
EXAMPLE = "--adapter myproject.harness_adapter:MyAdapter"
_MODULE_ATTR = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def check_spec(spec: str) -> Registered | None:
    """Refuse (:class:`AdapterLoadError`, exit 2) a spec that cannot name an
    adapter, before anything is imported: not an installed adapter's name
    (the ``harness.adapters`` entry points, read as metadata) and not
    ``package.module:attr``, saying what was probably meant (a close
    installed name, the module a file path names). The registered adapter
    a name names, None for ``package.module:attr``."""
    module, sep, attr = spec.partition(":")
    if sep and _dotted(module) and attr.isidentifier():
        return None
    if _looks_like_a_file(spec):
        raise AdapterLoadError(_file_message(spec))
    found = None if sep else lookup(spec)
    if found is not None:
        return found
    names = list(dict.fromkeys(r.name for r in registered()))
    text = (
        f"adapter {spec!r} is neither an installed adapter ({', '.join(names)}) nor of the "
        f"form {FORM}"
    )
    hint = _suggestion(spec, names)
    raise AdapterLoadError(f"{text}; {hint}" if hint else f"{text}; example: {EXAMPLE}")


def _dotted(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def _suggestion(spec: str, names: list[str]) -> str:
    """``did you mean 'openai_agents'?``: the installed name ``spec`` is a
    spelling of (case, ``-`` for ``_``) or close to."""
    key = spec.strip().lower().replace("-", "_")
    same = [n for n in names if n.lower().replace("-", "_") == key]
    close = same or difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}? (harness list adapters shows them all)"
    return ""


def _looks_like_a_file(spec: str) -> bool:
    path = spec.split(":", 1)[0]
    return "/" in path or os.sep in path or path.endswith(".py")


def _file_message(spec: str) -> str:
    """Why a file path is not a spec, and the spec (and PYTHONPATH) to give.

    A path is not accepted: the spec is recorded in the report and imported
    again by every worker, job and replay, by module name, from wherever
    they run; a module imported from a path would be a second copy under
    another name, and the command printed for it would work from one folder
    only."""
    path_text, _, attr = spec.partition(":")
    path = Path(path_text)
    folder = path.parent
    module = path.stem if path.suffix == ".py" else path.name
    if not attr:
        attr = _adapter_class_in(path) or "MyAdapter"
    where = "." if str(folder) in ("", ".") else str(folder)
    good = f"{module}:{attr}" if module.isidentifier() else f"my_module:{attr}"
    return (
        f"adapter {spec!r} is a file path; an adapter is named as a module, {FORM}, "
        "imported from the folders on PYTHONPATH (every worker and replay imports it "
        f"again by that name): PYTHONPATH={where} harness run --adapter {good}"
    )


def _adapter_class_in(path: Path) -> str | None:
    """The first class whose name ends in ``Adapter`` that ``path`` defines
    (read as text, never imported), for the suggestion."""
    try:
        if not path.is_file() or path.stat().st_size > 1_000_000:
            return None
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = re.search(r"^class\s+(\w*Adapter)\b", text, re.MULTILINE)
    return found.group(1) if found else None


# -- the PYTHONPATH a printed command needs ---------------------------------


def pythonpath_for(spec: str, options: Mapping[str, str] | None = None) -> str | None:
    """The ``PYTHONPATH`` a fresh ``harness`` needs to import what ``spec``
    and its ``options`` name (a ``module:attr`` option value: an
    application), as this process imported it; None when a plain
    ``harness`` finds it all (installed, or built in).

    A module found only in a folder this process searches and a fresh one
    does not (given in ``PYTHONPATH``, the current folder of ``python -m``,
    a folder pytest or the harness put on ``sys.path``) needs that folder:
    ``.`` for the current one. Modules not imported here are not guessed."""
    roots: list[str] = []
    names = [v.partition(":")[0] for v in (options or {}).values() if _MODULE_ATTR.match(v)]
    if ":" in spec:
        names.insert(0, spec.partition(":")[0])
    elif spec not in BUILTIN:
        # an installed name: its module, and the folder its registration
        # was found in (a distribution's metadata on PYTHONPATH, say)
        try:
            found = lookup(spec)
        except AdapterLoadError:
            found = None
        if found is not None:
            names.insert(0, found.module)
            where = _registered_in(found)
            if where is not None:
                roots.append(where)
    for name in names:
        root = _needed_root(name)
        if root is not None and root not in roots:
            roots.append(root)
    return os.pathsep.join(_shown(r) for r in roots) if roots else None


def with_pythonpath(command: str, pythonpath: str | None) -> str:
    """``command`` prefixed with ``PYTHONPATH=...`` when one is needed."""
    if not pythonpath:
        return command
    import shlex

    return f"PYTHONPATH={shlex.quote(pythonpath)} {command}"


def _registered_in(found: Registered) -> str | None:
    """The folder a fresh interpreter needs to see the registration of
    ``found`` (its distribution's metadata, found here only in a folder of
    ``PYTHONPATH``, say); None when the standard folders hold it."""
    if not found.distribution or not found.location:
        return None
    from importlib.metadata import distributions

    if any(True for _ in distributions(name=found.distribution, path=_standard_entries())):
        return None
    return os.path.realpath(found.location)


def _needed_root(name: str) -> str | None:
    top = name.split(".", 1)[0]
    module = sys.modules.get(top)
    if module is None:
        return None
    locations: Iterable[str] = getattr(module, "__path__", None) or []
    if not locations and getattr(module, "__file__", None):
        locations = [str(Path(module.__file__).parent)]  # type: ignore[arg-type]
    else:
        locations = [str(Path(p).parent) for p in locations]
    found = [p for p in locations if p]
    if not found:
        return None
    root = os.path.realpath(found[0])
    standard = _standard_entries()
    if root in standard or _found_without(top, standard):
        return None
    return root


def _standard_entries() -> list[str]:
    """The folders a fresh interpreter of this Python searches: the standard
    library, the site folders, and what their ``.pth`` files add."""
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    sites = [*site.getsitepackages(), site.getusersitepackages()]
    dirs.update(sites)
    dirs.add(os.path.join(paths.get("stdlib", ""), "lib-dynload"))
    for folder in sites:
        try:
            pths = sorted(f for f in os.listdir(folder) if f.endswith(".pth"))
        except OSError:
            continue
        for pth in pths:
            try:
                with open(os.path.join(folder, pth), encoding="utf-8", errors="replace") as f:
                    lines = f.read(100_000).splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    dirs.add(os.path.join(folder, line))
    return [os.path.realpath(d) for d in dirs if d]


def _found_without(top: str, standard: list[str]) -> bool:
    """Whether a fresh interpreter finds the top-level module ``top``
    without extra folders: in a standard folder, or by an import hook (an
    editable install's finder)."""
    for finder in sys.meta_path:
        try:
            if finder is importlib.machinery.PathFinder:
                spec = importlib.machinery.PathFinder.find_spec(top, standard)
            else:
                find = getattr(finder, "find_spec", None)
                spec = find(top, None) if find is not None else None
        except Exception:  # a third party's hook: no answer is "not found"
            spec = None
        if spec is not None:
            return True
    return False


def _shown(root: str) -> str:
    """``root`` as a command shows it: ``.`` for the current folder, a
    relative path below it, else absolute."""
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:
        return root
    if root == cwd:
        return "."
    if root.startswith(cwd + os.sep):
        return os.path.relpath(root, cwd)
    return root
