"""A content-addressed object store on local disk.

Artifacts are referenced from workflow state by URI (``cas://<sha256>``); the
bytes live under ``root/ab/cdef...``. Writes are atomic (temporary file, fsync,
rename), so a crash never leaves a torn object, and writing the same content
twice is a no-op -- which makes an artifact write idempotent under retries.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


class ArtifactStore:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest[2:]

    def put(self, data: bytes) -> tuple[str, str]:
        """Store ``data``; returns (uri, sha256)."""
        digest = hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        return f"cas://{digest}", digest

    def get(self, uri: str) -> bytes:
        if not uri.startswith("cas://"):
            raise ValueError(f"not an artifact URI: {uri!r} (expected cas://<sha256>)")
        return self._path(uri.removeprefix("cas://")).read_bytes()

    def delete(self, uri: str) -> bool:
        try:
            self._path(uri.removeprefix("cas://")).unlink()
        except FileNotFoundError:
            return False
        return True
