"""Atomic exchange of two paths (Linux renameat2 RENAME_EXCHANGE, macOS renamex_np RENAME_SWAP).

`os.replace` cannot tell what it replaced: a lock-less writer (OpenClaw 2026.7.x writes sessions.json that way)
can land between occd's last look and its rename, and that write is lost without a trace. An exchange swaps the
two names in one step, so the file that was displaced is still there to be inspected (and swapped back). Where
the platform or the filesystem cannot exchange, `exchange` returns False and the caller falls back to a
compare-then-rename.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import sys

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2   # linux/fs.h
_RENAME_SWAP = 2       # sys/stdio.h (macOS)
_fn = None
_unsupported = False


def _load():
    global _fn, _unsupported
    if _fn is not None or _unsupported:
        return _fn
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        if sys.platform.startswith("linux"):
            f = libc.renameat2
            f.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            _fn = lambda a, b: f(_AT_FDCWD, a, _AT_FDCWD, b, _RENAME_EXCHANGE)  # noqa: E731
        elif sys.platform == "darwin":
            f = libc.renamex_np
            f.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
            _fn = lambda a, b: f(a, b, _RENAME_SWAP)  # noqa: E731
        else:
            _unsupported = True
    except (OSError, AttributeError):
        _unsupported = True
    return _fn


def exchange(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap the names a and b atomically (both must exist, same filesystem). False when this platform or
    filesystem cannot (nothing changed then); OSError for any other failure."""
    global _unsupported
    fn = _load()
    if fn is None:
        return False
    if fn(os.fsencode(a), os.fsencode(b)) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        _unsupported = True
        return False
    raise OSError(err, os.strerror(err), os.fspath(a))
