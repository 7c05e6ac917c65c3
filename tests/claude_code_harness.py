"""Run the real Claude Code CLI offline from tests.

`ClaudeCodeHome(version, root, cwd)` prepares an isolated home (tests/e2e/install.py installs Claude Code and
Node 24 from the npm registry into CC_CACHE on first use), starts the scripted Anthropic API
(tests/e2e/fake_anthropic.py; its working directory is `cwd`, which is what it names in tool calls), and runs
`claude -p` there. Claude Code writes its own session
files under `home/.claude/projects/`. `close()` stops the fake API by its pid.

    with ClaudeCodeHome("2.1.330", tmp_path, repo) as cc:   # after require_claude_code()
        sid = cc.run("hello")["session_id"]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import install
from conftest import E2E_DIR, IN_CI, missing_tool
from e2e_harness import free_port, start_server, stop_server

CC_DIR = E2E_DIR  # fake_anthropic.py
CC_VERSION = install.CLAUDE_CODE_VERSION
CC_CACHE = str(install.cc_cache())


def claude_code_available(version: str = CC_VERSION) -> str | None:
    """None when the Claude Code e2e tests can run here (installed, or CI installs it on first use with npm),
    else why not."""
    if install.claude_bin(version).exists():
        return None
    if IN_CI:
        return install.npm_missing()
    return f"Claude Code {version}: not installed in {CC_CACHE} (scripts/test.sh installs it)"


def require_claude_code(version: str = CC_VERSION) -> None:
    """Skip (counted as a missing tool) when the real Claude Code cannot run here; with CI=true fail instead."""
    why = claude_code_available(version)
    if why:
        missing_tool(why)


class ClaudeCodeHome:
    def __init__(self, version: str, root: Path, cwd: Path, *, fake_rating: str | None = None):
        self.version = version
        self.root = root
        self.home = root / "cc-home"
        self.cwd = cwd
        self.port = free_port()
        self.fake_rating = fake_rating
        self.env: dict[str, str] = {}
        self.fake_pid: int | None = None
        self.server: subprocess.Popen | None = None

    def __enter__(self):
        require_claude_code(self.version)
        try:
            claude, node_bin = install.claude_code(self.version)
        except install.InstallError as e:
            missing_tool(f"Claude Code {self.version}: {e}")
        self.home.mkdir(parents=True, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("CLAUDE", "OPENCLAW_")) and k != "CLAUDECODE"}
        self.env.update({
            "PATH": f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(self.home),
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{self.port}", "ANTHROPIC_API_KEY": "sk-ant-test",
            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE": str(claude),
            "FAKE_LOG": str(self.home / "anthropic-requests.jsonl"), "OCCD_HOME": str(self.root / "occd-home")})
        server_env = {**self.env, **({"FAKE_RATING": self.fake_rating} if self.fake_rating else {})}
        self.server = start_server([sys.executable, str(E2E_DIR / "fake_anthropic.py"), str(self.port)], self.port,
                                   server_env, cwd=self.cwd)
        self.fake_pid = self.server.pid
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        stop_server(self.server)
        self.server = self.fake_pid = None

    @property
    def claude(self) -> str:
        return self.env["CLAUDE"]

    @property
    def api_base(self) -> str:
        return self.env["ANTHROPIC_BASE_URL"]

    def run(self, prompt: str, *args: str, timeout: float = 180) -> dict:
        """`claude -p PROMPT --output-format json ARGS` in cwd; its JSON result."""
        p = subprocess.run([self.claude, "-p", prompt, "--output-format", "json", *args], capture_output=True,
                           text=True, timeout=timeout, env=self.env, cwd=str(self.cwd), stdin=subprocess.DEVNULL)
        assert p.returncode == 0, f"claude failed ({p.returncode}): {p.stderr[-2000:]} {p.stdout[-2000:]}"
        return json.loads(p.stdout[p.stdout.find("{"):])

    def start(self, prompt: str, *args: str) -> subprocess.Popen:
        """`claude -p` in the background (a run to catch while busy)."""
        return subprocess.Popen([self.claude, "-p", prompt, "--output-format", "json", *args], env=self.env,
                                cwd=str(self.cwd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([self.claude, *args], capture_output=True, text=True, timeout=timeout, env=self.env,
                              cwd=str(self.cwd), stdin=subprocess.DEVNULL)

    def occd(self, *args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
        import sys

        return subprocess.run([sys.executable, "-m", "occd", *args], capture_output=True, text=True,
                              timeout=timeout, env={**self.env, **(env or {})}, cwd=str(self.cwd))

    @property
    def projects(self) -> Path:
        return self.home / ".claude" / "projects"

    def session_file(self, sid: str) -> Path:
        (p,) = list(self.projects.glob(f"*/{sid}.jsonl"))
        return p
