"""``compile_once`` (issue 33): an app whose build only compiles is compiled
once per process and each caller's checkpointer is bound to that graph; a
build that wraps its checkpointer, or an app that does not declare it, is
built anew for each caller, on the caller's checkpointer."""

from __future__ import annotations

import dataclasses
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from examples.langgraph_refund import naive
from harness.adapters.langgraph._worker import bound_graph


class Wrapped(InMemorySaver):
    """A checkpointer an app puts around the one it is given."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner


def test_a_compile_once_app_is_compiled_once_and_bound_to_each_callers_checkpointer() -> None:
    assert naive.APP.compile_once
    first, second = InMemorySaver(), InMemorySaver()
    a = bound_graph("test:compile-once", naive.APP, 2, first, None)
    b = bound_graph("test:compile-once", naive.APP, 2, second, None)
    assert a.checkpointer is first and b.checkpointer is second
    assert a.builder is b.builder  # one compilation, two bindings


def test_a_build_that_wraps_its_checkpointer_or_does_not_declare_it_is_built_each_time() -> None:
    def wrapping(checkpointer: Any, code_version: int) -> Any:
        return naive.build(Wrapped(checkpointer), code_version)

    apps = {
        "test:wrapping": dataclasses.replace(naive.APP, build=wrapping),
        "test:undeclared": dataclasses.replace(naive.APP, compile_once=False),
    }
    for spec, app in apps.items():
        first, second = InMemorySaver(), InMemorySaver()
        a = bound_graph(spec, app, 2, first, None)
        b = bound_graph(spec, app, 2, second, None)
        assert a.builder is not b.builder, spec
        if spec == "test:wrapping":
            assert a.checkpointer.inner is first and b.checkpointer.inner is second
        else:
            assert a.checkpointer is first and b.checkpointer is second
