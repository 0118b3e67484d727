"""Each fault family's scenarios, as its own module registers them: its
episode for the sampled search (:func:`episode_of`) and its targeted
schedules (:func:`category`, :func:`sweep`), each category with its place
in the plan.

The module of a family is the one its record names
(``FaultFamily.schedules``); :func:`load` imports every such module, in the
records' order, the first time the registries are read. Nothing here
depends on that order: episodes are read by family, categories by their
declared place (two categories cannot share one), so the plan and the
sampled stream are the same whichever module was imported first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from types import MappingProxyType
from typing import TypeVar

from hypothesis import strategies as st

from ...model import RunSpec, Scenario, Step
from ...vocabulary import FAMILIES, FAMILY, FAULT_FAMILIES
from .._universe import Universe
from ._common import _Aim
from ._swarm import Swarm

#: An episode of one family: (draw, universe, the scenario's runs, its
#: episode number, its swarm) -> steps.
Episode = Callable[[st.DrawFn, Universe, tuple[RunSpec, ...], int, Swarm], list[Step]]
#: A category of targeted schedules: the aim -> its schedules, in order.
Schedules = Callable[[_Aim], list[Scenario]]

_E = TypeVar("_E", bound=Episode)
_S = TypeVar("_S", bound=Schedules)


@dataclass(frozen=True)
class FamilyEpisode:
    """A family's episode for the sampled search."""

    family: str
    draw: Episode
    #: the kinds a universe can arm (default: all the record's variants): a
    #: swarm picks its subset among these
    offered: Callable[[Universe], tuple[str, ...]] | None = None
    #: step types only this family's episodes and schedules make: how a
    #: scenario's steps are told to hold one (for ``once_per_scenario``)
    marks: tuple[type, ...] = ()


@dataclass(frozen=True)
class Category:
    """A category of targeted schedules (one kind of aimed fault, or a
    bounded sweep): ``schedules(aim)``, and its ``place`` in the plan's
    round (categories run lowest place first; sweeps share the round's
    last places among themselves, in their own order)."""

    family: str
    place: int
    schedules: Schedules
    sweep: bool = False

    @property
    def name(self) -> str:
        return self.schedules.__name__.lstrip("_")


_episodes: dict[str, FamilyEpisode] = {}
_categories: dict[tuple[bool, int], Category] = {}
_loaded: list[str] = []


def _family(family: str, what: str) -> None:
    if family not in FAMILY:
        raise ValueError(f"{what} of an unknown fault family {family!r} (known: {FAMILIES})")


def episode_of(
    family: str,
    *,
    offered: Callable[[Universe], tuple[str, ...]] | None = None,
    marks: tuple[type, ...] = (),
) -> Callable[[_E], _E]:
    """Register the decorated function as ``family``'s episode (one per family)."""
    _family(family, "an episode")

    def register(fn: _E) -> _E:
        if family in _episodes:
            held = _episodes[family].draw
            raise RuntimeError(
                f"fault family {family!r} already has an episode "
                f"({held.__module__}.{held.__qualname__})"
            )
        _episodes[family] = FamilyEpisode(family, fn, offered, marks)
        return fn

    return register


def _category(family: str, place: int, sweep: bool) -> Callable[[_S], _S]:
    _family(family, "targeted schedules")

    def register(fn: _S) -> _S:
        held = _categories.get((sweep, place))
        if held is not None:
            raise RuntimeError(
                f"{fn.__module__}.{fn.__qualname__} asks for place {place} in the plan, "
                f"which {held.schedules.__module__}.{held.schedules.__qualname__} holds"
            )
        _categories[(sweep, place)] = Category(family, place, fn, sweep)
        return fn

    return register


def category(family: str, *, place: int) -> Callable[[_S], _S]:
    """Register the decorated function as a category of ``family``'s
    targeted schedules at ``place`` in each breadth-first round."""
    return _category(family, place, sweep=False)


def sweep(family: str, *, place: int) -> Callable[[_S], _S]:
    """Register the decorated function as one of ``family``'s bounded
    systematic sweeps, at ``place`` among the sweeps."""
    return _category(family, place, sweep=True)


def load() -> None:
    """Import every family's module (the records' ``schedules``), once, in
    the records' order: each registers its episode and categories."""
    for module in dict.fromkeys(f.schedules for f in FAULT_FAMILIES):
        if module not in _loaded:
            import_module(f"{__package__}.{module}")
            _loaded.append(module)


def episodes() -> Mapping[str, FamilyEpisode]:
    """Every family's episode, in the records' order."""
    load()
    return MappingProxyType({f: _episodes[f] for f in FAMILIES if f in _episodes})


def categories(*, sweeps: bool = False) -> list[Category]:
    """The aimed categories (or the sweeps), in their places' order."""
    load()
    return [c for (s, _), c in sorted(_categories.items()) if s is sweeps]
