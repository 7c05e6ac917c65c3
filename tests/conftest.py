"""Test isolation and shared fixtures.

Every test runs with HOME, XDG dirs, OCCD_HOME and OPENCLAW_STATE_DIR pointing into its own tmp_path:
nothing a test does can reach the real home directory, the real ledger, or a real OpenClaw state.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
ORACLE_SCRIPTS = TESTS / "oracle"     # OpenClaw's transcript loader, run by node (tests/oracle/README.md)
E2E_DIR = TESTS / "e2e"               # the scripted model servers, OpenClaw's test config, the installer
IN_CI = bool(os.environ.get("CI")) and os.environ.get("CI", "").lower() not in ("0", "false", "no")
MISSING = "[tool missing] "           # the reason of every skip for a tool the machine lacks (see missing_tool)
_MISSING_KEY = pytest.StashKey[dict]()

sys.path.insert(0, str(E2E_DIR))
import install  # noqa: E402  (tests/e2e/install.py: installs node, OpenClaw, Claude Code, the oracle into caches)


def missing_tool(what: str):
    """A test cannot run because `what` (node, npm, root, an OpenClaw release, the registry) is missing here: a
    skip with that reason, counted in the run's last line; with CI=true a failure (CI must run every test)."""
    if IN_CI:
        pytest.fail(f"CI=true and this test cannot run: {what}", pytrace=False)
    pytest.skip(MISSING + what)


def pytest_collection_modifyitems(config, items):
    """A test that uses the `oracle` fixture runs node and OpenClaw's loader: it carries the oracle mark (so the
    quick subset, `-m "not e2e and not oracle and not systemd and not slow"`, leaves it out) without each file
    having to say so."""
    for item in items:
        if "oracle" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("oracle"):
            item.add_marker(pytest.mark.oracle)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Count the tests that could not run for a missing tool; the line itself comes last (pytest_unconfigure)."""
    whats: dict[str, int] = {}
    for rep in terminalreporter.stats.get("skipped", []):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr or "")
        if MISSING in reason:
            what = reason.split(MISSING, 1)[1].split(":")[0].strip()
            whats[what] = whats.get(what, 0) + 1
    config.stash[_MISSING_KEY] = whats


def pytest_unconfigure(config):
    """One line at the very end of the run: how many tests could not run for a missing tool, and which tools."""
    whats = config.stash.get(_MISSING_KEY, {})
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if whats and reporter is not None:
        n = sum(whats.values())
        detail = "; ".join(f"{w} ({k})" for w, k in sorted(whats.items(), key=lambda x: -x[1]))
        reporter.write_line(f"{n} test{'s' if n != 1 else ''} could not run, a tool is missing: {detail}. "
                            "`bash scripts/test.sh` installs what it can; CI=true fails them instead.",
                            yellow=True, bold=True)


@pytest.fixture(autouse=True)
def isolated_env(request, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var, sub in [("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"),
                     ("XDG_STATE_HOME", ".local/state"), ("XDG_CACHE_HOME", ".cache")]:
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("OCCD_HOME", str(tmp_path / "occd-home"))
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(home / ".openclaw"))
    for var in list(os.environ):
        if (var.startswith("OCCD_") and var != "OCCD_HOME") or var in (
            "CLAWDBOT_STATE_DIR", "OPENCLAW_HOME", "OPENCLAW_CONFIG_PATH", "CLAWDBOT_CONFIG_PATH",
            "NOTIFY_SOCKET", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENCLAW_GATEWAY_TOKEN", "OPENCLAW_GATEWAY_PORT"):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    if request.node.get_closest_marker("e2e") is None and request.node.get_closest_marker("first_sight") is None:
        # Unit tests build a state and act on it at once: its sessions count as seen running (policy.act_on_unseen).
        # The default (a session occd never saw run is history) is tested where a test is marked first_sight, and
        # by every e2e test (real OpenClaw turns while occd watches).
        monkeypatch.setenv("OCCD_POLICY__ACT_ON_UNSEEN", "true")
    yield home


class Oracle:
    """OpenClaw's own transcript library (@mariozechner/pi-coding-agent), run through tests/oracle's scripts by node;
    its packages are installed from tests/oracle's lock file into ORACLE_DIR (tests/e2e/install.py)."""

    def __init__(self, node_modules: Path):
        self.env = {**os.environ, "ORACLE_DIR": str(node_modules)}

    def _run(self, script: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(["node", str(ORACLE_SCRIPTS / script), *map(str, args)], capture_output=True,
                              text=True, env=self.env, timeout=timeout)

    def make(self, out_dir: Path, *options: str, **kw) -> Path:
        """Write a realistic transcript with OpenClaw's own writer; returns its path."""
        opts = list(options)
        for k, v in kw.items():
            opts += [f"--{k.replace('_', '-')}", str(v)]
        p = self._run("make-session.mjs", out_dir, *opts)
        assert p.returncode == 0, p.stderr
        return Path(json.loads(p.stdout.strip().splitlines()[-1])["file"])

    def check(self, path: Path) -> dict:
        """What OpenClaw's loader makes of the file (ok, brokenParent, orphanResults, roles, ...)."""
        p = self._run("check-session.mjs", path)
        return json.loads(p.stdout.strip().splitlines()[-1])

    def compare(self, original: Path, cleaned: Path, clone: bool = False) -> dict:
        """Is the conversation a person sees unchanged? (ok, diffs, toolCalls, entries)"""
        args = (["--clone"] if clone else []) + [original, cleaned]
        p = self._run("compare-sessions.mjs", *args)
        return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def oracle() -> Oracle:
    if shutil.which("node") is None:
        missing_tool("node: the transcript oracle runs OpenClaw's loader with it")
    if not install.oracle_ready():
        if not IN_CI:
            missing_tool(f"the transcript oracle: not installed in {install.oracle_dir()} (scripts/test.sh installs it)")
        try:
            install.oracle()
        except install.InstallError as e:
            missing_tool(f"the transcript oracle: {e}")
    return Oracle(install.oracle_dir())
