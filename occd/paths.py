"""Where occd keeps its own files. One module, one override: OCCD_HOME puts every occd path under one folder.

Resolved lazily (functions, never module-level constants), so tests and services can set the environment first.

    OCCD_HOME set:   $OCCD_HOME/config.toml, $OCCD_HOME/ledger.db, $OCCD_HOME/run/, $OCCD_HOME/logs/,
                     $OCCD_HOME/cache/
    otherwise:       the platform's dirs (platformdirs): config, data (ledger), state (logs), runtime (locks)
OCCD_CONFIG overrides the config file alone.
"""

from __future__ import annotations

import os
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


def runtime_dir(env=None) -> Path:
    """Locks and the daemon's pid/status files. XDG_RUNTIME_DIR when there is one (cleared at logout)."""
    home = occd_home(env)
    if home:
        return home / "run"
    env = os.environ if env is None else env
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / APP
    return state_dir(env) / "run"


def cache_dir(env=None) -> Path:
    home = occd_home(env)
    return home / "cache" if home else Path(_pd().user_cache_dir(APP))


def ensure_dir(p: Path, mode: int = 0o700) -> Path:
    p.mkdir(parents=True, exist_ok=True, mode=mode)
    return p


def display_path(p: Path | str, env=None) -> str:
    """Paths under the home directory are shown with ~ (cli-contract)."""
    env = os.environ if env is None else env
    s = str(p)
    home = env.get("HOME")
    if home and (s == home or s.startswith(home.rstrip("/") + "/")):
        return "~" + s[len(home.rstrip("/")):]
    return s
