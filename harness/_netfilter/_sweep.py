"""Sweeping: the harness rules found in the kernel's tables, and those whose
owner is gone removed."""

from __future__ import annotations

import shlex
import shutil
import socket
from dataclasses import dataclass

from .._signals import shielded
from . import _ownership
from ._ownership import _try_lock
from ._probe import unavailable
from ._rules import (
    BINARIES,
    COMMENT_PREFIX,
    _iptables,
)


@dataclass(frozen=True)
class TaggedRule:
    """A harness rule found in the kernel's tables."""

    binary: str
    token: str
    #: the rule as ``iptables -S`` prints it, without its leading ``-A``
    spec: tuple[str, ...]


def tagged_rules() -> list[TaggedRule]:
    """Every rule a harness process tagged, in both address families (empty
    when iptables cannot be used)."""
    if unavailable() is not None:
        return []
    out: list[TaggedRule] = []
    for binary in BINARIES:
        if shutil.which(binary) is None:
            continue
        got = _iptables(binary, "-S")
        if got.returncode != 0:
            continue
        for line in got.stdout.splitlines():
            if COMMENT_PREFIX not in line:
                continue
            words = shlex.split(line)
            if len(words) < 2 or words[0] != "-A":
                continue
            try:
                comment = words[words.index("--comment") + 1]
            except (ValueError, IndexError):
                continue
            if comment.startswith(COMMENT_PREFIX):
                token = comment.removeprefix(COMMENT_PREFIX)
                out.append(TaggedRule(binary, token, tuple(words[1:])))
    return out


def sweep_rules() -> list[str]:
    """Delete the tagged rules no live harness process owns; returns them as
    ``iptables -S`` lines. An owner is dead when its lock can be taken: the
    lock is held for the deletion, so the token cannot come back meanwhile."""
    gone: list[str] = []
    locks: dict[str, socket.socket | None] = {}
    try:
        for rule in tagged_rules():
            if _ownership._owner is not None and rule.token == _ownership._owner.token:
                continue  # ours, and we are alive
            if rule.token not in locks:
                locks[rule.token] = _try_lock(rule.token)
            if locks[rule.token] is None:
                continue  # its owner is alive (here or in another PID namespace)
            with shielded():
                got = _iptables(rule.binary, "-D", *rule.spec)
            if got.returncode == 0:
                gone.append(shlex.join(["-A", *rule.spec]))
    finally:
        for lock in locks.values():
            if lock is not None:
                lock.close()
    return gone
