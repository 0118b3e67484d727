"""Netfilter rules: one worker connection's, tagged with their owner's token."""

from __future__ import annotations

import ipaddress
import subprocess
from dataclasses import dataclass
from typing import Literal

#: every harness rule's comment starts with this; the owner token follows
COMMENT_PREFIX = "sah-net:"
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
