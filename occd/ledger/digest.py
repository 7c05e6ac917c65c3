"""Size and sha256 of a file, read in chunks: recorded when occd makes a backup or an archive, compared by
`occd check`. `digest_with_prefix` also gives the hash of the first `prefix` bytes (an archive that only grew
at its end, by lines occd itself absorbed later, still holds the bytes it was made with)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

CHUNK = 1 << 20


def fingerprint(path: str | os.PathLike) -> tuple[int, str]:
    size, sha, _ = digest_with_prefix(path, None)
    return size, sha


def digest_with_prefix(path: str | os.PathLike, prefix: int | None) -> tuple[int, str, str | None]:
    """(size, sha256 of the whole file, sha256 of its first `prefix` bytes or None when the file is shorter)."""
    h = hashlib.sha256()
    size = 0
    pre = hashlib.sha256().hexdigest() if prefix == 0 else None
    with open(Path(path), "rb") as fh:
        while True:
            want = CHUNK
            if prefix is not None and pre is None and prefix - size < want:
                want = prefix - size
            b = fh.read(want)
            if not b:
                break
            h.update(b)
            size += len(b)
            if prefix is not None and pre is None and size == prefix:
                pre = h.copy().hexdigest()
    return size, h.hexdigest(), pre


def try_fingerprint(path) -> tuple[int | None, str | None]:
    """The fingerprint at creation time; (None, None) if the file cannot be read (the check records it later)."""
    try:
        return fingerprint(path)
    except OSError:
        return None, None
