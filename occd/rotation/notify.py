"""Telling the person about a rotation: always a log line (the ledger event is recorded by the caller); a desktop
notification where one is available (notify-send, osascript); and the configured `notify_command`, which gets
a JSON summary on stdin. Never blocks for long, never fails the rotation."""

from __future__ import annotations

import json
import logging
import shlex
import shutil
import subprocess
import sys

log = logging.getLogger("occd.rotation")


def notify(settings, summary: dict, *, desktop: bool = True) -> list[str]:
    done = []
    text = (f"occd rotated {summary.get('sessionKey')}: {summary.get('oldSessionId', '')[:13]} → "
            f"{summary.get('newSessionId', '')[:13]} ({summary.get('reason', '')})")
    log.info("%s", text)
    if desktop:
        try:
            if sys.platform == "darwin" and shutil.which("osascript"):
                subprocess.run(["osascript", "-e", f"display notification {json.dumps(text)} with title \"occd\""],
                               timeout=5, capture_output=True)
                done.append("osascript")
            elif shutil.which("notify-send"):
                subprocess.run(["notify-send", "occd", text], timeout=5, capture_output=True)
                done.append("notify-send")
        except (OSError, subprocess.SubprocessError) as e:
            log.debug("desktop notification failed: %s", e)
    cmd = getattr(settings, "notify_command", None)
    if cmd:
        try:
            p = subprocess.run(shlex.split(cmd), input=json.dumps(summary), text=True, timeout=30, capture_output=True)
            if p.returncode != 0:
                log.warning("notify_command exited %s: %s", p.returncode, (p.stderr or "").strip()[:200])
            done.append("notify_command")
        except (OSError, subprocess.SubprocessError, ValueError) as e:
            log.warning("notify_command failed: %s", e)
    return done
