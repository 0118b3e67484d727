"""The kernel backend of network faults: netfilter rules on one connection.

A rule names one TCP connection by its two ports (the worker's own source
port and the server's port) and, where known, its two addresses, so that
only that connection's packets are touched -- not the worker's other
connections, not another worker's, not the harness's own. Two kinds:

``drop_to_client``
    ``INPUT -p tcp -s SERVER --sport SPORT -d CLIENT --dport CPORT -j DROP``:
    what the server sends to that connection is lost (on loopback, packets
    pass INPUT too). A COMMIT sent after it is armed reaches the server,
    which commits; its reply never arrives: a lost acknowledgement.
``reset_to_server``
    ``OUTPUT ... -j REJECT --reject-with tcp-reset``: the connection's next
    packet to the server is refused and the worker gets a TCP reset.
``drop_to_server``
    ``OUTPUT ... -j DROP``: what the worker sends on that connection is
    lost. With ``drop_to_client`` on the same connection: a partition, both
    directions silent, no reset either way.

Rules go away at the end of the step that armed them (the nemesis removes
them in a ``finally``, shielded from an interruption) and at exit; otherwise
they die with their owner. Every rule's comment is ``sah-net:<token>``.
Before its first rule, the process that adds rules (:class:`Owner`) starts a
*reaper*: a small process in a session of its own (a Ctrl-C to the harness's
process group does not reach it, and it ignores SIGINT, SIGHUP and SIGTERM)
that reads a pipe whose write end only the owner holds -- and each
``iptables`` the owner runs to add a rule, for as long as it runs. When the
pipe closes, the owner is gone, however it died (a SIGKILL, the OOM killer),
and no rule of its is on its way in: the reaper deletes every rule tagged
with that token and exits. At a normal exit the owner removes its rules,
closes the pipe and waits for the reaper to end. Measured: a harness
SIGKILLed mid-partition, its rules are gone 0.10 to 0.11 s later (median
of 5, two series; ``benchmarks/rules_after_kill.py``).

The owner also holds the abstract Unix socket ``@sah-net-owner:<token>``
bound for as long as it lives: the kernel frees it when the process dies, and
abstract sockets live in the network namespace -- the very scope of the
rules. :func:`sweep_rules` (the backstop, should the reaper itself have been
killed) deletes a tagged rule only when it can bind its owner's socket.

A reset also aborts the server's end of the connection (``ss -K``, see
:func:`reset_server_end`), as a real reset does.

Without ``iptables`` and ``ss``, or without the right to use them (not
root), :func:`unavailable` says why, and the family is reported *not
tested*.
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ._signals import shielded

#: every harness rule's comment starts with this; the owner token follows
COMMENT_PREFIX = "sah-net:"
#: the abstract socket an owner binds, followed by its token
LOCK_PREFIX = "sah-net-owner:"
#: seconds iptables waits for the xtables lock (``-w``): other helpers' runs
#: add and remove rules at the same time
XTABLES_WAIT = "10"
#: the commands, IPv4 then IPv6
BINARIES = ("iptables", "ip6tables")

RuleKind = Literal["drop_to_client", "reset_to_server", "drop_to_server"]


class NetfilterError(RuntimeError):
    """iptables refused a rule (the outside world: the kernel or its tools)."""


@dataclass(frozen=True)
class Rule:
    """One rule on one connection: the worker at ``client_host:client_port``
    talking to ``server_host:server_port``."""

    kind: RuleKind
    client_port: int
    server_port: int
    client_host: str = "127.0.0.1"
    server_host: str = "127.0.0.1"

    @property
    def binary(self) -> str:
        ipv6 = ipaddress.ip_address(self.server_host).version == 6
        return BINARIES[1] if ipv6 else BINARIES[0]

    def spec(self, token: str) -> list[str]:
        """The rule's chain and match, as ``iptables -A`` / ``-D`` take them."""
        comment = ["-m", "comment", "--comment", f"{COMMENT_PREFIX}{token}"]
        if self.kind == "drop_to_client":
            return [
                "INPUT",
                "-p",
                "tcp",
                "-s",
                self.server_host,
                "--sport",
                str(self.server_port),
                "-d",
                self.client_host,
                "--dport",
                str(self.client_port),
                *comment,
                "-j",
                "DROP",
            ]
        return [
            "OUTPUT",
            "-p",
            "tcp",
            "-s",
            self.client_host,
            "--sport",
            str(self.client_port),
            "-d",
            self.server_host,
            "--dport",
            str(self.server_port),
            *comment,
            "-j",
            *(
                ("DROP",)
                if self.kind == "drop_to_server"
                else ("REJECT", "--reject-with", "tcp-reset")
            ),
        ]


