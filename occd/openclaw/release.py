"""Which OpenClaw release wrote an agent database, and the one on PATH: the schema each release writes, the words
for a database newer or older than the CLI (occd.openclaw.health's checks, DbStore's notes), the CLI's version.

Pure but for cli_release (runs `openclaw --version` once per installed binary).
"""

from __future__ import annotations

import os


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


def version_text(v: tuple[int, int, int]) -> str:
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
        return (f"the OpenClaw database was written by {version_text(db_release)}, newer than the openclaw CLI on PATH "
                f"({version_text(cli_release)}), which refuses it: update the CLI (occd reads the database either way)")
    # a 9.6 CLI on a 9.5 database: `agent`, `sessions list` refuse it ("stop active agents and run openclaw doctor
    # --fix"); `openclaw doctor --fix` migrates it, and so does the newer gateway when it starts
    return (f"the OpenClaw database was written by {version_text(db_release)}, older than the openclaw CLI on PATH "
            f"({version_text(cli_release)}), which refuses it until it is migrated: stop OpenClaw's agents and run "
            f"`openclaw doctor --fix` (restarting the {version_text(cli_release)} gateway migrates it too; occd reads it "
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
