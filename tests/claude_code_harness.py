"""Run the real Claude Code CLI offline (../shared/claude-code-e2e) from tests.

`ClaudeCodeHome(version, root, cwd)` prepares an isolated home with setup.sh (installs Claude Code and Node 24
from the npm registry into CC_CACHE on first use), starts the fake Anthropic API (its working directory is
`cwd`, which is what it names in tool calls), and runs `claude -p` there. Claude Code writes its own session
files under `home/.claude/projects/`. `close()` stops the fake API by its pid.

    with ClaudeCodeHome("2.1.330", tmp_path, repo) as cc:   # after require_claude_code()
        sid = cc.run("hello")["session_id"]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from conftest import IN_CI, SHARED
from e2e_harness import free_port

CC_DIR = SHARED / "claude-code-e2e"
CC_VERSION = "2.1.330"
REAL_HOME = os.environ.get("HOME", "/root")
CC_CACHE = os.environ.get("CC_CACHE") or str(Path(os.environ.get("XDG_CACHE_HOME") or Path(REAL_HOME) / ".cache")
                                             / "occd-claude-code-e2e")


def claude_code_available(version: str = CC_VERSION) -> str | None:
    """None when the Claude Code e2e tests can run here, else why not."""
    if not (CC_DIR / "setup.sh").exists():
        return f"{CC_DIR} is missing"
    if not IN_CI and not (Path(CC_CACHE) / f"cc-{version}" / "node_modules" / ".bin" / "claude").exists():
        return f"Claude Code {version} is not installed in {CC_CACHE} (CI installs it; set CC_CACHE)"
    return None


def require_claude_code(version: str = CC_VERSION) -> None:
    """Skip when the real Claude Code cannot run here; in CI (which installs it on first use) fail instead."""
    import pytest

    why = claude_code_available(version)
    if why:
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)


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

    def __enter__(self):
        script = (f'export CC_CACHE="{CC_CACHE}"; source "{CC_DIR}/setup.sh" {self.version} "{self.home}" {self.port} '
                  '>/dev/null 2>&1 || exit 3; echo "FAKE_PID=$FAKE_PID"; env -0')
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "OPENCLAW_"))}
        if self.fake_rating:
            env["FAKE_RATING"] = self.fake_rating
        p = subprocess.run(["bash", "-c", script], capture_output=True, timeout=900, env=env, cwd=str(self.cwd))
        if p.returncode != 0:
            raise RuntimeError(f"Claude Code {self.version} setup failed (exit {p.returncode}): {p.stderr[-500:]!r}")
        first, _, rest = p.stdout.partition(b"\n")
        self.fake_pid = int(first.decode().split("=", 1)[1])
        for item in rest.split(b"\0"):
            if b"=" in item:
                k, v = item.decode(errors="replace").split("=", 1)
                self.env[k] = v
        self.env["OCCD_HOME"] = str(self.root / "occd-home")
        self.env.pop("CLAUDECODE", None)
        self.env.pop("CLAUDE_CODE_SESSION_ID", None)
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if self.fake_pid:
            try:
                os.kill(self.fake_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            self.fake_pid = None

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
