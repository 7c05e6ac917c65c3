"""`occd status` before occd's first cycle (issue 32 §15): no ledger yet, but OpenClaw's state can already be
read. What can be seen (the agents and their sessions, from OpenClaw's own index, as `occd list` shows them) and
what is missing (the ledger, a daemon that ever ran), each said with the command that fills it in. Read-only."""

from __future__ import annotations

from pathlib import Path


def first_contact(settings, daemon: dict) -> dict:
    """{"agents": [{id, era, sessions, biggest: [...]}], "missing": [str], "stateDir": str | None, "error": str?}"""
    from occd.errors import OccdError
    from occd.openclaw import open_store, resolve_state_dir
    from occd.openclaw.state import list_agents

    out: dict = {"agents": [], "missing": [], "stateDir": None}
    try:
        sd = Path(settings.state_dir) if getattr(settings, "state_dir", None) else resolve_state_dir()
        out["stateDir"] = str(sd)
        agents = list_agents(sd)
    except OccdError as e:
        out["error"] = f"{e.message} ({e.hint})" if e.hint else e.message
        agents = []
    for a in agents:
        row = {"id": a.id, "era": a.era, "sessions": None}
        try:
            infos = open_store(sd, a.id).sessions()
            row["sessions"] = len(infos)
            row["newest"] = [{"sessionId": i.session_id, "key": getattr(i, "key", None)} for i in infos[:3]]
        except (OccdError, OSError) as e:
            row["error"] = getattr(e, "message", None) or str(e)
        out["agents"].append(row)
    out["missing"].append("the ledger: occd has not run a cycle yet, so there are no observations, actions or "
                          "savings to show — `occd run --once` runs one now")
    if not daemon.get("running") and not daemon.get("lastCycle"):
        out["missing"].append("the daemon: it never ran — `occd service install` runs it in the background "
                              "(observe mode until you pass --act)")
    return out
