"""Can occd read this OpenClaw state, and does it match the OpenClaw CLI on PATH? Checks for people (`occd doctor`,
`occd status`) and for the daemon's log, each in words with what to do.

    check_stores(state_dir)                     -> [CheckResult, ...]  one per agent (+ the CLI/database release check)
    store_warning(state_dir, agent, error)      -> str                 the same words, one line, for sessions/select
    release_mismatch(db_release, cli_release)   -> str | None          the words for a database newer/older than the CLI

Releases and their agent database schema (`PRAGMA user_version`): 2026.8.1–9.4 write 19, 9.5 21, 9.6 23 (the
global state database 15 → 18). An upgraded CLI refuses the older database until `openclaw doctor --fix`
migrates it, or the upgraded gateway does on start (seen on 9.5 → 9.6); an older CLI refuses a newer database
(9.5 and 8.1 on 9.6's). occd reads every schema it knows
either way.
"""

from __future__ import annotations

import os
from pathlib import Path

from occd.checks import CheckResult
from occd.errors import BusyError, OccdError


def schema_for_release(v: tuple[int, int, int] | None) -> int | None:
    """The agent database schema a release writes (None: the file era, or a release occd has not seen)."""
    if v is None or v < (2026, 8, 1):
        return None
    if v < (2026, 9, 5):
        return 19
    if v < (2026, 9, 6):
        return 21
    if v < (2026, 9, 7):
        return 23
    return None


def _text(v: tuple[int, int, int]) -> str:
    return ".".join(map(str, v))


def release_mismatch(db_release: tuple[int, int, int] | None, cli_release: tuple[int, int, int] | None,
                     db_schema: int | None = None) -> str | None:
    """The words (with what to do) for an agent database written by another release than the CLI on PATH, or
    None when they agree (or one is unknown). Same schema on both sides: nothing to do."""
    if db_release is None or cli_release is None or db_release == cli_release:
        return None
    cli_schema = schema_for_release(cli_release)
    db_schema = db_schema if db_schema is not None else schema_for_release(db_release)
    if cli_schema is not None and db_schema is not None and cli_schema == db_schema:
        return None
    if db_release > cli_release:  # 9.5 and 8.1 CLIs on a 9.6 database: "uses newer schema version 18"
        return (f"the OpenClaw database was written by {_text(db_release)}, newer than the openclaw CLI on PATH "
                f"({_text(cli_release)}), which refuses it: update the CLI (occd reads the database either way)")
    # a 9.6 CLI on a 9.5 database: `agent`, `sessions list` refuse it ("stop active agents and run openclaw doctor
    # --fix"); `openclaw doctor --fix` migrates it, and so does the newer gateway when it starts
    return (f"the OpenClaw database was written by {_text(db_release)}, older than the openclaw CLI on PATH "
            f"({_text(cli_release)}), which refuses it until it is migrated: stop OpenClaw's agents and run "
            f"`openclaw doctor --fix` (restarting the {_text(cli_release)} gateway migrates it too; occd reads it "
            "either way)")


_CLI_CACHE: dict = {}


def cli_release(binary: str | None = None) -> tuple[int, int, int] | None:
    """`openclaw --version` of the CLI on PATH (OCCD_OPENCLAW_BIN wins), asked again only when the binary
    changed (a daemon pays the ~1 s start-up once per install)."""
    import shutil

    from occd.openclaw.state import openclaw_cli_version

    binary = binary or os.environ.get("OCCD_OPENCLAW_BIN") or shutil.which("openclaw")
    if not binary:
        return None
    try:
        real = os.path.realpath(binary)
        st = os.stat(real)
        key = (real, st.st_mtime_ns, st.st_size)
    except OSError:
        return None
    if key not in _CLI_CACHE:
        _CLI_CACHE.clear()
        _CLI_CACHE[key] = openclaw_cli_version(binary)
    return _CLI_CACHE[key]


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
                               {"database": schema.get("appVersion"), "cli": _text(cli) if cli else None}))
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
