"""``load_services`` accepts what has every ExternalServices method and names
what is missing otherwise."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from reference_runtime._errors import ConfigError
from reference_runtime._services import ExternalServices, load_services


class _Full:
    def capabilities(self, service: str) -> Any: ...

    def call(self, *a: Any, **k: Any) -> Any: ...

    def lookup(self, *a: Any, **k: Any) -> Any: ...

    def close(self) -> None: ...


class _NoLookup:
    def capabilities(self, service: str) -> Any: ...

    def call(self, *a: Any, **k: Any) -> Any: ...

    def close(self) -> None: ...


@pytest.fixture
def factories(monkeypatch: pytest.MonkeyPatch) -> str:
    module = types.ModuleType("services_factory_under_test")
    module.full = lambda arg: _Full()  # type: ignore[attr-defined]
    module.partial = lambda arg: _NoLookup()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module.__name__


def test_a_complete_services_object_is_accepted(factories: str) -> None:
    services = load_services(f"{factories}:full", None)
    assert isinstance(services, _Full)
    assert isinstance(services, ExternalServices)


def test_a_missing_method_is_named(factories: str) -> None:
    with pytest.raises(ConfigError, match=r"_NoLookup, which lacks lookup\(\)"):
        load_services(f"{factories}:partial", None)
