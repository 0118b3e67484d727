"""An optional hook is found by name: a misspelled one is refused when the
adapter loads (its environment when it opens), naming the hook it resembles,
instead of being silently ignored; so is a hook of the wrong kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from examples.minimal_adapter.adapter import ToyAdapter, ToyEnvironment
from harness._errors import AdapterLoadError
from harness.adapters._guard import guard
from harness.adapters._loading import load_adapter, validate_adapter


class RollsBackMisspelt(ToyAdapter):
    rollsback = True


class DrainsAsText(ToyAdapter):
    drains = "yes"


class LeaseNotANumber(ToyAdapter):
    lease_seconds = "30"


class OwnHelpers(ToyAdapter):
    """Names of the adapter's own that resemble no hook closely enough, or
    one of another kind: a ``drain()`` method is not the ``drains`` flag."""

    close_all = None
    retry_budget = 3

    def submit_all(self) -> None: ...

    def drain(self) -> None: ...


def test_a_misspelled_adapter_hook_is_refused_with_the_name_meant() -> None:
    with pytest.raises(AdapterLoadError) as caught:
        validate_adapter(RollsBackMisspelt(), "mine:RollsBackMisspelt")
    assert "'rollsback' is not a hook the harness knows; did you mean 'rolls_back'?" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("adapter", "said"),
    [
        (DrainsAsText(), "drains is 'yes', not True or False"),
        (LeaseNotANumber(), "lease_seconds is '30', not a number of seconds"),
    ],
)
def test_a_hook_of_the_wrong_kind_is_refused(adapter: Any, said: str) -> None:
    with pytest.raises(AdapterLoadError, match=said):
        validate_adapter(adapter, "mine")


def test_the_adapters_own_names_and_the_shipped_adapters_pass() -> None:
    validate_adapter(OwnHelpers(), "mine")
    validate_adapter(ToyAdapter(), "examples.minimal_adapter.adapter:ToyAdapter")
    load_adapter("reference")


class TracesMisspelt(ToyEnvironment):
    def crash_points_trace(self) -> list[Any]:
        return []


class OpensMisspelt(ToyAdapter):
    def open(self, workdir: Path, *, seed: int) -> ToyEnvironment:
        return TracesMisspelt(workdir, keyed=True)


def test_a_misspelled_environment_hook_is_refused_when_it_opens(tmp_path: Path) -> None:
    adapter = guard(OpensMisspelt())
    with pytest.raises(AdapterLoadError, match="did you mean 'crash_point_trace'"):
        adapter.open(tmp_path, seed=0)
