"""Shared fixtures: external services and the store backends.

Services come from :mod:`reference_runtime.service_urls`. A missing service
skips the tests that need it, with the reason, unless
``HARNESS_REQUIRE_SERVICES=1`` (CI), where it fails them instead.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reference_runtime import service_urls
from reference_runtime.store import Store

# pytester drives the pytest plugin end to end (tests/engine). pytest only
# accepts ``pytest_plugins`` in a top-level conftest, hence here.
pytest_plugins = ["pytester"]


def _service(resolve: Callable[[], str]) -> str:
    try:
        return resolve()
    except service_urls.ServiceUnavailable as exc:
        if service_urls.services_required():
            pytest.fail(f"{exc} (HARNESS_REQUIRE_SERVICES=1 forbids skipping)")
        pytest.skip(str(exc))


# -- pytest-xdist: the suite runs in parallel (-n auto --dist loadgroup) ----
#: A test that needs one of these fixtures is kept on one xdist worker with
#: every other test that needs it: they read or change state the whole machine
#: shares (the netfilter rules ``listed`` reads and the sweeps it checks), so
#: two of them at once would see each other's rules. A new test joins its group
#: by asking for the fixture; ``@pytest.mark.xdist_group("name")`` joins one by
#: hand.
#: ``user_objects`` (tests/hostile) makes and drops a user's schemas and keys
#: under fixed names in the shared Postgres and Redis: two tests on two
#: workers would drop each other's while the other checks them.
SERIAL_FIXTURES = {"listed": "netfilter", "user_objects": "shared-user-objects"}
#: Session fixtures that are costly to make (a server's start): on each
#: xdist worker that asks, so the tests that ask share one worker and it is
#: made once, as a module-scoped fixture's tests are (see _module_fixture).
#: ``prefect_api`` (tests/prefect): a Prefect server, about 18 s to start.
SHARED_SESSION_FIXTURES = {"prefect_api": "prefect-server"}


def _module_fixture(item: pytest.Item) -> str | None:
    """The test's module when the test uses a module-scoped fixture of its own
    module: those tests share an xdist worker, so each such fixture (a run or
    two, often) is made once, not once on each worker."""
    info = getattr(item, "_fixtureinfo", None)
    module = item.nodeid.split("::")[0]
    for name in getattr(item, "fixturenames", ()):
        defs = info.name2fixturedefs.get(name) if info is not None else None
        if defs and defs[-1].scope == "module" and defs[-1].baseid == module:
            return module
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for fixture, group in (SERIAL_FIXTURES | SHARED_SESSION_FIXTURES).items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
        if item.get_closest_marker("xdist_group") is None and (shared := _module_fixture(item)):
            item.add_marker(pytest.mark.xdist_group(shared))
    if hasattr(config, "workerinput"):
        # On xdist workers (each collects the same, in the same order): the
        # slow tests first, so that the last ones handed out are short and no
        # worker ends the session alone on a minutes-long run.
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _not_an_xdist_worker_below(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pytest, harness or worker process a test starts is not one of this
    session's xdist workers: without this it would inherit
    ``PYTEST_XDIST_WORKER`` and name its report folder after ours."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


# -- runs made once per session, xdist workers included -------------------------
#: ``made_once(name, make)``: see the fixture
MadeOnce = Callable[
    [str, Callable[[Path], subprocess.CompletedProcess[str]]],
    tuple[subprocess.CompletedProcess[str], Path],
]


@pytest.fixture(scope="session")
def made_once(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> MadeOnce:
    """``made_once(name, make)`` runs ``make(folder)`` once for the whole
    session, its xdist workers included, and gives every caller its result
    and folder: the first worker to ask makes it in the session's temp root,
    under a lock; the others wait for it and read the same folder (a run of
    the ci profile costs a minute; four workers made it four times). Read
    the folder; copy it to change it."""
    base = tmp_path_factory.getbasetemp()
    # xdist workers' temp roots are siblings under the session's own
    root = base.parent if hasattr(pytestconfig, "workerinput") else base

    def once(
        name: str, make: Callable[[Path], subprocess.CompletedProcess[str]]
    ) -> tuple[subprocess.CompletedProcess[str], Path]:
        folder, saved = root / name, root / f"{name}.proc.json"
        with open(root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not saved.exists():
                shutil.rmtree(folder, ignore_errors=True)  # a try that raised (timed out)
                folder.mkdir()
                proc = make(folder)
                done = [proc.args, proc.returncode, proc.stdout, proc.stderr]
                saved.write_text(json.dumps(done))
        args, code, out, err = json.loads(saved.read_text())
        return subprocess.CompletedProcess(args, code, out, err), folder

    return once


@pytest.fixture(scope="session")
def broken_ci_run(made_once: MadeOnce) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``harness run --adapter broken_runtime:BrokenAdapter --profile ci`` (it
    fails exactly_once_effects) and its folder, made once per session (xdist
    workers included): the engine's, the CLI's and the report's tests all
    read the same deterministic run. Read it; copy it to change it."""
    engine = str(Path(__file__).resolve().parent / "engine")
    if engine not in sys.path:
        sys.path.insert(0, engine)
    from engine_support import BROKEN, harness_cli

    def make(folder: Path) -> subprocess.CompletedProcess[str]:
        return harness_cli(
            "run", "--adapter", BROKEN, "--profile", "ci", "--report-dir", str(folder),
            cwd=folder,
        )  # fmt: skip

    return made_once("broken-ci-run", make)


# -- services ------------------------------------------------------------
@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of a PostgreSQL server (skips, or fails in CI, when there is none)."""
    return _service(service_urls.postgres_url)


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of a Redis server (skips, or fails in CI, when there is none)."""
    return _service(service_urls.redis_url)


@pytest.fixture
def toxiproxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Toxiproxy server the harness can use (HARNESS_TOXIPROXY_URL, or a
    binary it starts: skips, or fails in CI, when there is none), and the
    network faults run on it."""
    from harness import _toxiproxy

    source = _toxiproxy.server_source()
    if isinstance(source, str):
        if service_urls.services_required():
            pytest.fail(f"{source} (HARNESS_REQUIRE_SERVICES=1 forbids skipping)")
        pytest.skip(source)
    monkeypatch.setenv(_toxiproxy.ENV_BACKEND, "toxiproxy")


# -- stores --------------------------------------------------------------
@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    """A set-up SQLite store in a fresh file."""
    from reference_runtime.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "store.db")
    store.setup()
    yield store
    store.close()


@pytest.fixture
def postgres_store(postgres_url: str) -> Iterator[Store]:
    """A set-up Postgres store in a schema of its own, dropped afterwards."""
    from reference_runtime.store.postgres import PostgresStore

    store = PostgresStore(postgres_url, schema=f"test_{uuid.uuid4().hex[:16]}")
    store.setup()
    try:
        yield store
    finally:
        store.drop_schema()
        store.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest) -> Store:
    """Each backend in turn: the conformance suite runs once per backend."""
    backend: Store = request.getfixturevalue(f"{request.param}_store")
    return backend
