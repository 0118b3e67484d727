"""The test tree's own rule: ``tests/`` holds no packages, so pytest imports
each test module by its basename, and two modules of one name in different
folders stop the whole collection ("import file mismatch")."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_test_module_has_a_basename_of_its_own() -> None:
    names = Counter(
        p.name
        for p in TESTS.rglob("*.py")
        if p.name != "conftest.py" and "__pycache__" not in p.parts
    )
    clashes = sorted(name for name, n in names.items() if n > 1)
    assert clashes == [], f"rename one of each: {clashes}"
