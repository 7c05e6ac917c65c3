"""Can occd read this OpenClaw state, and does it match the OpenClaw CLI on PATH? Checks for people (`occd doctor`,
`occd status`) and for the daemon's log, each in words with what to do.

    check_stores(state_dir)                     -> [CheckResult, ...]  one per agent (+ the CLI/database release check)
    store_warning(state_dir, agent, error)      -> str                 the same words, one line, for sessions/select
    (release_mismatch(db_release, cli_release): the words for a database newer/older than the CLI, occd.openclaw.release)

Releases and their agent database schema (`PRAGMA user_version`): 2026.8.1–9.4 write 19, 9.5 21, 9.6 23 (the
global state database 15 → 18). An upgraded CLI refuses the older database until `openclaw doctor --fix`
migrates it, or the upgraded gateway does on start (seen on 9.5 → 9.6); an older CLI refuses a newer database
(9.5 and 8.1 on 9.6's). occd reads every schema it knows
either way.
"""

from __future__ import annotations

from pathlib import Path

from occd.checks import CheckResult
from occd.errors import BusyError, OccdError
from occd.openclaw.release import cli_release, release_mismatch, version_text


def check_agent_db(state_dir: Path, agent, cli: tuple[int, int, int] | None = None) -> list[CheckResult]:
    """The agent database's checks: readable by occd (schema and columns), and its release against the CLI's."""
    from occd.openclaw.dbstore import DbStore
    from occd.openclaw.state import parse_version

    name = f"openclaw-db:{agent.id}"
    store = DbStore(state_dir, agent.id, agent.dir)
    try:
        schema = store.schema()
    except BusyError as e:  # OpenClaw is writing: not a problem with the store
        return [CheckResult(name, "warn", f"agent {agent.id}: {e.message}", e.hint)]
    except OccdError as e:
        return [CheckResult(name, "fail", f"agent {agent.id}: {e.message}", e.hint, dict(e.details))]
    finally:
        store.close()
    from occd.openclaw.dbschema import unverified_words

    release = parse_version(schema.get("appVersion"))
    data = {"userVersion": schema["userVersion"], "appVersion": schema.get("appVersion"), "level": schema.get("level")}
    if not schema.get("actionable"):  # read, but occd acts on nothing for this agent: a problem to fix
        msg, hint = unverified_words(agent.id, schema)
        out = [CheckResult(name, "fail", msg, hint, {**data, "reason": schema.get("reason")})]
    else:
        how = "read by occd, which acts on it" + ("" if schema.get("verified") else " (a schema met through OpenClaw's documents)")
        out = [CheckResult(name, "ok", f"agent {agent.id}: schema {schema['userVersion']} "
                           f"({schema.get('appVersion') or 'unknown release'}), {how}", None, data)]
    words = release_mismatch(release, cli, schema["userVersion"])
    if words:
        out.append(CheckResult(f"openclaw-cli:{agent.id}", "warn", f"agent {agent.id}: {words}", None,
                               {"database": schema.get("appVersion"), "cli": version_text(cli) if cli else None}))
    return out


def check_stores(state_dir: Path, *, probe_cli: bool = True,
                 cli: tuple[int, int, int] | None = None) -> list[CheckResult]:
    """Every agent's store: database era read and compared with the CLI; file-era agents that a database-era
    release has not imported yet. For `occd doctor` (h16) and `occd status`."""
    from occd.openclaw.state import list_agents

    try:
        agents = list_agents(state_dir)
    except OccdError as e:
        return [CheckResult("openclaw-state", "fail", e.message, e.hint)]
    if cli is None and probe_cli and any(a.era == "db" for a in agents):
        cli = cli_release()
    out: list[CheckResult] = []
    for a in agents:
        if a.era == "db":
            out += check_agent_db(state_dir, a, cli)
        elif a.era == "needs-migration":
            out.append(CheckResult(f"openclaw-db:{a.id}", "warn",
                                   f"agent {a.id}: file-era sessions that OpenClaw has not imported into its "
                                   "database yet",
                                   "run `openclaw doctor --fix`; occd only reads them until then"))
    return out


def store_warning(state_dir: Path, agent, error: OccdError) -> str:
    """One line for an agent whose sessions occd could not read (`occd sessions`, `occd select`): the words
    `occd doctor` gives (check_agent_db: the agent, the schema and release, what is missing) and what to do."""
    words = None
    if agent.era == "db":
        bad = [c for c in check_agent_db(state_dir, agent) if not c.ok]
        if bad:
            words = (bad[0].detail, bad[0].hint)
    msg, hint = words or (f"agent {agent.id}: {error.message}", error.hint)
    return f"{msg} — {hint}" if hint else msg
