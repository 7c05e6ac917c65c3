"""Run real OpenClaw releases offline from tests.

`OpenClawHome(version, root)` prepares an isolated OpenClaw home (tests/e2e/install.py installs the release and
Node 24 from the npm registry into OC_CACHE on first use; tests/e2e/openclaw.json is its config), starts the
scripted model server (tests/e2e/fake_model_server.py), and runs real agent turns.
Every request OpenClaw sends to the model is in `requests()` (log file: `fake_log`). `start_gateway()` runs a
foreground gateway on a free port (database era: the gateway calls occd makes). `close()` stops what it started,
by pid (the gateway process and its children, then the model server).

    with OpenClawHome("2026.9.6", tmp_path) as oc:   # after require_e2e()
        oc.turn("hello")
        oc.sessions_list()["sessions"]

Careful with the gateway: `/proc/<pid>/comm` of OpenClaw's gateway reads "openclaw-gatewa" (15 characters).

Which releases the e2e tests run is one setting: OCCD_E2E_RELEASES (comma- or space-separated; default
DEFAULT_RELEASES, every storage generation users run: the file era's first and last lines, the database era's
schema 19 (8.1–9.4), 21 (9.5) and 23 (9.6)). `releases("file")` / `releases("db")` are the ones of an era.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import install
from conftest import E2E_DIR, IN_CI, missing_tool

OC_CACHE = str(install.oc_cache())


DEFAULT_RELEASES = ("2026.7.1", "2026.7.35", "2026.8.1", "2026.9.5", "2026.9.6")


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("-")[0].split(".")[:3])


def releases(era: str | None = None) -> list[str]:
    """The releases chosen by OCCD_E2E_RELEASES (default DEFAULT_RELEASES), oldest first; `era` "file" (up to
    2026.7.x) or "db" (2026.8.1 and later) keeps those of one storage era."""
    raw = os.environ.get("OCCD_E2E_RELEASES")
    chosen = [v for v in (raw or "").replace(",", " ").split() if v] or list(DEFAULT_RELEASES)
    for v in chosen:
        try:
            version_tuple(v)
        except ValueError:
            raise ValueError(f"OCCD_E2E_RELEASES: {v!r} is not an OpenClaw release (e.g. 2026.9.6)") from None
    chosen = sorted(dict.fromkeys(chosen), key=version_tuple)
    if era == "file":
        return [v for v in chosen if version_tuple(v) < (2026, 8, 1)]
    if era == "db":
        return [v for v in chosen if version_tuple(v) >= (2026, 8, 1)]
    return chosen


def edge_releases(era: str) -> list[str]:
    """The first and the newest release of an era among releases(era): for tests whose path is the same on every
    schema of the era (the gateway's calls), to keep the full run under its time budget. OCCD_E2E_RELEASES, when
    set, is run whole."""
    chosen = releases(era)
    if os.environ.get("OCCD_E2E_RELEASES") or len(chosen) <= 2:
        return chosen
    return [chosen[0], chosen[-1]]


def newest_release(era: str) -> list[str]:
    """The newest release of an era among releases(era) (OCCD_E2E_RELEASES, when set, is run whole): for a
    long test whose path other tests already run on the era's older releases."""
    chosen = releases(era)
    return chosen if os.environ.get("OCCD_E2E_RELEASES") else chosen[-1:]


def header_version(release: str) -> int:
    """A transcript header's version: 3 up to 2026.9.2 (file era included), 4 from 2026.9.3 on."""
    return 3 if version_tuple(release) < (2026, 9, 3) else 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OpenClawHome:
    def __init__(self, version: str, root: Path):
        self.version = version
        self.root = root
        self.home = root / "oc-home"
        self.port = free_port()
        self.env: dict[str, str] = {}
        self.fake_pid: int | None = None
        self.server: subprocess.Popen | None = None
        self.gateway: subprocess.Popen | None = None
        self.gateway_port: int | None = None

    def __enter__(self):
        why = e2e_available(self.version)
        if why:
            missing_tool(why)
        try:
            oc, node_bin = install.openclaw(self.version)
        except install.InstallError as e:
            missing_tool(f"OpenClaw {self.version}: {e}")
        state = self.home / ".openclaw"
        self.env = {k: v for k, v in os.environ.items() if k != "OPENCLAW_STATE_DIR"}
        self.env.update({
            "PATH": f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(self.home),
            "OPENCLAW_STATE_DIR": str(state), "OPENCLAW_CONFIG_PATH": str(state / "openclaw.json"), "NO_COLOR": "1",
            "OPENCLAW_NO_UPDATE_CHECK": "1", "FAKE_LOG": str(self.home / "model-requests.jsonl"), "OC": str(oc),
            "OC_CACHE": OC_CACHE, "OCCD_HOME": str(self.root / "occd-home")})
        self.state_dir = state
        self.workspace = self.home / "workspace"
        self.workspace.mkdir(parents=True, exist_ok=True)
        state.mkdir(parents=True, exist_ok=True)
        # the model at our scripted server; a gateway port of our own (OpenClaw's default, 18789, would be shared by
        # parallel tests: a CLI call could then reach another test's gateway)
        cfg = json.loads((E2E_DIR / "openclaw.json").read_text()
                         .replace("WORKSPACE", str(self.workspace)).replace("MODEL_PORT", str(self.port)))
        self.gateway_port = free_port()
        cfg["gateway"]["port"] = self.gateway_port
        (state / "openclaw.json").write_text(json.dumps(cfg, indent=2))
        self.server = start_server([sys.executable, str(E2E_DIR / "fake_model_server.py"), str(self.port),
                                    self.env["FAKE_LOG"]], self.port, self.env)
        self.fake_pid = self.server.pid
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def fake_log(self) -> Path:
        return Path(self.env["FAKE_LOG"])

    def start_gateway(self, timeout: float = 180) -> int:
        """`openclaw gateway run` on this home's own port (in openclaw.json, so CLI calls find it); waits until
        `gateway call health` answers. Returns the port."""
        def spawn() -> subprocess.Popen:
            log = open(self.root / "gateway.log", "ab")
            try:
                return subprocess.Popen([self.oc, "gateway", "run", "--port", str(self.gateway_port)], env=self.env,
                                        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            finally:
                log.close()

        self.gateway = spawn()
        retries = 2  # on a loaded machine a gateway can miss its 5 s start-up lease deadline and exit: start again
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.gateway.poll() is not None:
                if retries and "did not become ready" in (self.root / "gateway.log").read_text(errors="replace"):
                    retries -= 1
                    self.gateway = spawn()
                    continue
                raise RuntimeError(f"gateway exited with {self.gateway.returncode}: see {self.root / 'gateway.log'}")
            if self.openclaw("gateway", "call", "health", "--json", timeout=60).returncode == 0:
                return self.gateway_port
            time.sleep(1)
        raise RuntimeError("gateway did not come up")

    def stop_gateway(self) -> None:
        """SIGTERM to the gateway and every process under it (by pid), wait, then SIGKILL what is left."""
        if self.gateway is None:
            return
        pids = [self.gateway.pid, *_descendants(self.gateway.pid)]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            self.gateway.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.gateway.poll() is None:
            self.gateway.wait(timeout=10)
        self.gateway = None

    def close(self) -> None:
        self.stop_gateway()
        stop_server(self.server)
        self.server = self.fake_pid = None

    @property
    def oc(self) -> str:
        return self.env["OC"]

    def openclaw(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
        return subprocess.run([self.oc, *args], capture_output=True, text=True, timeout=timeout, env=self.env,
                              stdin=subprocess.DEVNULL)

    def turn(self, message: str, agent: str = "main") -> dict:
        p = self.openclaw("agent", "--local", "--agent", agent, "--message", message, "--json")
        assert p.returncode == 0, f"openclaw agent failed: {p.stderr[-2000:]}"
        out = p.stdout
        return json.loads(out[out.find("{"):])

    def sessions_list(self, agent: str = "main") -> dict:
        p = self.openclaw("sessions", "list", "--json", "--agent", agent)
        if p.returncode != 0:
            p = self.openclaw("sessions", "list", "--json")
        assert p.returncode == 0, p.stderr[-2000:]
        return json.loads(p.stdout[p.stdout.find("{"):])

    def occd(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        import sys

        return subprocess.run([sys.executable, "-m", "occd", *args], capture_output=True, text=True, timeout=timeout,
                              env=self.env)

    def requests(self) -> list[dict]:
        log = Path(self.env["FAKE_LOG"])
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return out
    for c in map(int, children):
        out += [c, *_descendants(c)]
    return out


def start_server(cmd: list[str], port: int, env: dict, cwd: Path | None = None,
                 timeout: float = 20) -> subprocess.Popen:
    """Start a scripted server and wait until it accepts connections on 127.0.0.1:port."""
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if p.poll() is not None:
            raise RuntimeError(f"{cmd[1]} exited with {p.returncode} (port {port} taken?)")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return p
        except OSError:
            time.sleep(0.1)
    p.kill()
    raise RuntimeError(f"{cmd[1]} did not listen on port {port} within {timeout:.0f} s")


def stop_server(p: subprocess.Popen | None) -> None:
    """SIGTERM to a scripted server started by start_server, and reap it."""
    if p is None or p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=10)


def require_e2e(version: str | None = None) -> None:
    """Skip (counted as a missing tool) when a real OpenClaw cannot run here; with CI=true fail instead."""
    why = e2e_available(version)
    if why:
        missing_tool(why)


def e2e_available(version: str | None = None) -> str | None:
    """None when a real OpenClaw can run here (`version`, or without one any release: OpenClawHome checks its
    own), else why not. Outside CI only what is installed counts (scripts/test.sh installs every release); with
    CI=true a missing release is installed on first use, so only npm must be there."""
    if version:
        installed = install.openclaw_bin(version).exists()
    else:
        installed = any(install.openclaw_bin(v).exists() for v in releases())
    if installed:
        return None
    if IN_CI:
        return install.npm_missing()
    return (f"OpenClaw {version or 'releases'}: not installed in {OC_CACHE} (scripts/test.sh installs them)")


def message_text(msg: dict) -> str:
    """The text of a chat-completions message as the fake model server logged it (string or content parts)."""
    c = msg.get("content")
    if isinstance(c, str):
        return c
    return " ".join(p.get("text", "") for p in c or [] if isinstance(p, dict))
