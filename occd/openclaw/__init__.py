"""Everything about OpenClaw's state on disk: the only package that knows OpenClaw's layout.

Light to import (no sqlite/json5 work at import time).
"""

from __future__ import annotations

from pathlib import Path

from occd.openclaw.filestore import (FileStore, SessionInfo, is_session_file, load_index, new_session_id,
                                     resolve_ref, update_index)
from occd.openclaw.locks import LockInfo, read_lock, transcript_lock
from occd.openclaw.state import (Agent, Release, config_path, context_window, detect_era, get_agent, list_agents,
                                 load_openclaw_config, release_evidence, resolve_state_dir, workspace_dir)


def open_store(state_dir: Path, agent: "str | Agent"):
    """The agent's session store: FileStore (file era, or a state still to migrate: then era is
    'needs-migration' and occd only reads) or DbStore (database era, read-only). `agent`: its id, or the Agent
    a caller already listed (a loop over list_agents() passes it: no second look at the agent's folder)."""
    a = agent if isinstance(agent, Agent) else get_agent(state_dir, agent)
    agent = a.id
    if a.era == "db":
        from occd.openclaw.dbstore import DbStore

        return DbStore(state_dir, agent, a.dir)
    store = FileStore(state_dir, agent, a.dir)
    if a.era == "needs-migration":
        store.era = "needs-migration"
        store.notes.append(f"agent '{agent}' has file-era sessions that OpenClaw has not imported yet: run "
                              "`openclaw doctor --fix`; occd only reads them until then")
    return store


def config_mtime(state_dir: Path) -> float | None:
    """When OpenClaw's config file last changed (None: no config)."""
    import os

    try:
        return os.stat(config_path(state_dir)).st_mtime
    except OSError:
        return None


def context_window_for_session(state_dir: Path, agent: str, info, config: dict | None = None) -> int:
    """The session's window by occd.openclaw.figure.session_window (the one rule every command uses)."""
    from occd.openclaw.figure import session_window

    from occd.openclaw.state import DEFAULT_CONTEXT_WINDOW

    named = context_window(state_dir, agent=agent, model=getattr(info, "model", None),
                           provider=getattr(info, "model_provider", None), config=config, default=None)
    return session_window(getattr(info, "entry", None), named, config_mtime(state_dir), DEFAULT_CONTEXT_WINDOW,
                          getattr(info, "session_id", None))


__all__ = ["Agent", "FileStore", "Release", "config_path", "release_evidence", "LockInfo", "SessionInfo", "context_window", "context_window_for_session",
           "detect_era", "get_agent", "is_session_file", "list_agents", "load_index", "load_openclaw_config",
           "new_session_id", "open_store", "read_lock", "resolve_ref", "resolve_state_dir", "transcript_lock",
           "update_index", "workspace_dir"]