def _iptables(
    binary: str, *args: str, pass_fds: tuple[int, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary, "-w", XTABLES_WAIT, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        pass_fds=pass_fds,
    )


_unavailable: dict[str, str | None] = {}


def unavailable() -> str | None:
    """Why netfilter rules cannot be used here, or None if they can.

    Asked of ``iptables`` on the current ``PATH`` (once per process and
    ``PATH``): missing, or refusing to list the filter table (not root, no
    ``CAP_NET_ADMIN``, no netfilter in the kernel)."""
    path = os.environ.get("PATH", "")
    if path in _unavailable:
        return _unavailable[path]
    reason: str | None = None
    missing = [tool for tool in ("iptables", "ss") if shutil.which(tool) is None]
    if missing:
        reason = (
            f"{' and '.join(missing)} not installed (or not on PATH); install them "
            "(apt-get install -y iptables iproute2) and run the harness as root"
        )
    else:
        try:
            got = _iptables("iptables", "-S", "INPUT")
        except (OSError, subprocess.SubprocessError) as exc:
            reason = f"iptables could not be run ({type(exc).__name__}: {exc})"
        else:
            if got.returncode != 0:
                said = " ".join(got.stderr.split())[:200] or f"exit {got.returncode}"
                reason = f"iptables refused to list rules ({said}); the harness must run as root"
    _unavailable[path] = reason
    return reason


_latency: list[str] = []
#: what :func:`latency_unavailable` asks of ``tc`` in its throwaway namespace
NETEM_PROBE = ("tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")


def latency_unavailable() -> str:
    """Why this backend cannot delay one worker's packets (the ``latency``
    kind): netfilter drops, rejects and queues packets but never holds them
    back; that takes the ``netem`` queueing discipline, asked here in a
    throwaway network namespace (never on the host's own interfaces). Even
    where the kernel has it, a per-connection delay is not built."""
    if _latency:
        return _latency[0]
    said = "not asked"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        said = "ip and tc (iproute2) are not installed"
    else:
        ns = f"sah-probe-{secrets.token_hex(4)}"
        try:
            made = subprocess.run(
                ["ip", "netns", "add", ns], capture_output=True, text=True, check=False, timeout=30
            )
            if made.returncode != 0:
                said = f"ip netns add refused: {' '.join(made.stderr.split())[:200]}"
            else:
                got = subprocess.run(
                    ["ip", "netns", "exec", ns, *NETEM_PROBE],
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=30,
                )
                said = (
                    "the kernel has netem"
                    if got.returncode == 0
                    else f"tc netem: {' '.join(got.stderr.split())[:200]}"
                )
        except (OSError, subprocess.SubprocessError) as exc:
            said = f"{type(exc).__name__}: {exc}"
        finally:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False, timeout=30)
    reason = (
        "the kernel backend cannot delay one connection's packets: netfilter drops or "
        f"resets them but never holds them back, and a delay needs the netem qdisc ({said}); "
        "no latency fault is built on this backend"
    )
    _latency.append(reason)
    return reason


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
REAPER = Path(__file__).with_name("_reaper.py")
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


def _ss_host(host: str) -> str:
    return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host


def _ss_filter(local: tuple[str, int], peer: tuple[str, int]) -> list[str]:
    return [
        "src",
        _ss_host(local[0]),
        "sport",
        "=",
        f":{local[1]}",
        "dst",
        _ss_host(peer[0]),
        "dport",
        "=",
        f":{peer[1]}",
    ]


def socket_open(local: tuple[str, int], peer: tuple[str, int]) -> bool:
    """Whether a TCP socket of this host has ``local`` as its own end and
    ``peer`` as the other (in any state but closed)."""
    got = subprocess.run(
        ["ss", "-H", "-t", "-a", "-n", *_ss_filter(local, peer)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    return bool(got.stdout.strip())


def reset_server_end(server: tuple[str, int], client: tuple[str, int], wait: float = 30.0) -> bool:
    """Abort the server's end of one connection (``ss -K``, the kernel's
    ``SOCK_DESTROY``), which sends the client a reset, and wait until the
    server process has let go of it (so has its transaction and its locks).

    A reset only the client sees would leave the server's transaction open,
    holding row locks, for as long as the server's keepalives allow (two
    hours by default): that is a fault of its own, not this one. Returns
    whether the server's end was found."""
    got = subprocess.run(
        ["ss", "-K", "-H", "-t", "-n", *_ss_filter(server, client)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if got.returncode != 0:
        raise NetfilterError(f"ss -K refused: {' '.join(got.stderr.split())}")
    found = bool(got.stdout.strip())
    deadline = time.monotonic() + wait
    # The server process closes its socket once its session has ended (its
    # transaction rolled back, its locks released): a barrier, not a delay.
    while socket_open(server, client) and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


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
            if _owner is not None and rule.token == _owner.token:
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
