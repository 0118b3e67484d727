"""Length-prefixed JSON frames: the fork server's protocol, and the OS helpers both ends share.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8
JSON encoding one object with an ``"op"`` key. The harness sends ``spawn`` and
``shutdown`` (it signals workers itself); the server answers ``ready`` / ``preload_failed``
once, ``spawned`` / ``failed`` per spawn (in request order), and reports
``stopped`` / ``continued`` / ``exit`` events per worker, then ``bye``. For
one pid, ``spawned`` always precedes its events and ``exit`` is its last.
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
from typing import Any

_HEADER = struct.Struct(">I")
# A frame this large is a corrupted stream, not a message: refuse it rather
# than try to allocate it.
MAX_FRAME = 64 * 1024 * 1024

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def encode(message: dict[str, Any]) -> bytes:
    """Return ``message`` as one frame (header and JSON body)."""
    body = json.dumps(message, separators=(",", ":")).encode()
    return _HEADER.pack(len(body)) + body


class FrameReader:
    """Reassembles frames from a byte stream fed in arbitrary chunks."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Add ``data`` and return every message that is now complete, in order.

        Raises ``ValueError`` if the stream is not a sequence of frames.
        """
        buffer = self._buffer
        buffer += data
        messages: list[dict[str, Any]] = []
        start = 0
        while len(buffer) - start >= _HEADER.size:
            (length,) = _HEADER.unpack_from(buffer, start)
            if length > MAX_FRAME:
                raise ValueError(f"frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
            end = start + _HEADER.size + length
            if end > len(buffer):
                break
            message = json.loads(buffer[start + _HEADER.size : end])
            if not isinstance(message, dict) or "op" not in message:
                raise ValueError(f"frame is not a message object: {message!r:.200}")
            messages.append(message)
            start = end
        del buffer[:start]
        return messages


_libc: ctypes.CDLL | None = None


def prctl(option: int, value: int) -> bool:
    """Call Linux ``prctl(option, value)``; return False where it is unavailable."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        return int(_libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        # Not Linux (or no prctl symbol): the pipe-EOF and atexit paths remain.
        return False


def die_with_parent(expected_parent: int) -> None:
    """Arrange SIGKILL for this process when its parent dies (Linux), and
    exit at once if the parent is already gone.

    The death signal fires when the *thread* that forked us exits, so callers
    only ask for it when that thread lives as long as its process (the main
    thread, or a single-threaded server).
    """
    import signal

    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # The parent may have died before prctl took effect; the signal would
    # then never come, so check by hand.
    if os.getppid() != expected_parent:
        os._exit(1)


def children_of(pid: int) -> list[int]:
    """Return the pids of the live children of ``pid`` (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        pass
    # Kernels without CONFIG_PROC_CHILDREN: scan every process's parent pid.
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # Field 4 (ppid) follows the parenthesised command, which may hold spaces.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            found.append(int(entry))
    return found
