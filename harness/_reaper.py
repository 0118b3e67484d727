"""The reaper of one owner's netfilter rules (see :mod:`harness._netfilter`).

Run as ``python -I -S harness/_reaper.py sah-net:<token> WAIT`` by
:class:`harness._netfilter.Owner`, never by hand, with its stdin the read end
of a pipe whose write end only the owner holds (and each ``iptables`` it runs
to add a rule, for as long as that runs). It reads until the pipe closes --
the owner is gone, however it died, and no rule of its is on its way in --
then deletes every rule whose comment is exactly that tag, and exits.

Standard library only, imported from nothing: it starts in milliseconds and
depends on nothing the harness's environment may have changed. It ignores
SIGINT, SIGHUP and SIGTERM: its owner decides when it ends.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys


def _delete_tagged(binary: str, tag: str, wait: str) -> None:
    try:
        got = subprocess.run(
            [binary, "-w", wait, "-S"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return  # no such tool (ip6tables), or it hung: nothing more to do here
    for line in got.stdout.splitlines():
        if tag not in line:
            continue
        try:
            words = shlex.split(line)
            ours = words[0] == "-A" and words[words.index("--comment") + 1] == tag
        except (ValueError, IndexError):
            continue
        if ours:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(
                    [binary, "-w", wait, "-D", *words[1:]],
                    capture_output=True,
                    timeout=60,
                    check=False,
                )


def main(argv: list[str]) -> None:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    tag, wait = argv
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    for binary in ("iptables", "ip6tables"):
        _delete_tagged(binary, tag, wait)


if __name__ == "__main__":
    main(sys.argv[1:])
