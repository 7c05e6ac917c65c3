"""OpenClaw's state directory, its config (JSON5), agents, era detection and context windows.

Resolution follows OpenClaw exactly (../shared/docs/openclaw-state.md "Finding the state directory"). Every
function takes `env` (a mapping) so tests never depend on the real environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from occd.errors import OccdError

LEGACY_DIRS = (".clawdbot", ".moldbot", ".moltbot")
CONFIG_NAMES = ("openclaw.json", "clawdbot.json", "moldbot.json", "moltbot.json")
DEFAULT_CONTEXT_WINDOW = 200_000
DB_NAME = "openclaw-agent.sqlite"


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("OPENCLAW_HOME") or env.get("HOME") or os.path.expanduser("~")).expanduser()


def _expand(p: str, env: Mapping[str, str]) -> Path:
    if p == "~" or p.startswith("~/"):
        return _home(env) / p[2:] if p != "~" else _home(env)
    return Path(p)


def resolve_state_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    for var in ("OPENCLAW_STATE_DIR", "CLAWDBOT_STATE_DIR"):
        if env.get(var):
            return _expand(env[var], env)
    home = _home(env)
    if (home / ".openclaw").exists():
        return home / ".openclaw"
    for name in LEGACY_DIRS:
        if (home / name).exists():
            return home / name
    return home / ".openclaw"


def config_path(state_dir: Path, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    for var in ("OPENCLAW_CONFIG_PATH", "CLAWDBOT_CONFIG_PATH"):
        if env.get(var):
            return _expand(env[var], env)
    for name in CONFIG_NAMES:
        if (state_dir / name).exists():
            return state_dir / name
    return state_dir / CONFIG_NAMES[0]


def load_openclaw_config(state_dir: Path, env: Mapping[str, str] | None = None) -> dict:
    """OpenClaw's config (JSON5: comments, trailing commas). Missing → {}; unreadable → OccdError."""
    p = config_path(state_dir, env)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise OccdError(f"Cannot read OpenClaw config {p}: {e.strerror}", "check its permissions", code="OPENCLAW_CONFIG") from None
    import json5

    try:
        data = json5.loads(text)
    except ValueError as e:
        raise OccdError(f"OpenClaw config {p} is not valid JSON5: {str(e).splitlines()[0]}",
                        "fix the file (openclaw doctor can help)", code="OPENCLAW_CONFIG") from None
    return data if isinstance(data, dict) else {}


def context_window(state_dir: Path, *, agent: str | None = None, model: str | None = None,
                   provider: str | None = None, config: dict | None = None) -> int:
    """The model's context window as OpenClaw resolves it: the configured provider's model entry, else
    agents.defaults.contextTokens, else 200000."""
    cfg = load_openclaw_config(state_dir) if config is None else config
    providers = ((cfg.get("models") or {}).get("providers") or {}) if isinstance(cfg.get("models"), dict) else {}
    if model and isinstance(providers, dict):
        order = [provider] if provider in providers else []
        order += [p for p in providers if p not in order]
        for pname in order:
            for m in (providers.get(pname) or {}).get("models") or []:
                if isinstance(m, dict) and m.get("id") == model and isinstance(m.get("contextWindow"), int):
                    return m["contextWindow"]
    agents = cfg.get("agents") if isinstance(cfg.get("agents"), dict) else {}
    defaults = agents.get("defaults") if isinstance(agents.get("defaults"), dict) else {}
    ct = defaults.get("contextTokens")
    if isinstance(ct, int) and ct > 0:
        return ct
    return DEFAULT_CONTEXT_WINDOW


def workspace_dir(state_dir: Path, agent: str, config: dict | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The agent's workspace (MEMORY.md, memory/): per-agent config, else agents.defaults.workspace, else
    <state>/workspace (OpenClaw's default; `workspace-<agent>` for non-default agents)."""
    env = os.environ if env is None else env
    cfg = load_openclaw_config(state_dir, env) if config is None else config
    agents = cfg.get("agents") if isinstance(cfg.get("agents"), dict) else {}
    for a in agents.get("list") or []:
        if isinstance(a, dict) and a.get("id") == agent and a.get("workspace"):
            return _expand(str(a["workspace"]), env)
    defaults = agents.get("defaults") if isinstance(agents.get("defaults"), dict) else {}
    if defaults.get("workspace"):
        base = _expand(str(defaults["workspace"]), env)
        return base if agent == "main" else base.parent / f"{base.name}-{agent}"
    return state_dir / ("workspace" if agent == "main" else f"workspace-{agent}")


@dataclass(frozen=True)
class Agent:
    id: str
    dir: Path
    era: str  # file | db | needs-migration | empty

    def to_json(self) -> dict:
        return {"id": self.id, "dir": str(self.dir), "era": self.era}


def detect_era(agent_dir: Path) -> str:
    """file: sessions/ holds an index or transcripts; db: agent/openclaw-agent.sqlite exists; needs-migration:
    both (a 2026.8+ release is in use but the old files were not imported by `openclaw doctor --fix`)."""
    db = (agent_dir / "agent" / DB_NAME).exists()
    sdir = agent_dir / "sessions"
    files = sdir.is_dir() and ((sdir / "sessions.json").exists() or any(
        n.endswith(".jsonl") for n in _listdir(sdir)))
    if db and files:
        return "needs-migration"
    if db:
        return "db"
    if files:
        return "file"
    return "empty"


def _listdir(d: Path) -> list[str]:
    try:
        return os.listdir(d)
    except OSError:
        return []


def list_agents(state_dir: Path) -> list[Agent]:
    root = state_dir / "agents"
    if not state_dir.exists():
        raise OccdError(f"OpenClaw state directory {state_dir} does not exist",
                        "set OPENCLAW_STATE_DIR or occd's state_dir, or run OpenClaw once", code="STATE_NOT_FOUND")
    if not os.access(state_dir, os.R_OK | os.X_OK):
        raise OccdError(f"OpenClaw state directory {state_dir} is not readable", "check its permissions",
                        code="STATE_UNREADABLE")
    out = []
    for name in sorted(_listdir(root)):
        d = root / name
        if d.is_dir() and not name.startswith("."):
            out.append(Agent(name, d, detect_era(d)))
    return out


def get_agent(state_dir: Path, agent_id: str) -> Agent:
    agents = list_agents(state_dir)
    for a in agents:
        if a.id == agent_id:
            return a
    names = ", ".join(a.id for a in agents) or "none"
    raise OccdError(f"Agent '{agent_id}' not found", f"agents in {state_dir}: {names}", code="AGENT_NOT_FOUND")
