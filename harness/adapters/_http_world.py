"""A world served over HTTP to an app that reaches its services and its
model by URL, as an environment sets it up and as its workers use it.

An app tested as it is (no ``WorldClient`` in its code: ``docs/adapters.md``,
"Test your app as it is") needs the same few things from every adapter:
the environment's world served on a loopback port with a scripted model
behind its OpenAI-compatible endpoint, a run registry that knows each run's
tenant, and, in each worker, the variables the app reads pointed at that
port and every run's calls attributed to the run before the app's code
runs for it. :class:`HttpWorld` is the environment's side and
:class:`HttpWorldWorker` the worker's; the first hands the second what it
needs in the worker's spawn arguments (:attr:`HttpWorld.args`)::

    APP_ENV = {"PAYMENTS_API_URL": "{url}", "OPENAI_BASE_URL": "{url}/v1"}

    class MyEnvironment(BaseEnvironment):
        def __init__(self, workdir):
            self.http = HttpWorld(workdir, model=SCRIPT, env=APP_ENV)
            self.world, self.registry = self.http.world, self.http.registry
            self.args = {**self.http.args, ...}  # what the workers get

        def close(self):
            self.workers.close()  # first: no caller outlives the world
            self.http.close()

    def worker_main(args):
        worker = HttpWorldWorker(args)  # the app's variables are set here
        for run_id in open_runs():
            worker.attribute(run_id)  # the world records the run's calls as its
            app.handle(run_id)        # the app's code, unchanged
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..world import Caller, ModelSource, World, WorldClient, parse_chat_script
from .kit import EPOCH, RunRegistry

#: what an OpenAI client needs besides its base URL: a key, any key (the
#: world's model endpoint asks for none)
OPENAI_KEY = {"OPENAI_API_KEY": "not-needed-for-the-world"}


class HttpWorld:
    """One environment's world, served over HTTP, and its run registry.

    ``model``: a model script (``{"steps": [...]}``, checked by
    :func:`harness.world.parse_chat_script`) or any model source (a
    cassette) the world's model endpoint answers from; None for no model
    endpoint. ``env``: the environment variables the app reads, each value
    a template whose ``{url}`` is the world's base URL
    (``{"OPENAI_BASE_URL": "{url}/v1"}``); with a model, ``OPENAI_API_KEY``
    is set too unless ``env`` names it. Files go in ``workdir``
    (``world.db``, ``registry.db``); the clock is ``clock`` (default: the
    kit's constant :data:`~harness.adapters.kit.EPOCH`).
    """

    def __init__(
        self,
        workdir: Path,
        *,
        model: Mapping[str, Any] | ModelSource | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = lambda: EPOCH,
    ) -> None:
        source = parse_chat_script(model) if isinstance(model, Mapping) else model
        workdir.mkdir(parents=True, exist_ok=True)
        self.world = World(workdir / "world.db", clock=clock).create()
        try:
            self.face = self.world.serve_http(model=source)
        except BaseException:
            self.world.close()
            raise
        self.registry = RunRegistry(workdir / "registry.db", clock=clock)
        variables = {**(OPENAI_KEY if source is not None else {}), **(env or {})}
        #: what a worker needs (:class:`HttpWorldWorker`): add it to its spawn arguments
        self.args: dict[str, Any] = {
            "url": self.face.url,
            "world": self.world.path,
            "registry": str(workdir / "registry.db"),
            "env": variables,
        }

    def close(self) -> None:
        """Stop serving and close the registry and the world. Call it once
        the workers are dead: the server is left to stop in the background,
        as no caller is left to wait for."""
        self.face.close(wait=False)
        self.registry.close()
        self.world.close()


class HttpWorldWorker:
    """A worker's side of an :class:`HttpWorld`, made from its spawn
    arguments (``args``: :attr:`HttpWorld.args` and the ``worker_id``).
    Making it sets the app's environment variables, before the app builds
    its clients; :meth:`attribute` says which run the calls that follow
    are made for."""

    def __init__(self, args: Mapping[str, Any]) -> None:
        for name, template in args["env"].items():
            os.environ[name] = template.format(url=args["url"])
        self.worker_id: str = args["worker_id"]
        self.world = WorldClient(args["world"], clock=lambda: EPOCH)
        self.registry = RunRegistry(args["registry"])

    def attribute(self, run_id: str) -> None:
        """Record that this process calls for ``run_id`` from now on (its
        tenant as the registry knows it, ``unknown`` if it does not), so
        that the world counts each request it serves this process for that
        run."""
        run = self.registry.get(run_id)
        tenant = run.tenant if run is not None else "unknown"
        self.world.attribute(Caller(tenant=tenant, run_id=run_id, worker_id=self.worker_id))
