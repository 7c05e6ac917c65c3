"""Installing occd as a background service: a systemd user unit on Linux, a LaunchAgent on macOS.

One code path renders both from the templates shipped in the wheel (occd.systemd, occd.launchd) and returns a
Plan (files to write, commands to run, notes); `--dry-run` prints the plan, otherwise it is carried out through
a runner that tests replace.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from xml.sax.saxutils import escape

from occd import paths
from occd.errors import OccdError

UNIT_NAME = "occd.service"
LABEL = "io.occd.daemon"


@dataclass
class Plan:
    platform: str
    files: dict[Path, str] = field(default_factory=dict)
    remove: list[Path] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"platform": self.platform, "files": {str(k): v for k, v in self.files.items()},
                "remove": [str(p) for p in self.remove], "commands": [shlex.join(c) for c in self.commands],
                "notes": self.notes}


def detect_platform() -> str:
    return "macos" if sys.platform == "darwin" else "linux"


def occd_command() -> list[str]:
    """The absolute command that starts this installed occd (a service has no PATH to rely on)."""
    exe = shutil.which("occd")
    if exe:
        return [str(Path(exe).resolve())]
    argv0 = Path(sys.argv[0])
    if argv0.name == "occd" and argv0.exists():
        return [str(argv0.resolve())]
    return [str(Path(sys.executable).resolve()), "-m", "occd"]


def template(package: str, name: str) -> str:
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


def parse_interval(text: str | None) -> int | None:
    if not text:
        return None
    from occd.cli.daemon_cmd import parse_duration

    return parse_duration(text)


def service_env(act: bool, interval: int | None) -> dict[str, str]:
    env = {}
    if act:
        env["OCCD_POLICY__MODE"] = "act"
    if interval:
        env["OCCD_DAEMON__SCAN_INTERVAL_SECONDS"] = str(interval)
    for var in ("OCCD_HOME", "OCCD_CONFIG", "OPENCLAW_STATE_DIR", "OPENCLAW_CONFIG_PATH"):
        if os.environ.get(var):
            env[var] = os.environ[var]
    return env


def systemd_unit_path(home: Path) -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    return Path(base) / "systemd" / "user" / UNIT_NAME


def render_systemd(command: list[str], env_file: Path, env: dict[str, str]) -> str:
    def q(s: str) -> str:  # systemd quoting for ExecStart/Environment values
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"' if any(c in s for c in ' "\\') else s

    environment = "\n".join(f"Environment={q(f'{k}={v}')}" for k, v in sorted(env.items()))
    text = template("occd.systemd", "occd.service")
    return (text.replace("{exec_start}", " ".join(q(c) for c in command + ["run"]))
            .replace("{env_file}", str(env_file)).replace("{environment}", environment))


def render_plist(command: list[str], env: dict[str, str], home: Path, log_dir: Path) -> str:
    args = "\n".join(f"    <string>{escape(c)}</string>" for c in command + ["run"])
    base_env = {"PATH": "/usr/local/bin:/opt/homebrew/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(home), **env}
    environment = "\n".join(f"    <key>{escape(k)}</key>\n    <string>{escape(v)}</string>" for k, v in sorted(base_env.items()))
    text = template("occd.launchd", f"{LABEL}.plist")
    return (text.replace("{label}", LABEL).replace("{program_arguments}", args)
            .replace("{environment}", environment).replace("{log_dir}", escape(str(log_dir))))


def install_plan(platform: str | None = None, *, act: bool = False, interval: str | None = None,
                 home: Path | None = None, uid: int | None = None) -> Plan:
    platform = platform or detect_platform()
    home = home or Path(os.environ.get("HOME") or Path.home())
    env = service_env(act, parse_interval(interval))
    cmd = occd_command()
    if platform == "linux":
        unit = systemd_unit_path(home)
        env_file = paths.config_file().parent / "occd.env"
        plan = Plan("linux", files={unit: render_systemd(cmd, env_file, env)})
        if not env_file.exists():
            plan.files[env_file] = template("occd.systemd", "occd.env")
        plan.commands = [["systemctl", "--user", "daemon-reload"], ["systemctl", "--user", "enable", "--now", UNIT_NAME]]
        plan.notes = [f"API keys for relevance scoring go in {paths.display_path(env_file)} (mode 0600).",
                      "On a headless machine, run `loginctl enable-linger $USER` so the service runs without a login.",
                      "Check it with `occd service status` and `occd status`."]
        return plan
    if platform == "macos":
        uid = os.getuid() if uid is None else uid
        plist = home / "Library" / "LaunchAgents" / f"{LABEL}.plist"
        plan = Plan("macos", files={plist: render_plist(cmd, env, home, paths.log_dir())})
        plan.commands = [["launchctl", "bootout", f"gui/{uid}/{LABEL}"],
                         ["launchctl", "bootstrap", f"gui/{uid}", str(plist)]]
        plan.notes = [f"Logs: {paths.display_path(paths.log_dir())}.", "Check it with `occd service status`."]
        return plan
    raise OccdError(f"Unsupported platform '{platform}'", "use --platform linux or macos", code="USAGE")


def uninstall_plan(platform: str | None = None, *, home: Path | None = None, uid: int | None = None) -> Plan:
    platform = platform or detect_platform()
    home = home or Path(os.environ.get("HOME") or Path.home())
    if platform == "linux":
        return Plan("linux", remove=[systemd_unit_path(home)],
                    commands=[["systemctl", "--user", "disable", "--now", UNIT_NAME],
                              ["systemctl", "--user", "daemon-reload"]])
    uid = os.getuid() if uid is None else uid
    return Plan("macos", remove=[home / "Library" / "LaunchAgents" / f"{LABEL}.plist"],
                commands=[["launchctl", "bootout", f"gui/{uid}/{LABEL}"]])


def status_command(platform: str | None = None, uid: int | None = None) -> list[str]:
    if (platform or detect_platform()) == "linux":
        return ["systemctl", "--user", "status", "--no-pager", UNIT_NAME]
    return ["launchctl", "print", f"gui/{os.getuid() if uid is None else uid}/{LABEL}"]


def logs_command(platform: str | None = None, lines: int = 100, follow: bool = False) -> list[str]:
    if (platform or detect_platform()) == "linux" and shutil.which("journalctl"):
        return ["journalctl", "--user", "-u", UNIT_NAME, "-n", str(lines), "--no-pager"] + (["-f"] if follow else [])
    return ["tail", "-n", str(lines)] + (["-f"] if follow else []) + [str(paths.log_dir() / "occd.log")]


def run_command(cmd: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return subprocess.CompletedProcess(cmd, 127, "", f"{cmd[0]}: command not found")


def execute(plan: Plan, runner=run_command, *, tolerate_first_failure: bool = False) -> list[subprocess.CompletedProcess]:
    for path, text in plan.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.chmod(tmp, 0o600 if path.suffix == ".env" else 0o644)
        os.replace(tmp, path)
    for path in plan.remove:
        path.unlink(missing_ok=True)
    results = []
    for i, cmd in enumerate(plan.commands):
        r = runner(cmd)
        results.append(r)
        # `launchctl bootout` of an agent that is not loaded fails harmlessly before bootstrap
        if r.returncode != 0 and not (plan.platform == "macos" and "bootout" in cmd and i < len(plan.commands) - 1):
            raise OccdError(f"{shlex.join(cmd)} failed: {(r.stderr or r.stdout).strip().splitlines()[-1] if (r.stderr or r.stdout).strip() else r.returncode}",
                            "the files are in place; run the command yourself to see why", code="SERVICE_FAILED")
    return results
