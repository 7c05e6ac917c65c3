"""OpenClaw's state directory, its config (JSON5), agents, era detection and context windows.

Resolution follows OpenClaw (../shared/docs/openclaw-state.md "Finding the state directory"; checked against the
code of 2026.7.1 and 2026.9.6, which read OPENCLAW_STATE_DIR and fall back to ~/.openclaw, then ~/.clawdbot;
older releases also honoured CLAWDBOT_STATE_DIR and the ~/.moldbot, ~/.moltbot names, so occd accepts those too).
Values are trimmed; a leading `~` means OpenClaw's home (OPENCLAW_HOME, itself `~`-expanded with HOME, else
HOME); relative paths are made absolute. Every function takes `env` (a mapping) so tests never depend on the
real environment.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from occd.errors import OccdError

LEGACY_DIRS = (".clawdbot", ".moldbot", ".moltbot")
STATE_DIR_VARS = ("OPENCLAW_STATE_DIR", "CLAWDBOT_STATE_DIR")
CONFIG_PATH_VARS = ("OPENCLAW_CONFIG_PATH", "CLAWDBOT_CONFIG_PATH")
CONFIG_NAMES = ("openclaw.json", "clawdbot.json", "moldbot.json", "moltbot.json")
DEFAULT_CONTEXT_WINDOW = 200_000
DB_NAME = "openclaw-agent.sqlite"
GLOBAL_DB = Path("state") / "openclaw.sqlite"
DB_ERA_FIRST_RELEASE = (2026, 8, 1)  # session storage moved into SQLite with 2026.8.1
_VERSION_RE = re.compile(r"(\d{4})\.(\d{1,2})\.(\d{1,3})")


# --------------------------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------------------------

def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def _val(env: Mapping[str, str], name: str) -> str | None:
    v = env.get(name)
    v = v.strip() if isinstance(v, str) else None
    return v or None


def openclaw_home(env: Mapping[str, str] | None = None) -> Path:
    """OPENCLAW_HOME (a leading `~` expanded with HOME), else HOME, else the user's home."""
    env = _env(env)
    os_home = _val(env, "HOME") or os.path.expanduser("~")
    oc = _val(env, "OPENCLAW_HOME")
    if oc:
        if oc == "~" or oc.startswith("~/"):
            oc = os_home + oc[1:]
        return Path(os.path.abspath(oc))
    return Path(os.path.abspath(os_home))


def expand_user_path(p: str, env: Mapping[str, str] | None = None) -> Path:
    """A path as OpenClaw reads one from the environment or its config: trimmed, `~` = OpenClaw's home, absolute."""
    p = p.strip()
    if p == "~" or p.startswith("~/"):
        return Path(os.path.abspath(str(openclaw_home(env)) + p[1:]))
    return Path(os.path.abspath(p))


def resolve_state_dir(env: Mapping[str, str] | None = None, state_dir: str | os.PathLike | None = None) -> Path:
    """OpenClaw's state directory. `state_dir` (occd's own Settings.state_dir) wins when given."""
    env = _env(env)
    if state_dir:
        return expand_user_path(str(state_dir), env)
    for var in STATE_DIR_VARS:
        v = _val(env, var)
        if v:
            return expand_user_path(v, env)
    home = openclaw_home(env)
    if (home / ".openclaw").exists():
        return home / ".openclaw"
    for name in LEGACY_DIRS:
        if (home / name).exists():
            return home / name
    return home / ".openclaw"


def config_path(state_dir: Path, env: Mapping[str, str] | None = None) -> Path:
    env = _env(env)
    for var in CONFIG_PATH_VARS:
        v = _val(env, var)
        if v:
            return expand_user_path(v, env)
    for name in CONFIG_NAMES:
        if (state_dir / name).exists():
            return state_dir / name
    return state_dir / CONFIG_NAMES[0]


def load_openclaw_config(state_dir: Path, env: Mapping[str, str] | None = None) -> dict:
    """OpenClaw's config (JSON5: comments, trailing commas). Missing → {}; unreadable or invalid → OccdError."""
    p = config_path(state_dir, env)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        why = getattr(e, "strerror", None) or "not UTF-8 text"
        raise OccdError(f"Cannot read OpenClaw config {p}: {why}", "check the file and its permissions",
                        code="OPENCLAW_CONFIG") from None
    if not text.strip():
        return {}
    try:
        data = loads_json5(text)
    except ValueError as e:
        first = str(e).splitlines()[0] if str(e) else "syntax error"
        raise OccdError(f"OpenClaw config {p} is not valid JSON5: {first}",
                        "fix the file (`openclaw doctor` can help)", code="OPENCLAW_CONFIG") from None
    return data if isinstance(data, dict) else {}


