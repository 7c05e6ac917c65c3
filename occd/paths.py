"""Where occd keeps its own files. One module, one override: OCCD_HOME puts every occd path under one folder.

Resolved lazily (functions, never module-level constants), so tests and services can set the environment first.

    OCCD_HOME set:   $OCCD_HOME/config.toml, $OCCD_HOME/ledger.db, $OCCD_HOME/run/, $OCCD_HOME/logs/,
                     $OCCD_HOME/cache/
    otherwise:       the platform's dirs (platformdirs): config, data (ledger), state (logs); locks in the user's
                     runtime folder (user_runtime_dir: /run/user/UID, then $XDG_RUNTIME_DIR, then state/run)
OCCD_CONFIG overrides the config file alone.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

APP = "occd"


def _env_path(name: str, env=None) -> Path | None:
    env = os.environ if env is None else env
    v = env.get(name)
    return Path(v).expanduser() if v else None


def occd_home(env=None) -> Path | None:
    return _env_path("OCCD_HOME", env)


def _pd():
    import platformdirs

    return platformdirs


def config_file(env=None) -> Path:
    explicit = _env_path("OCCD_CONFIG", env)
    if explicit:
        return explicit
    home = occd_home(env)
    if home:
        return home / "config.toml"
    return Path(_pd().user_config_dir(APP)) / "config.toml"


def data_dir(env=None) -> Path:
    home = occd_home(env)
    return home if home else Path(_pd().user_data_dir(APP))


def ledger_path(env=None) -> Path:
    return data_dir(env) / "ledger.db"


def state_dir(env=None) -> Path:
    home = occd_home(env)
    return home if home else Path(_pd().user_state_dir(APP))


def log_dir(env=None) -> Path:
    return state_dir(env) / "logs"


RUN_USER = Path("/run/user")  # where logind makes each user's runtime folder (tests point it elsewhere)


def owned_dir(p: Path, uid: int) -> bool:
    try:
        st = p.stat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid


def user_runtime_dir(env=None, uid: int | None = None) -> Path | None:
    """The user's runtime folder whatever the caller's environment, or None when there is none.

    1. /run/user/UID when it is a folder owned by the user: logind makes it for every session and for a
       lingering user, and the systemd user manager gives it to the service as XDG_RUNTIME_DIR. A shell without
       a logind session (`sudo -u`, `runuser`, cron, `docker exec`) has no XDG_RUNTIME_DIR but finds it here.
    2. $XDG_RUNTIME_DIR when it is a folder owned by the user (systems that put it elsewhere; a variable carried
       over from another user by `sudo` is not ours and is skipped).
    The one place this order is decided: the daemon, every command and `systemctl --user` calls use it."""
    env = os.environ if env is None else env
    uid = os.getuid() if uid is None else uid
    cand = RUN_USER / str(uid)
    if owned_dir(cand, uid):
        return cand
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg and owned_dir(Path(xdg), uid):
        return Path(xdg)
    return None


def runtime_dir(env=None, uid: int | None = None) -> Path:
    """Locks and the daemon's pid/status files: $OCCD_HOME/run, else occd/ in the user's runtime folder
    (user_runtime_dir: cleared at logout), else run/ in the state folder."""
    home = occd_home(env)
    if home:
        return home / "run"
    base = user_runtime_dir(env, uid)
    if base is not None:
        return base / APP
    return state_dir(env) / "run"


def cache_dir(env=None) -> Path:
    home = occd_home(env)
    return home / "cache" if home else Path(_pd().user_cache_dir(APP))


PRIVATE_UMASK = 0o077  # occd's own files are its user's alone, whatever the umask it was started with


def private_umask() -> int:
    """Set the process umask so that every file and folder occd creates is its user's alone (0600/0700); returns
    the previous one. The CLI calls it first thing; SQLite's -wal/-shm, logs, caches and temp files follow."""
    return os.umask(PRIVATE_UMASK)


def ensure_dir(p: Path, mode: int = 0o700) -> Path:
    """`p` and any missing parent, each created with `mode` exactly (not widened by the umask)."""
    missing = []
    cur = p
    while not cur.exists() and cur != cur.parent:
        missing.append(cur)
        cur = cur.parent
    p.mkdir(parents=True, exist_ok=True, mode=mode)
    for d in missing:
        try:
            os.chmod(d, mode)
        except OSError:
            pass
    return p


def write_private(p: Path, data: bytes) -> None:
    """Write one of occd's own small files atomically, mode 0600 whatever the umask."""
    ensure_dir(p.parent)
    write_atomic(p, data, 0o600)


def write_atomic(p: Path, data: bytes, mode: int) -> None:
    """Write `data` to `p` atomically (a temp file beside it, fsync, rename) with `mode` whatever the umask. The
    folder must exist."""
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:  # a leftover (or a symlink planted at the name) goes; the new name is ours alone (O_EXCL, no follow)
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, p)


class NotRegular(OSError):
    """A file occd only reads when it is a regular file (a FIFO, a device, a directory, a link or too large)."""


def read_regular(p: Path, limit: int = 16 * 1024 * 1024, *, follow_symlinks: bool = False) -> bytes | None:
    """The bytes of a small regular file, None when there is none. Never blocks: opened with O_NONBLOCK (a FIFO
    or a device at the name cannot hang the open) and O_NOFOLLOW (unless follow_symlinks), then fstat'ed; anything
    but a regular file of at most `limit` bytes raises NotRegular, unread."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(p, flags)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: a symbolic link
            raise NotRegular(exc.errno, "a symbolic link", str(p)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(0, "not a regular file", str(p))
        if st.st_size > limit:
            raise NotRegular(0, f"larger than {limit} bytes", str(p))
        chunks, n = [], 0
        while n <= limit:
            b = os.read(fd, min(1 << 20, limit + 1 - n))
            if not b:
                break
            chunks.append(b)
            n += len(b)
        if n > limit:
            raise NotRegular(0, f"larger than {limit} bytes", str(p))
        return b"".join(chunks)
    finally:
        os.close(fd)


def display_path(p: Path | str, env=None) -> str:
    """Paths under the home directory are shown with ~ (cli-contract)."""
    env = os.environ if env is None else env
    s = str(p)
    home = env.get("HOME")
    if home and (s == home or s.startswith(home.rstrip("/") + "/")):
        return "~" + s[len(home.rstrip("/")):]
    return s
