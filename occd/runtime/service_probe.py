"""What the user's service manager and logind say, asked the same way from any shell.

A shell without a logind session (`sudo -u`, `runuser`, cron, `docker exec`) has no XDG_RUNTIME_DIR and often
no USER/LOGNAME: occd asks by uid and finds the user manager's bus through paths.user_runtime_dir, and says so
plainly when the manager cannot be reached instead of guessing "not active".
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
from pathlib import Path

from occd import paths

LINGER_DIR = Path("/var/lib/systemd/linger")  # logind's record of lingering users, one empty file per user name


def user_name(uid: int | None = None) -> str:
    """The account name of `uid` from the password database (never $USER/$LOGNAME: unset under cron,
    `env -i`, some `sudo -u`); the uid itself when it has no entry."""
    uid = os.getuid() if uid is None else uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def user_lingers(runner, uid: int | None = None) -> bool | None:
    """Does logind keep this user's manager running after logout? Asked by uid: `loginctl show-user UID -p
    Linger`, else logind's own record /var/lib/systemd/linger/<name of the uid>. None: cannot tell."""
    uid = os.getuid() if uid is None else uid
    r = runner(["loginctl", "show-user", str(uid), "-p", "Linger"])
    m = re.search(r"^Linger=(yes|no)\s*$", r.stdout or "", re.M)
    if r.returncode == 0 and m:
        return m.group(1) == "yes"
    if r.returncode != 0 and "not logged in or lingering" in (r.stderr or ""):
        return False
    if (LINGER_DIR / user_name(uid)).exists():
        return True
    return False if LINGER_DIR.is_dir() else None


_BUS_ERROR = re.compile(r"failed to connect to [^\n]*bus|failed to get d-bus connection", re.I)


def bus_error(r: subprocess.CompletedProcess) -> str | None:
    """The manager's one-line complaint when a systemctl/launchctl call could not reach it (no user bus in this
    shell: no logind session and no /run/user/UID), else None."""
    text = f"{r.stderr or ''}\n{r.stdout or ''}"
    if r.returncode == 0 or not _BUS_ERROR.search(text):
        return None
    return next(line.strip() for line in text.splitlines() if _BUS_ERROR.search(line))


def no_bus_hint(uid: int | None = None) -> str:
    """What to do when the user manager cannot be reached from this shell."""
    uid = os.getuid() if uid is None else uid
    name = user_name(uid)
    rd = paths.user_runtime_dir(uid=uid)
    if rd is None:
        return (f"this shell has no logind session and /run/user/{uid} does not exist (the user manager runs only "
                f"while {name} is logged in): log in (ssh, or `machinectl shell {name}@`), or keep it running with "
                f"`loginctl enable-linger {name}`")
    return (f"no user manager answers on {rd}/bus: is user@{uid}.service running (`systemctl status "
            f"user@{uid}.service` as root)? `loginctl enable-linger {name}` starts it without a login")


def manager_env(environ=None, uid: int | None = None) -> dict[str, str]:
    """This environment for `systemctl --user` and `journalctl --user`, with XDG_RUNTIME_DIR pointing at the
    user's runtime folder (paths.user_runtime_dir) when this shell has none of its own: without a logind session
    (`sudo -u`, `runuser`, cron) systemctl finds the user manager's bus there."""
    env = dict(os.environ if environ is None else environ)
    uid = os.getuid() if uid is None else uid
    current = env.get("XDG_RUNTIME_DIR")
    if not current or not paths.owned_dir(Path(current), uid):
        rd = paths.user_runtime_dir(env, uid)
        if rd is not None:
            env["XDG_RUNTIME_DIR"] = str(rd)
    return env