def loads_json5(text: str):
    """JSON5 text -> data. Most configs are plain JSON (what OpenClaw itself writes), which the C parser reads in
    microseconds; only text it rejects (comments, trailing commas, unquoted keys) goes through the pure-Python
    JSON5 parser, which costs tens of milliseconds on every command otherwise. Raises ValueError like json5."""
    import json

    try:
        return json.loads(text)
    except ValueError:
        pass
    import json5

    return json5.loads(text)


def _dict(v) -> dict:
    return v if isinstance(v, dict) else {}


def _list(v) -> list:
    """A config value that should be a list, or [] (a half-edited openclaw.json is read as OpenClaw's loader reads
    it: the part of the wrong type is skipped, the rest is kept)."""
    return v if isinstance(v, list) else []


# --------------------------------------------------------------------------------------------------------------
# Context window
# --------------------------------------------------------------------------------------------------------------

def _split_model(model: str | None, provider: str | None) -> tuple[str | None, str | None]:
    if model and not provider and "/" in model:
        p, m = model.split("/", 1)
        return m, p
    return model, provider


def _window_in_providers(providers: dict, model: str, provider: str | None) -> int | None:
    order = [provider] if provider in providers else []
    order += [p for p in providers if p not in order]
    for pname in order:
        for m in _list(_dict(providers.get(pname)).get("models")):
            if isinstance(m, dict) and m.get("id") == model:
                cw = m.get("contextWindow")
                if isinstance(cw, int) and not isinstance(cw, bool) and cw > 0:
                    return cw
    return None


