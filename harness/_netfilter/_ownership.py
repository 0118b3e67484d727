"""The owner of this process's rules, and its reaper: a process that removes
them the moment the owner dies."""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shlex
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from .._signals import shielded
from ._rules import (
    COMMENT_PREFIX,
    XTABLES_WAIT,
    NetfilterError,
    Rule,
    _iptables,
)

#: the abstract socket an owner binds, followed by its token
LOCK_PREFIX = "sah-net-owner:"


def _lock_name(token: str) -> str:
    return f"\0{LOCK_PREFIX}{token}"


def _try_lock(token: str) -> socket.socket | None:
    """Bind the owner socket of ``token``: the bound socket (its owner is
    gone, or it is us taking it), or None if a live process holds it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.bind(_lock_name(token))
    except OSError:
        sock.close()
        return None
    return sock


#: The reaper (see the module docstring and the script itself), run with
#: ``python -I -S`` so that it imports nothing of the harness's environment.
REAPER = Path(__file__).parent.parent / "_reaper.py"
#: seconds a normal exit waits for the reaper to see the pipe close and end
REAPER_WAIT = 30.0


class _Reaper:
    """The reaper of one owner's rules: started before its first rule,
    ended by closing :attr:`pipe` (the owner's death closes it too)."""

    def __init__(self, token: str) -> None:
        read, self.pipe = os.pipe()  # neither end is inherited by exec'd children
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(REAPER), COMMENT_PREFIX + token, XTABLES_WAIT],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                # Out of the harness's process group and session: a Ctrl-C (a
                # SIGINT to the foreground group) or a killpg never reaches it.
                start_new_session=True,
            )
        except BaseException:
            os.close(self.pipe)
            raise
        finally:
            os.close(read)

    def close(self, wait: float = REAPER_WAIT) -> None:
        """Close the pipe: the reaper deletes what is left and ends; wait for it."""
        if self.pipe >= 0:
            os.close(self.pipe)
            self.pipe = -1
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(wait)

    def forget(self) -> None:
        """In a forked child: let go of the pipe (only the owner holds it)."""
        if self.pipe >= 0:
            with contextlib.suppress(OSError):
                os.close(self.pipe)
            self.pipe = -1


class Owner:
    """This process's rules, the reaper that removes them if it dies, and the
    lock that says they are in use.

    One per process (:func:`owner`); thread-safe. The lock is taken and the
    reaper started when the owner is made, before any rule exists: a sweeper
    never finds a rule of a live owner unlocked, and no rule is ever in force
    without a reaper watching its owner."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(8)
        self.pid = os.getpid()
        lock = _try_lock(self.token)
        if lock is None:  # 64 random bits taken: not in this universe
            raise NetfilterError(f"owner token {self.token} is already in use")
        self._lock_socket = lock
        try:
            self._reaper = _Reaper(self.token)
        except BaseException:
            lock.close()
            raise
        self._rules: list[Rule] = []
        self._mutex = threading.Lock()

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The rules this owner has added and not yet removed."""
        with self._mutex:
            return tuple(self._rules)

    @property
    def reaper_pid(self) -> int:
        return self._reaper.proc.pid

    def add(self, rule: Rule) -> None:
        """Insert ``rule`` first in its chain (before any ACCEPT the host has)."""
        spec = rule.spec(self.token)
        with shielded(), self._mutex:
            if self._reaper.pipe < 0:
                raise NetfilterError("this owner is closed: it adds no rule")
            # The iptables child holds the reaper's pipe too: should this
            # process die meanwhile, the reaper waits for the rule to be in
            # before it deletes it.
            got = _iptables(
                rule.binary, "-I", spec[0], "1", *spec[1:], pass_fds=(self._reaper.pipe,)
            )
            if got.returncode != 0:
                raise NetfilterError(
                    f"{rule.binary} refused {shlex.join(spec)}: {' '.join(got.stderr.split())}"
                )
            self._rules.append(rule)

    def remove(self, rule: Rule) -> None:
        """Delete ``rule`` (a no-op if it is not there any more)."""
        with shielded(), self._mutex:
            if rule in self._rules:
                self._rules.remove(rule)
            _iptables(rule.binary, "-D", *rule.spec(self.token))

    def remove_all(self) -> None:
        """Delete every rule this owner added."""
        for rule in self.rules:
            self.remove(rule)

    def close(self) -> None:
        """Delete every rule, end the reaper (which deletes whatever is left)
        and give the lock up (at exit)."""
        if os.getpid() != self.pid:
            return  # a forked child's copy: the parent's owner is not ours to end
        try:
            self.remove_all()
        finally:
            with self._mutex:
                self._reaper.close()
            self._lock_socket.close()

    def _forget(self) -> None:
        """In a forked child: drop the parent's pipe and lock."""
        self._reaper.forget()
        with contextlib.suppress(OSError):
            self._lock_socket.close()

    @contextlib.contextmanager
    def holding(self, *rules: Rule) -> Iterator[None]:
        """The rules in force for the length of a ``with`` block, removed on
        the way out whatever ends it (an error, an interruption)."""
        added: list[Rule] = []
        try:
            for rule in rules:
                self.add(rule)
                added.append(rule)
            yield
        finally:
            for rule in added:
                self.remove(rule)


_owner: Owner | None = None
_owner_mutex = threading.Lock()


def owner() -> Owner:
    """This process's :class:`Owner` (made on first use; its rules are
    removed at exit, and by its reaper if it dies)."""
    global _owner
    with _owner_mutex:
        if _owner is None or _owner.pid != os.getpid():
            _owner = Owner()
            atexit.register(_owner.close)
        return _owner


def _after_fork_in_child() -> None:
    """A child forked without exec (not by :mod:`subprocess`) must not keep
    the parent's reaper pipe open: the reaper would outlive the parent's
    death by the child's life. It makes an owner of its own if it needs one."""
    global _owner, _owner_mutex
    if _owner is not None:
        _owner._forget()
    _owner = None
    _owner_mutex = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_after_fork_in_child)
