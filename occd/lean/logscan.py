"""OpenClaw's own log, read for the lean view's health: did OpenClaw degrade or quarantine the plugin's engine?
(for `occd doctor` and `occd lean status`; see occd.lean)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

PLUGIN_ID = "occd-lean"

# 2026.9.6: `[context-engine] Context engine "<id>" failed during <op>: <reason>; quarantining it for this process
# and falling back to default engine "legacy".` and, for a missing durable-turn contract, "degraded to legacy"
DEGRADED_RE = re.compile(r"degrad\w* to legacy|fall(?:s|ing)? back to (?:the )?(?:default engine|legacy)|"
                         r"legacy context path", re.I)
QUARANTINE_RE = re.compile(r"quarantining|quarantined", re.I)


def openclaw_log_files(env: Mapping[str, str] | None = None, max_files: int = 3) -> list[Path]:
    """OpenClaw's own log files, newest first (/tmp/openclaw/openclaw-*.log, or OPENCLAW_LOG_DIR)."""
    env = os.environ if env is None else env
    d = Path(env.get("OCCD_OPENCLAW_LOG_DIR") or "/tmp/openclaw")
    try:
        files = sorted(d.glob("openclaw*.log"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return []
    return files[:max_files]


def scan_log_lines(lines, since: float | None = None) -> dict:
    """Counts of the plugin's degradation and quarantine lines (those naming the plugin) in OpenClaw's log."""
    out = {"degraded": 0, "quarantined": 0, "last": None}
    for line in lines:
        if PLUGIN_ID not in line:
            continue
        kind = "quarantined" if QUARANTINE_RE.search(line) else "degraded" if DEGRADED_RE.search(line) else None
        if kind:
            out[kind] += 1
            out["last"] = line.strip()[:300]
    return out


def open_log(f: Path):
    """An OpenClaw log file, opened without blocking (a FIFO named like one is refused), as text."""
    import io

    from occd.transcript.scan import open_transcript

    return io.TextIOWrapper(open_transcript(f), errors="replace")
