"""`occd db ...` and `occd breaker ...`."""

from __future__ import annotations

import json
import time

from click.testing import CliRunner

from occd import paths
from occd.cli.main import cli
from occd.config import BreakerSettings
from occd.ledger import Ledger
from occd.ledger import migrate
from occd.ledger.migrate import HEAD_REVISION
from occd.policy import breaker as b


def run(*args):
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return r


def test_db_path_and_info_before_creation():
    r = run("db", "path")
    assert r.exit_code == 0 and r.output.strip() == str(paths.ledger_path())
    r = run("db", "info", "--json")
    out = json.loads(r.output)
    assert out["exists"] is False and out["headRevision"] == migrate.head_revision()
    assert not paths.ledger_path().exists()  # info never creates the ledger


def test_db_upgrade_creates_then_is_idempotent():
    r = run("db", "upgrade")
    assert r.exit_code == 0 and f"created at revision {HEAD_REVISION}" in r.output
    r = run("db", "upgrade", "--json")
    out = json.loads(r.output)
    assert out["success"] and out["fromRevision"] == out["toRevision"] == HEAD_REVISION and out["backupPath"] is None
    r = run("db", "info", "--json")
    out = json.loads(r.output)
    assert out["upToDate"] and out["tables"]["actions"] == 0 and out["journalMode"] == "wal"
    r = run("db", "info")
    assert f"Revision: {HEAD_REVISION} (up to date)" in r.output and "observations" in r.output


def test_db_upgrade_from_old_revision_reports_copy():
    led = Ledger.open()
    migrate.downgrade(led.engine, led.path, "0001")
    led.engine.dispose()
    r = run("db", "info", "--json")
    assert json.loads(r.output)["upToDate"] is False
    r = run("db", "upgrade")
    assert r.exit_code == 0 and f"upgraded: 0001 → {HEAD_REVISION}" in r.output and "Copy before the upgrade" in r.output
    assert len(migrate.backup_copies(led.path)) == 1


def test_breaker_status_and_reset():
    r = run("breaker", "status")
    assert r.exit_code == 0 and "every one is closed" in r.output
    now = time.time()
    with Ledger.open() as led:
        g = b.gate(b.BreakerState("main", "strip"), BreakerSettings(max_actions=1), [(now - 1, "ok")], now)
        led.set_breaker(g.state, g.transitions, now=now)
        led.set_breaker(b.BreakerState("ops", "rotate"), now=now)
    r = run("breaker", "status", "--json")
    out = json.loads(r.output)
    st = {(x["agent"], x["kind"]): x for x in out["breakers"]}
    assert st[("main", "strip")]["state"] == "open" and st[("main", "strip")]["retryInSeconds"] > 3500
    assert st[("ops", "rotate")]["state"] == "closed"
    assert out["transitions"][0]["to"] == "open"
    r = run("breaker", "status", "main")
    assert "open" in r.output and "ops" not in r.output and "1 actions in 30 min" in r.output
    r = run("breaker", "reset", "ops")
    assert "Nothing to reset" in r.output
    r = run("breaker", "reset", "main", "--json")
    assert json.loads(r.output)["reset"] == [{"agent": "main", "kind": "strip", "from": "open"}]
    with Ledger.open() as led:
        assert led.get_breaker("main", "strip").state == "closed"
        assert led.breaker_transitions("main")[0]["reason"] == "manual reset"


def test_busy_ledger_exits_75(monkeypatch):
    import sqlite3

    from occd.ledger import engine

    with Ledger.open() as led:
        led.set_breaker(b.BreakerState("main", "strip", state="open", opened_at=time.time()))
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_S", 0.1)
    other = sqlite3.connect(paths.ledger_path(), isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        r = CliRunner().invoke(cli, ["breaker", "reset", "--json"])
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert r.exit_code == 75, r.output
    assert json.loads(r.stdout)["error"]["code"] == "LEDGER_BUSY" and "locked" in r.stderr
