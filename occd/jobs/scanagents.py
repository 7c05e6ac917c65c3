"""The agents a scan looks at (split out of occd.jobs.scan): their stores, what the last scan saw of each
file-era agent (reused while its index, folder and transcripts stay the same), and on a wake for events
(ctx.changed) the agents as last listed, with only the named ones looked at again (issue 29: a wake costs what
changed)."""

from __future__ import annotations

import os
from pathlib import Path

from occd.jobs.scanconfig import _openclaw_config
from occd.jobs.scanstate import ScanResult


def _store_for(state_dir: Path, agent):
    """occd.openclaw.open_store for an Agent we already listed (the database era with the CLI's release)."""
    if agent.era == "db":
        from occd.openclaw.dbstore import DbStore

        from occd.openclaw.release import cli_release  # a database newer/older than the CLI is named (h13)

        return DbStore(state_dir, agent.id, agent.dir, cli_release=cli_release())
    if agent.era == "needs-migration":  # reported and read, never acted on (open_store's own rule)
        from occd.openclaw import open_store

        return open_store(state_dir, agent)
    return _LazyFileStore(state_dir, agent)


class _LazyFileStore:
    """A file-era agent's FileStore, made when first used: an agent whose index, folder and transcripts did not
    change needs none (at 2,000 agents making one each wake cost more than the wake's stats)."""

    era = "file"
    close = None

    def __init__(self, state_dir: Path, agent):
        self._args = (state_dir, agent.id, agent.dir)
        self._store = None

    def __getattr__(self, name):  # only what this class does not have: the FileStore's attributes
        if self._store is None:
            from occd.openclaw import FileStore

            self._store = FileStore(*self._args)
        return getattr(self._store, name)


AGENTS_KEY = "scan.agents"  # agent id -> _Seen: what the last scan of a file-era agent saw


class _Seen:
    """A file-era agent as the last scan saw it: the fingerprint of its index, its sessions folder (a lock file
    or a transcript created or removed changes the folder) and OpenClaw's config; the sessions listed then; the
    observation of each session ({session id: (index entry, obs)}), reused as it is while its transcript's
    (inode, size, mtime) and its index entry stay the same (its run lock looked at again when the folder
    changed). `basis`: the config and settings the observations were made with."""

    __slots__ = ("fp", "basis", "infos", "warnings", "obs")

    def __init__(self, fp, basis, infos, warnings, obs=None):
        self.fp, self.basis, self.infos, self.warnings, self.obs = fp, basis, infos, warnings, obs or {}


def forget(ctx, agent: str, session_id: str) -> None:
    """occd itself changed the session (a strip): its next observation is made anew, not reused."""
    seen = ctx.cache.get(AGENTS_KEY, {}).get(agent)
    if seen is not None:
        seen.obs.pop(session_id, None)


def stat_key(p):
    """(inode, size, mtime_ns) of a file, None when it cannot be stat'ed: what says it changed."""
    try:
        st = os.stat(p)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _agent_fp(agent):
    sdir = f"{agent.dir}{os.sep}sessions"  # strings: pathlib's joins cost more than the stats at 2,000 agents
    return stat_key(f"{sdir}{os.sep}sessions.json"), stat_key(sdir)


def _basis(ctx):
    cfg = ctx.cache.get("scan.openclaw_config")
    return cfg[0] if cfg else None, id(ctx.settings)


LISTED_KEY = "scan.listed"  # (the agents the last whole scan listed, its basis, whether a database-era release)


def _changed_only(ctx):
    """On a wake for events (ctx.changed: the agents whose folders changed), the agents as the last whole scan
    listed them (a changed one's era looked at again); None when every agent must be listed: no such wake, no
    earlier listing, OpenClaw's config or occd's settings changed since, a changed agent that listing did not
    have (a new agent) or whose era changed."""
    changed = ctx.changed
    listed = ctx.cache.get(LISTED_KEY)
    if changed is None or listed is None:
        return None
    from occd.openclaw.state import detect_era

    _openclaw_config(ctx)  # the config's one look of this scan: its change makes the basis differ
    agents, basis, db_release = listed
    if basis != _basis(ctx):
        return None
    by_id = {a.id: a for a in agents}
    if any(a not in by_id for a in changed):
        return None
    for aid in changed:
        # its era may have changed (a database appeared, the first or the last session): then every agent is
        # listed again, and the listing kept for the next wakes says so
        a = by_id[aid]
        if detect_era(str(a.dir), db_release=db_release) != a.era:
            return None
    return agents


def _unchanged(ctx, agent, result: ScanResult) -> bool:
    """A file-era agent whose folder did not change since the last scan (a wake for others' events): what that
    scan saw, without a look at its files. A session that was running has its run lock looked at again: released
    (its run ended, and its own wake may not have come yet) or left by a process that died, the agent is looked at
    as a changed one, so no decision is made on the figure from before the run. False when there is nothing to
    reuse."""
    if ctx.changed is None or agent.id in ctx.changed or agent.era != "file":
        return False
    seen_agents = ctx.cache.get(AGENTS_KEY, {})
    last: _Seen | None = seen_agents.get(agent.id)
    if last is None or last.basis != _basis(ctx):
        return False
    if any(o.running for _, o in last.obs.values()):
        store = _store_for(ctx.state_dir, agent)
        infos = {i.session_id: i for i in last.infos}
        for sid, (_, obs) in last.obs.items():
            info = infos.get(sid)
            if obs.running and info is not None and not store.is_running(info):
                return False
    result.agents[agent.id] = "file"
    result.errors.extend(last.warnings)
    kept = [o for _, o in last.obs.values()]
    result.sessions.extend(kept)
    result.reused += len(kept)
    result.kept.update(map(id, kept))
    return True
