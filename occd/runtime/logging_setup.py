"""Logging for occd (the daemon and the commands that run cycles).

- Always a rotating file log, `<log dir>/occd.log` (5 MB x 3), with timestamps.
- stderr: on a terminal, short lines with the time; under systemd (INVOCATION_ID or JOURNAL_STREAM set),
  plain lines with a `<N>` syslog priority prefix and no timestamp (journald adds its own and parses the
  prefix, so `journalctl -p warning --user -u occd` works); under launchd (whose plist sends stderr to a file
  beside the log) warnings and errors only; otherwise (a pipe, docker, a terminal) everything, with timestamps.
- APScheduler's own logger goes to the same places at WARNING (a missed run, an executor problem).
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys

from occd import paths

LOGGERS = ("occd", "apscheduler")
MAX_BYTES = 5 * 1024 * 1024
BACKUPS = 3

# sd-daemon(3) priorities
_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}


class JournalFormatter(logging.Formatter):
    """`<priority>name: message`; a traceback's lines are indented so they read as one entry's continuation."""

    def format(self, record: logging.LogRecord) -> str:
        prio = _PRIORITY.get(record.levelno, 6 if record.levelno < logging.WARNING else 3)
        text = super().format(record)
        return "\n".join(f"<{prio}>{line}" for line in text.splitlines() or [""])


class SafeFileHandler(logging.handlers.RotatingFileHandler):
    """The log file must never be a reason for occd to fail or to print a traceback: a write that fails (a full
    OCCD_HOME, a removed directory) is swallowed and the handler marks itself `degraded` (with the error), so
    `occd status`/doctor can say so; it recovers by itself once writes work again."""

    degraded: str | None = None

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        import sys as _sys

        e = _sys.exc_info()[1]
        self.degraded = (getattr(e, "strerror", None) or str(e) or type(e).__name__) if e else "write failed"

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        if self.degraded and self.stream is not None and not self.stream.closed:
            try:
                self.stream.flush()
                self.degraded = None
            except OSError:
                pass


def degraded() -> str | None:
    """Why occd's log file cannot be written right now, or None."""
    for h in logging.getLogger("occd").handlers:
        if isinstance(h, SafeFileHandler) and h.degraded:
            return h.degraded
    return None


def under_journald(env=None) -> bool:
    env = os.environ if env is None else env
    return bool(env.get("JOURNAL_STREAM") or env.get("INVOCATION_ID"))


def level_of(name: str | int | None) -> int:
    if isinstance(name, int):
        return name
    value = logging.getLevelName(str(name or "INFO").upper())
    return value if isinstance(value, int) else logging.INFO


def _redact(record: logging.LogRecord) -> bool:
    """Credentials in URLs never reach the log (occd.config.redact: the one redaction)."""
    from occd.config import redact

    msg = record.getMessage()
    clean = redact(msg)
    if clean != msg:
        record.msg, record.args = clean, None
    return True


def setup(level: str = "INFO", *, quiet_stderr: bool = False, env=None, stream=None) -> None:
    """(Re)configure occd's loggers; safe to call more than once (handlers are replaced, not added)."""
    env = os.environ if env is None else env
    stream = sys.stderr if stream is None else stream
    handlers: list[logging.Handler] = []
    try:
        d = paths.ensure_dir(paths.log_dir(env))
        fh = SafeFileHandler(d / "occd.log", maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8")
        fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        os.chmod(d / "occd.log", 0o600)  # occd's own file, whatever the umask
        handlers.append(fh)
    except OSError as e:
        print(f"Warning: cannot write the log file in {paths.log_dir(env)}: {e.strerror}", file=stream)
    if not quiet_stderr:
        sh = logging.StreamHandler(stream)
        if under_journald(env):
            sh.setFormatter(JournalFormatter("%(name)s: %(message)s"))
        elif getattr(stream, "isatty", lambda: False)():
            sh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
        else:
            sh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            if env.get("XPC_SERVICE_NAME", "0") not in ("0", ""):  # launchd: the log file has everything
                sh.setLevel(logging.WARNING)
        handlers.append(sh)
    for h in handlers:
        h.addFilter(_redact)
    for name in LOGGERS:
        lg = logging.getLogger(name)
        for h in list(lg.handlers):
            lg.removeHandler(h)
            h.close()
        for h in handlers:
            lg.addHandler(h)
        lg.propagate = False
    set_level(level)


def set_level(level: str | int) -> None:
    """Apply a log level (at start and on SIGHUP). APScheduler stays at WARNING unless occd is at DEBUG."""
    lvl = level_of(level)
    logging.getLogger("occd").setLevel(lvl)
    logging.getLogger("apscheduler").setLevel(lvl if lvl <= logging.DEBUG else logging.WARNING)