def _catalog(agent_dir: Path | None, config_file: Path | None = None) -> dict:
    """The agent's generated model catalog (`agents/<id>/agent/models.json`), when the release writes one and it
    is not older than the config it derives from (`config_file`): OpenClaw regenerates it from openclaw.json, and
    until it does, a window raised or lowered in the config is not in it (the config then wins)."""
    if agent_dir is None:
        return {}
    p = agent_dir / "agent" / "models.json"
    try:
        if config_file is not None:
            try:
                if os.stat(p).st_mtime < os.stat(config_file).st_mtime:
                    return {}  # stale: the config changed after OpenClaw wrote the catalog
            except FileNotFoundError:
                pass  # no config file: the catalog stands (a missing catalog fails below)
        return _dict(_dict(loads_json5(p.read_text(encoding="utf-8"))).get("providers"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}


def default_model(config: dict, agent: str | None = None) -> str | None:
    """The agent's configured model (`agents.list[].model`, else `agents.defaults.model`; a string or
    {"primary": ...}), as "provider/model"."""
    agents = _dict(config.get("agents"))
    cands = [a.get("model") for a in _list(agents.get("list")) if isinstance(a, dict) and a.get("id") == agent]
    cands.append(_dict(agents.get("defaults")).get("model"))
    for m in cands:
        m = m.get("primary") if isinstance(m, dict) else m
        if isinstance(m, str) and m.strip():
            return m.strip()
    return None


def context_window(state_dir: Path, *, agent: str | None = None, model: str | None = None,
                   provider: str | None = None, config: dict | None = None, default: int | None = DEFAULT_CONTEXT_WINDOW):
    """The model's context window as OpenClaw resolves it: the model catalog's `contextWindow`, else the configured
    `models.providers.<p>.models[]` entry, else `agents.defaults.contextTokens`, else 200000 (a catalog older than
    openclaw.json is not read: the config wins until OpenClaw regenerates it). Without a model
    (a session reset in place records none) the agent's configured model is used, as `openclaw sessions list`
    does."""
    cfg = load_openclaw_config(state_dir) if config is None else config
    if not model:
        model, provider = default_model(cfg, agent), None
    model, provider = _split_model(model, provider)
    if model:
        for providers in (_catalog(state_dir / "agents" / agent if agent else None, config_path(state_dir)),
                          _dict(_dict(cfg.get("models")).get("providers"))):
            cw = _window_in_providers(providers, model, provider)
            if cw:
                return cw
    ct = _dict(_dict(cfg.get("agents")).get("defaults")).get("contextTokens")
    if isinstance(ct, int) and not isinstance(ct, bool) and ct > 0:
        return ct
    return default  # (None: the caller wants only a window the catalog or the config names)


def workspace_dir(state_dir: Path, agent: str, config: dict | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The agent's workspace (MEMORY.md, memory/): per-agent config, else agents.defaults.workspace, else
    <state>/workspace (OpenClaw's default; `workspace-<agent>` for non-default agents)."""
    env = _env(env)
    cfg = load_openclaw_config(state_dir, env) if config is None else config
    agents = _dict(cfg.get("agents"))
    for a in _list(agents.get("list")):
        if isinstance(a, dict) and a.get("id") == agent and isinstance(a.get("workspace"), str) and a["workspace"]:
            return expand_user_path(str(a["workspace"]), env)
    defaults = _dict(agents.get("defaults"))
    if isinstance(defaults.get("workspace"), str) and defaults["workspace"]:
        base = expand_user_path(str(defaults["workspace"]), env)
        return base if agent == "main" else base.parent / f"{base.name}-{agent}"
    return state_dir / ("workspace" if agent == "main" else f"workspace-{agent}")


# --------------------------------------------------------------------------------------------------------------
# Releases and eras
# --------------------------------------------------------------------------------------------------------------

def parse_version(text: str | None) -> tuple[int, int, int] | None:
    m = _VERSION_RE.search(text or "")
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def is_db_era_release(version: tuple[int, int, int] | None) -> bool:
    """2026.8.1 and later keep sessions in SQLite; the 2026.7.x extended-stable line (2026.7.33–35) does not."""
    return version is not None and version >= DB_ERA_FIRST_RELEASE


@dataclass(frozen=True)
class Release:
    version: tuple[int, int, int] | None
    source: str  # config-meta | state-db | cli | none

    @property
    def text(self) -> str | None:
        return ".".join(map(str, self.version)) if self.version else None

    @property
    def db_era(self) -> bool:
        return is_db_era_release(self.version)


def openclaw_cli_version(binary: str | None = None, timeout: float = 15.0) -> tuple[int, int, int] | None:
    """`openclaw --version` of the CLI on PATH, OCCD_OPENCLAW_BIN winning (about 1 s); None when it is not
    installed or does not answer."""
    import os
    import shutil
    import subprocess

    binary = binary or os.environ.get("OCCD_OPENCLAW_BIN") or shutil.which("openclaw")
    if not binary:
        return None
    try:
        p = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_version(p.stdout) if p.returncode == 0 else None


def state_db_release(state_dir: Path) -> tuple[int, int, int] | None:
    """The newest release named in the global `state/openclaw.sqlite` schema_meta (read-only). 2026.7.x creates
    this database too but records no app_version; 2026.8+ records its own version."""
    import sqlite3

    db = state_dir / GLOBAL_DB
    if not db.is_file():
        return None
    try:
        c = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=1.0)
        try:
            rows = c.execute("SELECT app_version FROM schema_meta WHERE app_version IS NOT NULL").fetchall()
        finally:
            c.close()
    except sqlite3.Error:
        return None
    versions = [v for v in (parse_version(r[0]) for r in rows) if v]
    return max(versions) if versions else None


def release_evidence(state_dir: Path, config: dict | None = None, *, probe_cli: bool = False,
                     openclaw_bin: str | None = None) -> Release:
    """Which OpenClaw release last used this state: `meta.lastTouchedVersion` in openclaw.json, the global state
    database, and (only when `probe_cli`, it costs a process start) `openclaw --version`. The newest wins."""
    found: list[tuple[tuple[int, int, int], str]] = []
    try:
        cfg = load_openclaw_config(state_dir) if config is None else config
    except OccdError:
        cfg = {}
    v = parse_version(str(_dict(cfg.get("meta")).get("lastTouchedVersion") or ""))
    if v:
        found.append((v, "config-meta"))
    v = state_db_release(state_dir)
    if v:
        found.append((v, "state-db"))
    if probe_cli:
        v = openclaw_cli_version(openclaw_bin)
        if v:
            found.append((v, "cli"))
    if not found:
        return Release(None, "none")
    v, src = max(found)
    return Release(v, src)


@dataclass(frozen=True)
class Agent:
    id: str
    dir: Path
    era: str  # file | db | needs-migration | empty

    def to_json(self) -> dict:
        return {"id": self.id, "dir": str(self.dir), "era": self.era}


def _listdir(d: Path) -> list[str]:
    try:
        return os.listdir(d)
    except OSError:
        return []


def has_file_era_sessions(agent_dir: Path) -> bool:
    """`sessions/sessions.json` or a session transcript directly in `sessions/` (not occd's archive, not
    OpenClaw's .reset/.deleted archives or trajectory side files)."""
    from occd.openclaw.filestore import is_session_file

    sdir = f"{agent_dir}{os.sep}sessions"  # strings joined by hand: this runs for every agent of every cycle
    if os.path.isfile(f"{sdir}{os.sep}sessions.json"):
        return True
    return any(is_session_file(n) for n in _listdir(sdir))


SESSION_TABLES = ("session_nodes", "transcript_events")


def db_holds_sessions(db_path: Path) -> bool:
    """Whether the agent database has session tables (read-only). 2026.7.35's `openclaw doctor --fix` creates
    `agent/openclaw-agent.sqlite` at schema 1 with auth profiles and a memory index only: that database does not
    hold the sessions, `sessions.json` and the transcripts still do. A database that cannot be read counts as
    holding sessions (the cautious answer: occd then only reads)."""
    import sqlite3

    try:
        c = sqlite3.connect(f"{db_path.as_uri()}?mode=ro", uri=True, timeout=1.0)
        try:
            names = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            c.close()
    except sqlite3.Error:
        return True
    return any(t in names for t in SESSION_TABLES)


def detect_era(agent_dir: Path, *, db_release: bool = False) -> str:
    """The era is what holds the sessions. file: sessions/ holds an index or transcripts (beside them an agent
    database without session tables, as 2026.7.35's `doctor --fix` creates, changes nothing); db:
    agent/openclaw-agent.sqlite exists; needs-migration: file-era sessions that a database-era release has not
    imported yet — an agent database with session tables exists beside them, or `db_release` says a 2026.8+
    release uses this state (it refuses to run until `openclaw doctor --fix` imports the files, so no agent
    database appears); empty: neither."""
    db_name = f"{agent_dir}{os.sep}agent{os.sep}{DB_NAME}"
    db = os.path.isfile(db_name)
    files = has_file_era_sessions(agent_dir)
    if db and not db_holds_sessions(Path(db_name)):
        if not files:
            return "empty"  # e.g. 7.35's doctor --fix database before the first session is written
        if not db_release:
            return "file"
    if files and (db or db_release):
        return "needs-migration"
    if db:
        return "db"
    if files:
        return "file"
    return "empty"


def _readable_state(state_dir: Path) -> None:
    if not state_dir.exists():
        raise OccdError(f"OpenClaw state directory {state_dir} does not exist",
                        "set OPENCLAW_STATE_DIR or occd's state_dir, or run OpenClaw once", code="STATE_NOT_FOUND")
    if not state_dir.is_dir() or not os.access(state_dir, os.R_OK | os.X_OK):
        raise OccdError(f"OpenClaw state directory {state_dir} is not readable", "check its permissions",
                        code="STATE_UNREADABLE")


def list_agents(state_dir: Path, *, probe_cli: bool = False, release: Release | None = None) -> list[Agent]:
    """Agents under <state>/agents/ (sorted), each with its storage era. A command or a cycle lists them once and
    passes the Agent on (open_store takes one): listing costs a look at every agent's folder and database."""
    _readable_state(state_dir)
    root = state_dir / "agents"
    names = sorted(_subdirs(root))
    if not names:
        return []
    rel = release if release is not None else release_evidence(state_dir, probe_cli=probe_cli)
    base = f"{root}{os.sep}"
    return [Agent(n, root / n, detect_era(base + n, db_release=rel.db_era)) for n in names]


def _subdirs(root: Path) -> list[str]:
    """The folders in `root` (not hidden; a link to a folder counts), from the directory entries' types: no stat
    per entry except where the filesystem does not say (DT_UNKNOWN) or for a link."""
    try:
        with os.scandir(root) as it:
            return [e.name for e in it if not e.name.startswith(".") and e.is_dir()]
    except OSError:
        return []


def get_agent(state_dir: Path, agent_id: str, *, probe_cli: bool = False, release: Release | None = None) -> Agent:
    """One agent by id, looking at its folder only (every agent is listed only to name them when it is not
    found): a loop over the agents that asks for each one by id stays linear."""
    _readable_state(state_dir)
    root = state_dir / "agents"
    d = root / agent_id if isinstance(agent_id, str) and agent_id else None
    if (d is not None and not agent_id.startswith(".") and os.sep not in agent_id and "/" not in agent_id
            and d.is_dir()):
        rel = release if release is not None else release_evidence(state_dir, probe_cli=probe_cli)
        return Agent(agent_id, d, detect_era(d, db_release=rel.db_era))
    agents = list_agents(state_dir, probe_cli=probe_cli, release=release)
    names = ", ".join(a.id for a in agents) or "none"
    raise OccdError(f"Agent '{agent_id}' not found", f"agents in {state_dir}: {names}", code="AGENT_NOT_FOUND")
