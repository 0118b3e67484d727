"""Adapters by short name: the ``harness.adapters`` entry-point group.

``--adapter temporal`` names the adapter an installed distribution
registered under that name, in its ``pyproject.toml``::

    [project.entry-points."harness.adapters"]
    myruntime = "myproject.harness_adapter:MyAdapter"

This package registers the adapters it ships (:data:`SHIPPED`;
``pyproject.toml`` registers the same targets, and a test keeps the two
equal). A copy run from a source tree, never installed, has no metadata:
its shipped names still resolve, from :data:`SHIPPED`.

Reading the group reads metadata only: no adapter module is imported to
list or check a name, so a mistyped name is refused at once, with the
installed name it resembles. The target is imported when the adapter is
loaded (``harness.adapters._loading``). Standard library only, like
``_specs``: the command line checks a name here before it imports the
engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import EntryPoint, PackageMetadata, entry_points

from .._errors import AdapterLoadError

#: the entry-point group an installed distribution registers its adapters under
GROUP = "harness.adapters"

#: the distribution that ships the adapters of :data:`SHIPPED`
DISTRIBUTION = "stateful-agent-harness"


@dataclass(frozen=True)
class Shipped:
    """An adapter this package ships: its ``module:attr`` target, the extra
    its framework needs (``None``: none), and what its options are."""

    target: str
    extra: str | None
    options: str


#: The adapters this package ships, by short name. Each target takes its
#: options as keyword arguments of strings and parses them itself.
SHIPPED: dict[str, Shipped] = {
    "reference": Shipped(
        "harness.adapters.reference:from_options",
        None,
        "options: backend=sqlite|postgres, queue=store|redis, bug=NAME[,NAME] from "
        "harness list bugs; backend=postgres and queue=redis need the postgres,redis extras",
    ),
    "langgraph": Shipped(
        "harness.adapters.langgraph:LangGraphAdapter",
        "langgraph",
        "--adapter-opt app=package.module:APP (a LangGraphApp)",
    ),
    "openai_agents": Shipped(
        "harness.adapters.openai_agents:OpenAIAgentsAdapter",
        "openai-agents",
        "--adapter-opt app=package.module:APP (an AgentsApp)",
    ),
    "dbos": Shipped(
        "harness.adapters.dbos:DBOSAdapter",
        "dbos",
        "--adapter-opt app=package.module:APP (a DBOSApp)",
    ),
    "temporal": Shipped(
        "harness.adapters.temporal:TemporalAdapter",
        "temporal",
        "--adapter-opt app=package.module:APP (a TemporalApp)",
    ),
    "adk": Shipped(
        "harness.adapters.adk:ADKAdapter",
        "adk",
        "--adapter-opt app=package.module:APP (a resumable ADK App), "
        "workload=package.module:WORKLOAD (an ADKWorkload; default: the app's package's "
        "workload module), preload=true|false",
    ),
    "prefect": Shipped(
        "harness.adapters.prefect:PrefectAdapter",
        "prefect",
        "--adapter-opt app=package.module:APP (a Prefect flow), "
        "workload=package.module:WORKLOAD (a PrefectWorkload; default: the app's package's "
        "workload module), crash_detection=exit|heartbeat",
    ),
}

#: Built-in adapters by short name -> target. A report folder that names one
#: of these may be replayed without ``--trust-adapter``: its options are data
#: (a backend, a URL, a seeded bug), never code to import. The framework
#: adapters are not built in this sense: each names the user's application in
#: an option (``app=package.module:APP``, code), and a third party's options
#: mean what its adapter makes of them.
BUILTIN: dict[str, str] = {"reference": SHIPPED["reference"].target}


@dataclass(frozen=True)
class Registered:
    """One adapter name and what it loads, as the environment registers it."""

    name: str
    #: ``module:attr`` (``attr`` may be dotted, as entry points allow)
    target: str
    #: the distribution that registered it (``None``: this package's own
    #: table, in a copy that was not installed)
    distribution: str | None = None
    version: str | None = None
    summary: str | None = None
    #: the folder the distribution's metadata sits in
    location: str | None = None
    #: this package's record, for an adapter it ships
    shipped: Shipped | None = None

    @property
    def module(self) -> str:
        return self.target.partition(":")[0].strip()

    @property
    def attr(self) -> str:
        return self.target.partition(":")[2].strip()

    @property
    def who(self) -> str:
        """The distribution that registered it: ``stateful-agent-harness 0.1.0``."""
        if not self.distribution:
            return f"{DISTRIBUTION}, not installed"
        return f"{self.distribution} {self.version}" if self.version else self.distribution

    def describe(self) -> str:
        """``'temporal' (stateful-agent-harness 0.1.0:
        harness.adapters.temporal:TemporalAdapter)``."""
        return f"{self.name!r} ({self.who}: {self.target})"


def registered() -> list[Registered]:
    """Every adapter name the environment offers: this package's first (in
    :data:`SHIPPED` order), then the others by name. A name two
    distributions register is listed twice (:func:`lookup` refuses it)."""
    ours: dict[str, Registered] = {}
    others: list[Registered] = []
    for ep in entry_points(group=GROUP):
        found = _record(ep)
        if found.shipped is not None and found.name not in ours:
            ours[found.name] = found
        else:
            others.append(found)
    for name, shipped in SHIPPED.items():
        # not installed (a source tree), or installed before the group
        # existed: the shipped names resolve all the same
        ours.setdefault(name, Registered(name, shipped.target, shipped=shipped))
    first = [ours[name] for name in SHIPPED]
    return first + sorted(others, key=lambda r: (r.name, r.distribution or ""))


def _record(ep: EntryPoint) -> Registered:
    dist = ep.dist
    name = version = summary = location = None
    if dist is not None:
        meta = dist.metadata
        name, summary = _field(meta, "Name"), _field(meta, "Summary")
        version = dist.version
        try:
            location = str(dist.locate_file(""))
        except Exception:  # a custom finder's distribution: where is unknown
            location = None
    shipped = SHIPPED.get(ep.name)
    if not (name and _normal(name) == _normal(DISTRIBUTION)):
        shipped = None
    return Registered(
        name=ep.name,
        target=ep.value.replace(" ", ""),
        distribution=name,
        version=version,
        summary=summary,
        location=location,
        shipped=shipped,
    )


def _field(meta: PackageMetadata, key: str) -> str | None:
    values = meta.get_all(key)
    return str(values[0]) if values else None


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def lookup(name: str) -> Registered | None:
    """The adapter registered as ``name``, or None when no distribution
    registers it. Raises :class:`AdapterLoadError` when two do: which one
    ``--adapter NAME`` means is then not for the harness to guess."""
    found = [r for r in registered() if r.name == name]
    if len(found) > 1:
        raise AdapterLoadError(
            f"adapter name {name!r} is registered by more than one installed distribution: "
            + ", ".join(r.describe() for r in found)
            + "; name the one you mean as package.module:attr (harness list adapters shows "
            "them), or uninstall the other"
        )
    return found[0] if found else None


def extra_for(module: str) -> str | None:
    """The extra a shipped adapter in ``module`` needs, if any."""
    for shipped in SHIPPED.values():
        home = shipped.target.partition(":")[0]
        if shipped.extra and (module == home or module.startswith(home + ".")):
            return shipped.extra
    return None
