"""Issue 23, Speed: read-only commands import nothing but the settings eagerly (pydantic-settings stays): no rich,
no pure-Python JSON5 parser for a plain-JSON OpenClaw config,
no SQLAlchemy/sqlmodel/alembic, no scheduler, no model client. Run as a user runs them, in fresh processes on the
demo state after a daemon cycle. (bench/bench_cli.py times them against `import pydantic_settings`.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.test_cli_daily import _demo_after_a_cycle

HEAVY = ("rich", "sqlalchemy", "sqlmodel", "alembic", "apscheduler", "litellm", "mcp", "httpx", "pygments", "json5",
         "prometheus_client")
READ = [["status"], ["status", "--json"], ["status", "--rotations"], ["history"], ["db", "info"], ["list"],
        ["list", "--json"], ["info"], ["info", "-v"], ["sessions"], ["select", "--task", "fix the webhook", "--no-llm"],
        ["breaker", "status"], ["config", "show"], ["stats"], ["backups"], ["lean", "status"], ["doctor"]]


@pytest.mark.slow
def test_read_only_commands_import_nothing_heavy(isolated_env, monkeypatch, tmp_path):
    _demo_after_a_cycle(isolated_env, monkeypatch)
    code = ("import sys\nfrom occd.cli.main import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            f"print('HEAVY', sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})), file=sys.stderr)")
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    bad = []
    for args in READ:
        p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, env=env,
                           cwd=tmp_path)
        line = [x for x in p.stderr.splitlines() if x.startswith("HEAVY")]
        if line != ["HEAVY []"]:
            bad.append((args, line or p.stderr[-300:]))
    assert not bad, bad
