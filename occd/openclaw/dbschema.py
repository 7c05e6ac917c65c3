"""Which OpenClaw agent database is this, and may occd act on it? (read-only; the database era)

Three levels (classify_schema / inspect_schema), used by every actor through ensure_actionable:
  known       a schema occd ran on for real (19, 21, 23) or met through fixtures built from OpenClaw's own
              documents (24, 25, 26), both version markers (`PRAGMA user_version`, schema_meta's primary row)
              agreeing and the tables that schema must have present: read and acted on;
  unverified  every column occd reads is there, but the schema is newer or other than those, the markers
              disagree, or a documented table is missing: read, and ACT ON NOTHING for that agent (no gateway
              call, no lean rules, no rotation); `occd status`, `status --check` and `doctor` say so;
  unreadable  a column occd reads is missing: UNSUPPORTED_SCHEMA (nothing is read).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from occd.errors import BusyError, OccdError

# agent schema (PRAGMA user_version) -> the releases that write it.
# Run with occd on a real state: 19, 21, 23.
VERIFIED_SCHEMAS = {19: "2026.8.1–2026.9.4", 21: "2026.9.5", 23: "2026.9.6"}
# Met through fixtures built from OpenClaw's own documents (openclaw/openclaw
# docs/reference/database-schemas/agent-schema-history.md @26bb090, src/state/*-json-predicate*.ts): 24 is
# written by 2026.9.7–9.9; 25 came after 9.9 and 26 is main (the 10.x/11.x lines): their first releases are not
# documented. occd acts on these (the tables it reads are unchanged, SCHEMA_SHAPE must be there).
DOCUMENTED_SCHEMAS = {24: "2026.9.7–2026.9.9", 25: "after 2026.9.9", 26: "2026.10.x–2026.11.x"}
KNOWN_SCHEMAS = {**VERIFIED_SCHEMAS, **DOCUMENTED_SCHEMAS}
VERIFIED_SCHEMA_VERSIONS = frozenset(VERIFIED_SCHEMAS)
# what a known schema shows besides REQUIRED_COLUMNS (its documents say so): a database claiming the number
# without them is not the schema occd was shown
_SNAPSHOTS = {"session_entry_snapshots": {"session_key", "field", "value_json"}}  # 24: hot facts split (PR #160358)
_COMPRESSED = {"transcript_events": {"event_zstd", "event_utf8_bytes"}}  # 23: selective zstd
_DERIVED = {"transcript_events": {"navigation_type", "message_role", "navigation_valid"},  # 26: derived columns
            "session_nodes": {"session_started_at", "has_optional_references"}}
SCHEMA_SHAPE = {23: _COMPRESSED, 24: {**_COMPRESSED, **_SNAPSHOTS}, 25: {**_COMPRESSED, **_SNAPSHOTS},
                26: {**_SNAPSHOTS, "transcript_events": _COMPRESSED["transcript_events"] | _DERIVED["transcript_events"],
                     "session_nodes": _DERIVED["session_nodes"]}}
# Levels of an agent database (classify_schema): every actor (jobs, actions, the lean view) acts only on KNOWN
KNOWN, UNVERIFIED, UNREADABLE = "known", "unverified", "unreadable"


def _known_text() -> str:
    return f"{min(KNOWN_SCHEMAS)}–{max(KNOWN_SCHEMAS)}"


REQUIRED_COLUMNS = {
    "session_nodes": {"session_key", "current_session_id", "entry_json", "entry_valid", "updated_at", "status",
                      "label", "display_name", "archived_at"},
    "transcript_events": {"session_id", "seq", "event_json"},
}
OPTIONAL_COLUMNS = {  # read when present (2026.9.6); without them every event is plain event_json
    "transcript_events": {"event_zstd", "event_utf8_bytes"},
    "transcript_event_identities": {"session_id", "seq", "event_type"},  # finds reset markers without decoding
}
MAX_EVENT_BYTES = 4 * 1024 * 1024  # OpenClaw's own bound on one stored event


def connect_ro(db: Path, timeout: float = 5.0) -> sqlite3.Connection:
    """A read-only connection (`mode=ro`, `query_only`): any write raises sqlite3.OperationalError."""
    if not db.is_file():
        raise OccdError(f"OpenClaw database {db} does not exist", "run OpenClaw once for this agent", code="DB_MISSING")
    try:
        c = sqlite3.connect(f"{Path(os.path.abspath(db)).as_uri()}?mode=ro", uri=True, timeout=timeout,
                            check_same_thread=False)
        c.execute("PRAGMA query_only = ON")
        return c
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            raise BusyError(f"OpenClaw database {db} is busy", "try again in a moment") from None
        raise OccdError(f"Cannot open OpenClaw database {db}: {e}", "check the file's permissions",
                        code="DB_UNREADABLE") from None
    except sqlite3.DatabaseError as e:
        raise OccdError(f"Cannot open OpenClaw database {db}: {e}", "check the file; `openclaw doctor` can help",
                        code="DB_UNREADABLE") from None


def schema_meta_row(c: sqlite3.Connection) -> dict | None:
    """The agent's `schema_meta` row ({role, agent_id, schema_version, app_version}): meta_key 'primary' (2026.9.5
    writes a second agent row whose app_version is not a release), else the newest agent row naming a release."""
    from occd.openclaw.state import parse_version

    try:
        rows = c.execute("SELECT meta_key, role, agent_id, schema_version, app_version FROM schema_meta "
                         "WHERE role = 'agent' ORDER BY meta_key = 'primary' DESC, updated_at DESC").fetchall()
    except sqlite3.DatabaseError:
        return None
    for key, role, agent_id, version, app in rows:
        if key == "primary" or (isinstance(app, str) and parse_version(app)):
            return {"metaKey": key, "role": role, "agentId": agent_id, "schemaVersion": version,
                    "appVersion": app if isinstance(app, str) else None}
    return None


def schema_version(c: sqlite3.Connection) -> tuple[int, str | None]:
    """(PRAGMA user_version, the OpenClaw release in schema_meta's primary agent row or None)."""
    (uv,) = c.execute("PRAGMA user_version").fetchone()
    meta = schema_meta_row(c)
    return uv, (meta or {}).get("appVersion")


def table_columns(c: sqlite3.Connection, tables) -> dict[str, set[str]]:
    return {t: {r[1] for r in c.execute(f"PRAGMA table_info({t})")} for t in tables}


def check_schema(c: sqlite3.Connection, db: Path) -> list[str]:
    """Raise UNSUPPORTED_SCHEMA when the tables/columns occd reads are not there; return warnings."""
    return inspect_schema(c, db)["warnings"]


def classify_schema(uv: int, meta: dict | None, cols: dict[str, set[str]]) -> tuple[str, str | None]:
    """(KNOWN or UNVERIFIED, the reason when unverified) of a database whose REQUIRED_COLUMNS are all there:
    known = a schema occd runs on or met through its documents (KNOWN_SCHEMAS), both version markers agreeing,
    and the tables that schema must have (SCHEMA_SHAPE) present. Anything else is read but never acted on."""
    if uv not in KNOWN_SCHEMAS:
        newer = uv > max(KNOWN_SCHEMAS)
        return UNVERIFIED, (f"newer than any schema occd knows ({_known_text()})" if newer else
                            f"not one occd knows ({', '.join(map(str, sorted(KNOWN_SCHEMAS)))})")
    mv = (meta or {}).get("schemaVersion")
    if meta is None:
        return UNVERIFIED, "its schema_meta has no primary agent row"
    if mv != uv:
        return UNVERIFIED, f"its two schema markers disagree (PRAGMA user_version {uv}, schema_meta {mv})"
    missing = [f"{t}.{col}" if t in cols and cols[t] else t
               for t, need in SCHEMA_SHAPE.get(uv, {}).items() for col in sorted(need - cols.get(t, set()))]
    if missing:
        missing = list(dict.fromkeys(missing))
        return UNVERIFIED, (f"schema {uv} should have {', '.join(missing[:4])}" + (" ..." if len(missing) > 4 else "")
                            + " and this database has not")
    return KNOWN, None


def unverified_words(agent: str, schema: dict) -> tuple[str, str]:
    """(message, hint) for an agent whose database is readable but unverified: the schema, the release, why,
    and what to do."""
    uv, app = schema.get("userVersion"), schema.get("appVersion") or "unknown release"
    return (f"agent {agent}: OpenClaw database schema {uv} ({app}) is unverified: {schema.get('reason')}; occd "
            "reads its sessions but acts on nothing for this agent (no gateway call, no lean rules, no rotation)",
            f"update occd to a release that knows schema {uv} (this one knows OpenClaw "
            + ", ".join(KNOWN_SCHEMAS.values()) + "); until then OpenClaw's own `openclaw sessions compact` and "
            "`/new` manage its sessions")


def inspect_schema(c: sqlite3.Connection, db: Path) -> dict:
    """{userVersion, appVersion, meta (schema_meta's primary row), level (KNOWN/UNVERIFIED), actionable, reason,
    columns (of the tables occd reads), warnings}; raises UNSUPPORTED_SCHEMA (the UNREADABLE level: naming the
    schema, the release and the missing columns) when a required column is not there."""
    try:
        (uv,) = c.execute("PRAGMA user_version").fetchone()
        meta = schema_meta_row(c)
        app = (meta or {}).get("appVersion")
        cols = table_columns(c, set(REQUIRED_COLUMNS) | set(OPTIONAL_COLUMNS) | set(_SNAPSHOTS)
                             | {t for shape in SCHEMA_SHAPE.values() for t in shape})
    except sqlite3.DatabaseError as e:
        raise OccdError(f"Cannot read OpenClaw database {db}: {e}", "check the file; `openclaw doctor` can help",
                        code="UNSUPPORTED_SCHEMA") from None
    release = app or "unknown release"
    missing = [f"{t}.{col}" for t, need in REQUIRED_COLUMNS.items() for col in sorted(need - cols[t])]
    if missing:
        what = "has no " + ", ".join(missing[:4]) + (" ..." if len(missing) > 4 else "")
        raise OccdError(f"OpenClaw database schema {uv} ({release}) is not one occd knows: it {what}",
                        "update occd (it reads OpenClaw " + ", ".join(KNOWN_SCHEMAS.values()) + "); meanwhile "
                        "`openclaw sessions list --json` shows the sessions",
                        code="UNSUPPORTED_SCHEMA", details={"userVersion": uv, "appVersion": app, "missing": missing,
                                                            "level": UNREADABLE})
    level, reason = classify_schema(uv, meta, cols)
    warnings = []
    if level != KNOWN:
        warnings.append(f"OpenClaw database schema {uv} ({release}) is unverified ({reason}): occd reads it and "
                        "acts on nothing for this agent")
    return {"userVersion": uv, "appVersion": app, "meta": meta, "level": level, "actionable": level == KNOWN,
            "reason": reason, "verified": uv in VERIFIED_SCHEMAS and level == KNOWN, "columns": cols,
            "warnings": warnings}


def ensure_actionable(state_dir: Path, agent: str) -> None:
    """Raise SCHEMA_UNVERIFIED (an OccdError naming the schema, the release and what to do) unless occd may act on
    this agent: its database is of a KNOWN schema. A file-era agent (no database) passes. The one gate every
    actor of the database era goes through (occd.openclaw.gateway.Gateway before any call, the lean job)."""
    from occd.openclaw.state import DB_NAME, get_agent

    try:
        a = get_agent(state_dir, agent)
    except OccdError:
        return  # no such agent: the action itself says so
    if a.era != "db":
        return
    db = a.dir / "agent" / DB_NAME
    c = connect_ro(db)
    try:
        schema = inspect_schema(c, db)
    finally:
        c.close()
    if not schema.get("actionable"):
        msg, hint = unverified_words(agent, schema)
        raise OccdError(msg, hint, code="SCHEMA_UNVERIFIED",
                        details={"agent": agent, "userVersion": schema.get("userVersion"),
                                 "appVersion": schema.get("appVersion"), "reason": schema.get("reason")})
