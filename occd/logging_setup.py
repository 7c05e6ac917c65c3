"""Logging for occd: a rotating file log in the occd log dir always; stderr when interactive; plain lines
without timestamps when journald is collecting stderr (systemd sets INVOCATION_ID)."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys

from occd import paths


def setup(level: str = "INFO", *, quiet_stderr: bool = False) -> None:
    root = logging.getLogger("occd")
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    for h in list(root.handlers):
        root.removeHandler(h)
    try:
        d = paths.ensure_dir(paths.log_dir())
        fh = logging.handlers.RotatingFileHandler(d / "occd.log", maxBytes=5 * 1024 * 1024, backupCount=3,
                                                  encoding="utf-8")
        fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(fh)
    except OSError as e:
        print(f"Warning: cannot write the log file in {paths.log_dir()}: {e.strerror}", file=sys.stderr)
    if not quiet_stderr:
        sh = logging.StreamHandler(sys.stderr)
        if os.environ.get("INVOCATION_ID"):
            sh.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        else:
            sh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
        root.addHandler(sh)
    root.propagate = False
