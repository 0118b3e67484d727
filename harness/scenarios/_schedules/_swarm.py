"""What one sampled scenario may draw from: its :class:`Swarm` (Groce et
al., "Swarm Testing", ISSTA 2012), a subset of the enabled fault families,
each with a weight, and of each family's kinds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ...vocabulary import FAMILY_VARIANTS

#: Per family, the kinds a swarm picks a subset of (a family not listed has
#: one kind). The order is the shrink order: the first kind is the simplest.
#: From the families' records (``harness.vocabulary``).
FAMILY_KINDS = FAMILY_VARIANTS


@dataclass(frozen=True)
class Swarm:
    """The fault features one scenario may use: a subset of the universe's
    enabled families, each with a weight, and per family a subset of its
    kinds (:data:`FAMILY_KINDS`)."""

    families: tuple[str, ...]
    weights: tuple[int, ...] = ()
    kinds: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def kinds_of(self, family: str) -> tuple[str, ...]:
        """The kinds of ``family`` this swarm allows (every kind if unsaid)."""
        return self.kinds.get(family) or FAMILY_KINDS.get(family, ())

    def describe(self) -> str:
        """``crash, world[reject,kill_after_apply]``: the scenario's name."""
        parts = []
        for fam in self.families:
            kinds = self.kinds.get(fam)
            shown = f"[{','.join(kinds)}]" if kinds and kinds != FAMILY_KINDS.get(fam) else ""
            parts.append(fam + shown)
        return ", ".join(parts)
