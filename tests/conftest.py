"""Test isolation and shared fixtures.

Every test runs with HOME, XDG dirs, OCCD_HOME and OPENCLAW_STATE_DIR pointing into its own tmp_path:
nothing a test does can reach the real home directory, the real ledger, or a real OpenClaw state.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("OCCD_SHARED_DIR", REPO.parent / "shared"))
ORACLE_SCRIPTS = SHARED / "oracle"
E2E_DIR = SHARED / "openclaw-e2e"
IN_CI = bool(os.environ.get("CI"))


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
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
        if (var.startswith("OCCD_") and var not in ("OCCD_HOME", "OCCD_SHARED_DIR")) or var in (
            "CLAWDBOT_STATE_DIR", "OPENCLAW_HOME", "OPENCLAW_CONFIG_PATH", "CLAWDBOT_CONFIG_PATH",
            "NOTIFY_SOCKET", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENCLAW_GATEWAY_TOKEN", "OPENCLAW_GATEWAY_PORT"):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    yield home


def _oracle_node_modules() -> Path | None:
    for cand in [os.environ.get("ORACLE_DIR"), str(ORACLE_SCRIPTS)]:
        if cand and (Path(cand) / "node_modules" / "@mariozechner" / "pi-coding-agent").is_dir():
            return Path(cand)
    return None


class Oracle:
    """OpenClaw's own transcript library, run through ../shared/oracle (node)."""

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
    nm = _oracle_node_modules()
    if nm is None or shutil.which("node") is None:
        if IN_CI:
            pytest.fail("the transcript oracle is not installed (scripts/test.sh installs it with npm ci)")
        pytest.skip("transcript oracle not installed (run scripts/test.sh once)")
    return Oracle(nm)
