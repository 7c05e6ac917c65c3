"""An OpenClaw upgrade on the real releases (issue 13): a 2026.9.5 home with a real session, then the 2026.9.6 CLI
first on PATH, as an upgrade leaves it.

What the real releases do (seen on 2026-11-25): the 9.6 CLI refuses the 9.5 agent database (`agent --local`,
`sessions list`: "uses schema version 21; stop active agents and run openclaw doctor --fix"); `openclaw doctor --fix
--non-interactive` migrates it (agent schema 21 -> 23, global 17 -> 18), keeping the session; the 9.5 CLI then
refuses the migrated database ("uses newer schema version 18"). occd reads the database throughout and says, in
`occd doctor` and `occd status`, which CLI refuses it and what to do. (The 9.6 gateway migrates the database itself
when it starts, with a pre-migration backup: not run here, it costs a minute.)

Needs both releases chosen by OCCD_E2E_RELEASES (e2e_harness.releases)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from e2e_harness import OpenClawHome, message_text, releases, require_e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

OLD, NEW = "2026.9.5", "2026.9.6"


def _env(oc: OpenClawHome, binary: str) -> dict[str, str]:
    """The home's environment with `binary`'s folder first on PATH (the `openclaw` an upgrade leaves there)."""
    env = dict(oc.env)
    env.pop("OCCD_OPENCLAW_BIN", None)
    env["PATH"] = str(Path(binary).parent) + os.pathsep + env["PATH"]
    return env


def _run(env: dict, *argv: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


def _occd(env: dict, *args: str) -> subprocess.CompletedProcess:
    return _run(env, sys.executable, "-m", "occd", *args, timeout=120)


def _json(p: subprocess.CompletedProcess) -> dict:
    assert p.returncode == 0, (p.returncode, p.stdout[-1500:], p.stderr[-1500:])
    return json.loads(p.stdout)


def _db_checks(env: dict) -> dict[str, dict]:
    """`occd doctor --check openclaw-db --json`, by check name."""
    out = _json(_occd(env, "doctor", "--check", "openclaw-db", "--json"))
    return {c["name"]: c for c in out["checks"]}


def _session(env: dict) -> dict:
    """What occd reads of the one session: `list` and `info` figures."""
    (row,) = _json(_occd(env, "list", "--json"))["sessions"]
    info = _json(_occd(env, "info", "--json"))
    assert info["sessionId"] == row["id"]
    return {"id": row["id"], "key": row["key"], "tokens": row["tokens"], "compactions": row["compactions"],
            "size": row["size"], "messages": info["analysis"]["messages"], "toolCalls": info["analysis"]["toolCalls"],
            "contextTokens": info["context"]["tokens"]}


def _status_after_scan(env: dict) -> str:
    _json(_occd(env, "run", "--once", "--json"))
    p = _occd(env, "status")
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.skipif(not {OLD, NEW} <= set(releases("db")),
                    reason=f"OCCD_E2E_RELEASES does not choose both {OLD} and {NEW}")
def test_upgrade_9_5_to_9_6_is_named_and_the_session_survives_doctor_fix(tmp_path):
    require_e2e()
    with OpenClawHome(NEW, tmp_path / "new-install") as new:  # installs 9.6 into OC_CACHE when missing
        new_bin = new.oc
    with OpenClawHome(OLD, tmp_path / "home") as oc:
        old_env, new_env = _env(oc, oc.oc), _env(oc, new_bin)
        assert _run(new_env, "openclaw", "--version").stdout.split()[1] == NEW
        note = oc.workspace / "notes.txt"
        note.write_text("the secret is cardamom\n")
        oc.turn(f"READ {note}")
        oc.turn("plain question two")
        (listed,) = oc.sessions_list()["sessions"]

        # -- 9.5 on PATH: read, nothing to say
        checks = _db_checks(old_env)
        assert checks["openclaw-db:main"]["status"] == "ok"
        assert "schema 21 (2026.9.5)" in checks["openclaw-db:main"]["detail"]
        assert not any(n.startswith("openclaw-cli") for n in checks), checks
        before = _session(old_env)
        assert (before["id"], before["key"], before["tokens"]) == (listed["sessionId"], listed["key"],
                                                                   listed["totalTokens"])
        assert before["messages"] == 6 and before["toolCalls"] == 1  # READ: call, result, answer; then a question

        # -- the upgrade: 9.6 first on PATH. Its CLI refuses the 9.5 database (why occd's warning matters)
        p = _run(new_env, "openclaw", "agent", "--local", "--agent", "main", "--message", "plain question three",
                 "--json")
        assert p.returncode != 0
        said = p.stdout + p.stderr
        assert "uses schema version 21" in said and "openclaw doctor --fix" in said, said[-1500:]
        n_requests = len(oc.requests())

        # occd names it (doctor, and status after a scan), with what to do, and still reads the database
        checks = _db_checks(new_env)
        assert checks["openclaw-db:main"]["status"] == "ok"
        assert "schema 21 (2026.9.5)" in checks["openclaw-db:main"]["detail"]  # the refused turn changed nothing
        mis = checks["openclaw-cli:main"]
        assert mis["status"] == "warn" and (mis["database"], mis["cli"]) == (OLD, NEW)
        for words in ("written by 2026.9.5, older than the openclaw CLI on PATH (2026.9.6)", "refuses it",
                      "`openclaw doctor --fix`"):
            assert words in mis["detail"], mis["detail"]
        p = _occd(new_env, "doctor", "--check", "openclaw-db")
        assert p.returncode == 0 and "older than the openclaw CLI on PATH (2026.9.6)" in p.stdout, p.stdout
        status = _status_after_scan(new_env)
        line = next(ln for ln in status.splitlines() if "older than the openclaw CLI" in ln)
        assert "main" in line and "2026.9.5" in line and "openclaw doctor --fix" in line, status
        assert _session(new_env) == before

        # -- the fix: 9.6's own doctor, without prompts
        p = _run(new_env, "openclaw", "doctor", "--fix", "--non-interactive", timeout=300)
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
        checks = _db_checks(new_env)
        assert checks["openclaw-db:main"]["status"] == "ok"
        assert "schema 23 (2026.9.6)" in checks["openclaw-db:main"]["detail"]
        assert not any(n.startswith("openclaw-cli") for n in checks), checks
        status = _status_after_scan(new_env)
        assert "older than" not in status and "doctor --fix" not in status and "0 errors" in status, status
        assert _session(new_env) == before  # same session, messages, tokens: the migration kept them

        # a real 9.6 turn now works, on the same session, and the model is sent its history
        p = _run(new_env, "openclaw", "agent", "--local", "--agent", "main", "--message", "plain question four",
                 "--json")
        assert p.returncode == 0, p.stderr[-2000:]
        reqs = oc.requests()[n_requests:]
        assert len(reqs) == 1
        sent = [message_text(m) for m in reqs[0]["body"]["messages"]]
        assert any("plain question two" in t for t in sent) and any("plain question four" in t for t in sent)
        after = _session(new_env)
        assert after["id"] == before["id"] and after["messages"] == before["messages"] + 2
        listed_new = json.loads(_run(new_env, "openclaw", "sessions", "list", "--json").stdout)["sessions"]
        assert [(s["sessionId"], s["totalTokens"]) for s in listed_new] == [(after["id"], after["tokens"])]

        # -- back to the 9.5 CLI (a downgrade, or an old install first on PATH): it refuses the newer database
        p = _run(old_env, "openclaw", "sessions", "list", "--json")
        assert p.returncode != 0 and "newer schema version" in p.stdout + p.stderr, (p.stdout + p.stderr)[-1500:]
        mis = _db_checks(old_env)["openclaw-cli:main"]
        assert mis["status"] == "warn" and (mis["database"], mis["cli"]) == (NEW, OLD)
        assert "newer than the openclaw CLI on PATH (2026.9.5)" in mis["detail"] and "update the CLI" in mis["detail"]
        assert _session(old_env) == after
