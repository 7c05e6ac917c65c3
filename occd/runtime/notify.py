"""Talking to systemd: sd_notify (READY, STATUS, RELOADING, WATCHDOG, STOPPING) over NOTIFY_SOCKET when systemd
started us, a few lines of socket code and no dependency; the watchdog interval it asks for; and how long a stop
waits for the running step (OCCD_STOP_GRACE_S). Split out of occd/runtime/daemon.py (issue 25), unchanged."""

from __future__ import annotations

import logging
import os
import time

log = logging.getLogger("occd.daemon")

STOP_GRACE_S = 10.0


def stop_grace_seconds(env=None) -> float:
    """How long SIGTERM waits for the running step (OCCD_STOP_GRACE_S, default 10 s: below systemd's 90 s)."""
    env = os.environ if env is None else env
    try:
        v = float(env.get("OCCD_STOP_GRACE_S", STOP_GRACE_S))
    except (TypeError, ValueError):
        return STOP_GRACE_S
    return v if v > 0 else STOP_GRACE_S


def sd_notify(message: str, env=None) -> bool:
    """Send one sd_notify datagram (e.g. "READY=1"). Returns False when not under systemd or on error."""
    env = os.environ if env is None else env
    addr = env.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr.startswith("@"):  # abstract namespace
        addr = "\0" + addr[1:]
    elif not addr.startswith("/"):
        log.debug("NOTIFY_SOCKET %r is not a unix socket path", addr)
        return False
    import socket  # lazily: sd_notify runs only under systemd

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(addr)
            s.sendall(message.encode())
        return True
    except OSError as e:
        log.debug("sd_notify failed: %s", e)
        return False


def monotonic_usec() -> int:
    """CLOCK_MONOTONIC in microseconds, as RELOADING=1 wants it (MONOTONIC_USEC=)."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


def watchdog_interval(env=None) -> float | None:
    """Half of WATCHDOG_USEC in seconds, when the watchdog is meant for this process."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC")
    pid = env.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        return max(0.5, int(usec) / 1e6 / 2)
    except ValueError:
        return None

