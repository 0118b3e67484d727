"""The fork server process: preload once, then fork workers on request.

Run as ``python -m harness.procs._forkserver CONFIG_JSON`` by
:class:`harness.procs.ForkServer`, never by hand. It is single-threaded on
purpose: forking a process with threads can leave a lock held forever in the
child. It is the parent of every worker, so it alone reaps them
(``waitpid(-1, WUNTRACED | WCONTINUED | WNOHANG)`` on SIGCHLD) and reports each
stop, continue and exit to the harness over the socket (see ``_wire``). It
keeps a few *spares*, workers forked ahead while idle that wait on a pipe for
their assignment, so that a spawn does not wait for a fork. The harness sends
signals to the workers itself.

Cleanup is layered so that no worker outlives the harness:

1. ``shutdown`` request, SIGTERM or SIGHUP: SIGKILL every worker's process
   group and every adopted orphan, reap them, report, exit.
2. The harness dies: the socket reaches EOF and step 1 runs.
3. The server dies (even by SIGKILL): each worker has
   ``PR_SET_PDEATHSIG = SIGKILL`` pointing at the server.
4. The server itself has the same death signal pointing at the harness when
   the harness started it from its main thread (the signal is tied to the
   creating thread, so a short-lived thread would kill the server early).

The server is a child subreaper, so a worker's orphaned grandchildren are
re-parented to it and killed at shutdown; when a worker ends, whatever is left
in its process group is SIGKILLed too.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import importlib
import json
import math
import os
import select
import signal
import sys
import time
import traceback
from typing import Any, NoReturn

from harness.procs import _child
from harness.procs._wire import (
    PR_SET_CHILD_SUBREAPER,
    FrameReader,
    children_of,
    die_with_parent,
    encode,
    prctl,
)

_SHUTDOWN_GRACE = 5.0
#: While a spare is left, the pool is refilled this many seconds after the
#: spawn that took one (the fork takes 1-3 ms, more on a loaded machine, and
#: the server answers nothing meanwhile): a spawn that follows at once is
#: answered first.
_REFILL_DELAY = 0.005


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


class _Server:
    def __init__(self, sock: int, pool_size: int) -> None:
        self.sock = sock
        self.pid = os.getpid()
        self.live: set[int] = set()
        # Pre-forked workers waiting for a spawn: pid -> write end of the pipe
        # that carries their assignment. Oldest first.
        self.spares: dict[int, int] = {}
        self.pool_size = pool_size
        #: when to refill the pool while a spare is left (monotonic seconds)
        self.refill_at = 0.0
        self.targets: dict[str, _child.Target] = {}
        self.reader = FrameReader()
        self.out = bytearray()
        self.harness_gone = False
        self.stopping = False
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        os.set_blocking(sock, False)

    # -- output ------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        if not self.harness_gone:
            self.out += encode(message)
            self.flush()

    def flush(self) -> None:
        # Non-blocking: a harness that is not reading must never stop the
        # server from reaping and forking; the rest waits for POLLOUT.
        while self.out:
            try:
                sent = os.write(self.sock, self.out)
            except BlockingIOError:
                return
            except OSError:
                self.harness_gone = True
                self.out.clear()
                self.stopping = True
                return
            del self.out[:sent]

    # -- requests ----------------------------------------------------------

    def handle(self, message: dict[str, Any]) -> None:
        op = message["op"]
        if op == "spawn":
            self.spawn(message)
        elif op == "shutdown":
            self.stopping = True
        else:
            print(f"fork server: ignoring unknown request {op!r}", file=sys.stderr)

    def resolve(self, target: str) -> _child.Target:
        func = self.targets.get(target)
        if func is None:
            threads = _thread_count()
            func = _child.resolve(target)
            if _thread_count() > threads:
                raise RuntimeError(
                    f"importing {target} started a thread; forking a threaded process "
                    "is unsafe. Start threads inside the target function instead."
                )
            self.targets[target] = func
            # Spares forked before this import would import the module again,
            # each on its own: replace them with forks that already have it.
            self.retire_spares()
        return func

    def spawn(self, request: dict[str, Any]) -> None:
        rid = request["id"]
        try:
            for name in (request["target"], *request.get("configure", ())):
                self.resolve(name)
        except BaseException as exc:
            self.send({"op": "failed", "id": rid, "detail": _child.describe_failure(exc)})
            return
        if request["log"] is not None:
            # Opened here once so that a bad path fails the spawn, not the worker.
            try:
                os.close(os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
            except OSError as exc:
                self.send(
                    {"op": "failed", "id": rid, "errno": exc.errno, "detail": str(exc.strerror)}
                )
                return
        if not self.spares:
            self.fork_spare()
        pid = next(iter(self.spares))
        assignment = self.spares.pop(pid)
        # The spare reads until EOF; a blocking write is fine, it is waiting.
        data = json.dumps(request).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(assignment, view) :]
        os.close(assignment)
        self.live.add(pid)
        self.refill_at = time.monotonic() + _REFILL_DELAY
        self.send({"op": "spawned", "id": rid, "pid": pid})

    def fork_spare(self) -> None:
        """Fork a worker-to-be that waits for its assignment on a pipe.

        Forking ahead, while the harness is busy elsewhere, takes the fork
        (the most expensive step: copying the page tables of a process full of
        preloaded modules) off the path of ``spawn``.
        """
        read_end, write_end = os.pipe()
        # Park every object in the permanent generation: a collection in the
        # worker then never walks (and copies on write) the preloaded heap.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            self.become_worker(read_end)
        os.close(read_end)
        # The group is set from this side, before the pid is known to anyone,
        # so it exists whether or not the child has run yet.
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        self.spares[pid] = write_end

    def retire_spares(self) -> None:
        for pid, assignment in self.spares.items():
            os.close(assignment)  # EOF: the spare exits by itself
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self.spares.clear()

    def become_worker(self, assignment: int) -> NoReturn:
        status = _child.SETUP_FAILED_EXIT
        try:
            # No setpgid here: fork_spare sets the group before anyone knows
            # this pid. Every step a child takes costs copy-on-write faults.
            die_with_parent(self.pid)
            _child.reset_signals()
            # Raw fds only: the server holds no Python file objects whose
            # finalizers could later close a number the target has reused.
            # The other spares' pipes must go too, or their EOF never comes.
            for fd in (self.sock, self.wake_r, self.wake_w, *self.spares.values()):
                os.close(fd)
            chunks = []
            while chunk := os.read(assignment, 1 << 16):
                chunks.append(chunk)
            os.close(assignment)
            if not chunks:
                os._exit(0)  # retired, or the server is gone
            request = json.loads(b"".join(chunks))
            # Resolved by the server before it handed the spawn to a spare
            # (spares older than a target's import are retired): reuse that.
            func = self.targets.get(request["target"]) or _child.resolve(request["target"])
            if request["log"] is not None:
                log_fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                os.dup2(log_fd, 1)
                os.dup2(log_fd, 2)
                os.close(log_fd)
            if request["env"]:
                os.environ.update(request["env"])
            log_to = os.environ.get(_child.IMPORT_LOG_ENV)
            before = set(sys.modules) if log_to else set()
            cpu = time.process_time()
            hooks = [
                self.targets.get(name) or _child.resolve(name)
                for name in request.get("configure", ())
            ]
            status = _child.run(func, request["args"], hooks)
            if log_to:
                spent = time.process_time() - cpu
                _child.log_imports(log_to, request["target"], before, spent)
        except BaseException:
            traceback.print_exc()
        _child.finish(status)
        raise AssertionError("unreachable")  # finish() does not return

    # -- children ----------------------------------------------------------

    def reap(self) -> None:
        flags = os.WNOHANG | os.WUNTRACED | os.WCONTINUED
        while True:
            try:
                pid, status = os.waitpid(-1, flags)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid not in self.live:
                continue  # an adopted orphan: reaped, nobody to tell
            if os.WIFSTOPPED(status):
                self.send({"op": "stopped", "pid": pid, "sig": os.WSTOPSIG(status)})
            elif os.WIFCONTINUED(status):
                self.send({"op": "continued", "pid": pid})
            else:
                self.live.discard(pid)
                # The group id cannot be reused while members remain, and we
                # fork nothing in between, so this reaches only stragglers.
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                self.send({"op": "exit", "pid": pid, "status": os.waitstatus_to_exitcode(status)})

    def kill_everything(self) -> None:
        self.retire_spares()
        for pid in self.live:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(OSError):
                    kill(pid, signal.SIGKILL)
        for pid in children_of(self.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def shutdown(self) -> None:
        deadline = time.monotonic() + _SHUTDOWN_GRACE
        while True:
            self.kill_everything()
            self.reap()
            try:
                # Orphans may be re-parented to us while we work: loop until no
                # child at all is left. WNOWAIT: look, but leave exits to reap().
                os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break
            if time.monotonic() > deadline:
                print("fork server: children survived SIGKILL; giving up", file=sys.stderr)
                break
            time.sleep(0.002)
        self.send({"op": "bye"})
        deadline = time.monotonic() + _SHUTDOWN_GRACE
        poller = select.poll()
        poller.register(self.sock, select.POLLOUT)
        while self.out and not self.harness_gone and time.monotonic() < deadline:
            poller.poll(100)
            self.flush()

    # -- main loop ---------------------------------------------------------

    def serve(self, preload: list[str], warm: list[list[Any]]) -> int:
        # The harness decides when to stop. Started with SIGINT blocked (see
        # ForkServer.start), the server ignores it before unblocking it: a
        # Ctrl-C while it started is dropped, never a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # A mask inherited from a harness thread would be inherited by every worker.
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda signum, frame: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        if not self.preload(preload) or not self.warm_up(warm):
            return 1
        self.send({"op": "ready", "pid": self.pid})
        poller = select.poll()
        poller.register(self.wake_r, select.POLLIN)
        watching_out = False
        poller.register(self.sock, select.POLLIN)
        while not self.stopping:
            if bool(self.out) != watching_out:
                watching_out = bool(self.out)
                poller.modify(self.sock, select.POLLIN | (select.POLLOUT if watching_out else 0))
            # Requests and signals first; refill the pool only when idle: at
            # once when it is empty, else shortly after the last spawn, so
            # that a spawn that follows another (the workers of one scenario)
            # is not queued behind the refill's fork.
            if len(self.spares) >= self.pool_size:
                timeout = None
            elif self.spares:
                timeout = max(0, math.ceil((self.refill_at - time.monotonic()) * 1000))
            else:
                timeout = 0
            events = poller.poll(timeout)
            if not events:
                self.fork_spare()
                continue
            for fd, event in events:
                if fd == self.wake_r:
                    self.on_signals()
                    continue
                if event & select.POLLOUT:
                    self.flush()
                if event & (select.POLLIN | select.POLLHUP | select.POLLERR):
                    self.on_readable()
        self.shutdown()
        return 0

    def preload(self, modules: list[str]) -> bool:
        for entry in modules:
            module = entry
            try:
                if entry.startswith(_child.LIST_PREFIX):
                    # a list of modules one worker imported: each one that
                    # this installation lacks is skipped
                    for name in _child.listed_modules(entry):
                        with contextlib.suppress(Exception):
                            importlib.import_module(name)
                else:
                    importlib.import_module(module)
            except BaseException as exc:
                detail = _child.describe_failure(exc)
            else:
                if _thread_count() == 1:
                    continue
                detail = f"importing it started {_thread_count() - 1} thread(s); forking is unsafe"
            self.send({"op": "preload_failed", "module": module, "detail": detail})
            self.shutdown()
            return False
        return True

    def warm_up(self, calls: list[list[Any]]) -> bool:
        """Make each ``[target, args]`` call once (``ForkServer(warm=...)``)."""
        for target, args in calls:
            try:
                func = self.resolve(target)
                func(args)
            except BaseException as exc:
                detail = _child.describe_failure(exc)
            else:
                if _thread_count() == 1:
                    continue
                detail = f"calling it started {_thread_count() - 1} thread(s); forking is unsafe"
            self.send({"op": "preload_failed", "module": target, "detail": detail})
            self.shutdown()
            return False
        return True

    def on_signals(self) -> None:
        try:
            received = os.read(self.wake_r, 4096)
        except BlockingIOError:
            return
        if signal.SIGCHLD in received:
            self.reap()
        if signal.SIGTERM in received or signal.SIGHUP in received:
            self.stopping = True

    def on_readable(self) -> None:
        try:
            data = os.read(self.sock, 1 << 16)
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno not in (errno.ECONNRESET, errno.EPIPE):
                raise
            data = b""
        if not data:
            # The harness closed its end or died: nobody is left to report to.
            self.harness_gone = True
            self.stopping = True
            return
        for message in self.reader.feed(data):
            self.handle(message)


def main(argv: list[str]) -> int:
    """Run the server with the JSON config in ``argv[1]``; return its exit status."""
    config = json.loads(argv[1])
    if config["parent"] is not None:
        die_with_parent(config["parent"])
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    sys.path[:] = config["sys_path"]
    # Workers inherit the harness's environment as it was, not the server's tweaks.
    if config["pythonpath"] is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = config["pythonpath"]
    return _Server(config["fd"], config["pool_size"]).serve(config["preload"], config["warm"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
