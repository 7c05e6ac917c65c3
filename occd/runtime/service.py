"""Installing occd as a background service: a systemd user unit on Linux, a LaunchAgent on macOS.

One code path renders both from the templates shipped in the wheel (packages occd.systemd and occd.launchd, read
with importlib.resources) into a Plan: an ordered list of steps (write a file, remove a file, run a command)
plus notes for the user. `--dry-run` prints the plan; otherwise `execute()` carries it out, running every
command through one runner (`run_command`) that tests replace.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from xml.sax.saxutils import escape

from occd import paths
from occd.errors import NotFoundError, OccdError, UsageError
from occd.runtime.service_openclaw import OpenClawBin, resolve_openclaw, service_path
from occd.runtime.service_probe import bus_error, manager_env, no_bus_hint, user_lingers, user_name

UNIT_NAME = "occd.service"
LABEL = "io.occd.daemon"
ENV_FILE_NAME = "occd.env"
MIN_INTERVAL_S = 5  # daemon.scan_interval_seconds has the same lower bound
BASE_PATH = "/usr/local/bin:/opt/homebrew/bin:/usr/bin:/bin:/usr/sbin:/sbin"


@dataclass
class Step:
    kind: str                       # "write" | "remove" | "mkdir" | "run"
    path: Path | None = None
    text: str | None = None
    mode: int = 0o644
    cmd: list[str] | None = None
    check: bool = True              # run: a failure stops the plan; False: tolerated (e.g. "not loaded")

    def describe(self) -> str:
        if self.kind == "run":
            return f"$ {shlex.join(self.cmd or [])}" + ("" if self.check else "   # may fail harmlessly")
        if self.kind == "write":
            return f"# write {self.path} (mode {self.mode:o})"
        return f"# {self.kind} {self.path}"


@dataclass
class Plan:
    platform: str
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    openclaw: OpenClawBin | None = None  # install: the openclaw written into the service (None: none found)
    service_path: str | None = None      # install: the PATH written into the service
    installed: bool = True               # uninstall: False when there is nothing to remove
    target: Path | None = None           # the unit / plist

    @property
    def files(self) -> dict[Path, str]:
        return {s.path: s.text or "" for s in self.steps if s.kind == "write" and s.path is not None}

    @property
    def commands(self) -> list[list[str]]:
        return [s.cmd for s in self.steps if s.kind == "run" and s.cmd]

    def to_json(self) -> dict:
        out = {"platform": self.platform, "files": {str(k): v for k, v in self.files.items()},
               "remove": [str(s.path) for s in self.steps if s.kind == "remove"],
               "commands": [shlex.join(c) for c in self.commands],
               "steps": [s.describe() for s in self.steps], "notes": self.notes, "installed": self.installed,
               "unitPath": str(self.target) if self.target else None}
        if self.service_path is not None:
            out["openclaw"] = self.openclaw.to_json() if self.openclaw else None
            out["servicePath"] = self.service_path
        return out

    def openclaw_line(self) -> str | None:
        """`service install`'s line about the openclaw the service will run."""
        if self.service_path is None:
            return None
        oc = self.openclaw
        if oc is None:
            return ("openclaw: none found on PATH; the service runs without it (gateway calls and the lean view "
                    "need it: install OpenClaw or set OCCD_OPENCLAW_BIN, then install again)")
        line = f"openclaw: {paths.display_path(oc.path)} (written into the service as OCCD_OPENCLAW_BIN"
        if oc.interpreter_dir:
            line += f"; its {oc.interpreter} {paths.display_path(oc.interpreter_dir)} is on the service's PATH"
        line += ")"
        if oc.problem:
            line += f"; warning: {oc.problem}"
        return line


# ---------------------------------------------------------------------------------------------- helpers
def detect_platform() -> str:
    return "macos" if sys.platform == "darwin" else "linux"


def occd_command(argv0: str | None = None, which=shutil.which) -> list[str]:
    """The absolute command that starts this installed occd (a service manager has no useful PATH).

    The occd we were started as wins (so `~/venv/bin/occd service install` installs that one), then the occd
    on PATH, then `python -m occd` with this interpreter (kept unresolved: a venv's python is a symlink whose
    target would lose the venv)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    if argv0 and Path(argv0).name == "occd":
        p = Path(argv0) if os.sep in argv0 else (Path(which(argv0)) if which(argv0) else None)
        if p is not None and p.is_file():
            return [os.path.abspath(p)]
    exe = which("occd")
    if exe:
        return [os.path.abspath(exe)]
    return [os.path.abspath(sys.executable), "-m", "occd"]


def template(package: str, name: str) -> str:
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


def parse_interval(text: str | None) -> int | None:
    """'30s', '5m', '1h', '1d' or plain seconds → seconds (at least MIN_INTERVAL_S); None passes through."""
    if text is None:
        return None
    t = text.strip().lower()
    mult = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        secs = float(t[:-1]) * mult[t[-1]] if t and t[-1] in mult else float(t)
    except (ValueError, KeyError):
        raise UsageError(f"{text!r} is not an interval", "use a number with s, m or h, e.g. 30s, 5m, 1h") from None
    if secs != secs or secs < MIN_INTERVAL_S:  # NaN or too short
        raise UsageError(f"interval {text!r} is too short", f"use at least {MIN_INTERVAL_S}s") from None
    return int(secs)


def service_env(act: bool, interval: int | None, environ=None, openclaw: OpenClawBin | None = None,
                path: str | None = None) -> dict[str, str]:
    """Environment for the service: the flags, plus the occd/OpenClaw location variables of this shell (so the
    service sees the same ledger and state as the command that installed it), the openclaw resolved in this
    shell and a PATH that finds it (a service manager's PATH does not hold nvm's or npm's user folders)."""
    environ = os.environ if environ is None else environ
    env = {}
    if path:
        env["PATH"] = path
    if openclaw is not None:
        env["OCCD_OPENCLAW_BIN"] = openclaw.path
    if act:
        env["OCCD_POLICY__MODE"] = "act"
    if interval:
        env["OCCD_DAEMON__SCAN_INTERVAL_SECONDS"] = str(interval)
    for var in ("OCCD_HOME", "OCCD_CONFIG", "OPENCLAW_STATE_DIR", "OPENCLAW_CONFIG_PATH"):
        if environ.get(var):
            env[var] = environ[var]
    return env


def env_file_path() -> Path:
    return paths.config_file().parent / ENV_FILE_NAME


def systemd_unit_path(home: Path, environ=None) -> Path:
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    return Path(base) / "systemd" / "user" / UNIT_NAME


def plist_path(home: Path) -> Path:
    return home / "Library" / "LaunchAgents" / f"{LABEL}.plist"


# ------------------------------------------------------------------------------------------------ rendering
def _sd_escape(s: str) -> str:
    """A value in a unit file: '%' is a specifier there, so it is doubled."""
    return s.replace("%", "%%")


def _sd_quote(s: str, exec_line: bool = False) -> str:
    """One word of ExecStart= or an Environment= assignment, quoted when needed (systemd.syntax(7))."""
    s = _sd_escape(s)
    if exec_line:
        s = s.replace("$", "$$")  # ExecStart= expands $VAR
    if s and not any(c in s for c in " \t\"'\\;"):
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_systemd(command: list[str], env_file: Path, env: dict[str, str]) -> str:
    environment = "\n".join(f"Environment={_sd_quote(f'{k}={v}')}" for k, v in sorted(env.items()))
    text = template("occd.systemd", "occd.service")
    return (text.replace("{exec_start}", " ".join(_sd_quote(c, exec_line=True) for c in command + ["run"]))
            .replace("{env_file}", _sd_escape(str(env_file))).replace("{environment}", environment))


def render_plist(command: list[str], env: dict[str, str], home: Path, log_dir: Path) -> str:
    args = "\n".join(f"    <string>{escape(c)}</string>" for c in command + ["run"])
    base_env = {"PATH": service_path(None, os.path.dirname(command[0]), BASE_PATH, str(home / ".local" / "bin")),
                "HOME": str(home), **env}
    environment = "\n".join(f"    <key>{escape(k)}</key>\n    <string>{escape(v)}</string>"
                            for k, v in sorted(base_env.items()))
    text = template("occd.launchd", f"{LABEL}.plist")
    return (text.replace("{label}", LABEL).replace("{program_arguments}", args)
            .replace("{environment}", environment).replace("{log_dir}", escape(str(log_dir))))


# ---------------------------------------------------------------------------------------------------- plans
def _home(home: Path | None) -> Path:
    return home or Path(os.environ.get("HOME") or Path.home())


def _check_platform(platform: str | None) -> str:
    platform = platform or detect_platform()
    if platform not in ("linux", "macos"):
        raise UsageError(f"Unsupported platform '{platform}'", "use --platform linux or macos")
    return platform


def install_plan(platform: str | None = None, *, act: bool = False, interval: str | None = None,
                 home: Path | None = None, uid: int | None = None, command: list[str] | None = None,
                 environ=None, which=shutil.which) -> Plan:
    """The unit (Linux) or plist (macOS), from one code path: both get the same environment, including the
    openclaw resolved in this shell (occd.service_openclaw) and a PATH that finds it."""
    platform = _check_platform(platform)
    home = _home(home)
    cmd = command or occd_command()
    oc = resolve_openclaw(environ, which)
    spath = service_path(oc, os.path.dirname(cmd[0]), BASE_PATH, str(home / ".local" / "bin"))
    env = service_env(act, parse_interval(interval), environ, oc, spath)
    if platform == "linux":
        unit = systemd_unit_path(home, environ)
        env_file = env_file_path()
        plan = Plan("linux", openclaw=oc, service_path=spath, target=unit)
        if not env_file.exists():  # never overwrite: it holds the user's API keys
            plan.steps.append(Step("write", env_file, template("occd.systemd", ENV_FILE_NAME), mode=0o600))
        reinstall = unit.exists()
        plan.steps += [
            Step("write", unit, render_systemd(cmd, env_file, env)),
            Step("run", cmd=["systemctl", "--user", "daemon-reload"]),
            Step("run", cmd=["systemctl", "--user", "enable", "--now", UNIT_NAME]),
        ]
        if reinstall:  # `enable --now` leaves a running daemon alone; the new flags need a restart
            plan.steps.append(Step("run", cmd=["systemctl", "--user", "restart", UNIT_NAME]))
        plan.notes = [f"API keys for relevance scoring go in {paths.display_path(env_file)} (mode 0600), then "
                      "`systemctl --user restart occd`.",
                      f"On a headless machine run `loginctl enable-linger {user_name()}`, or the service stops when "
                      "you log out.",
                      "Check it with `occd service status` and `occd status`; logs: `occd service logs`."]
        return plan
    uid = os.getuid() if uid is None else uid
    plist = plist_path(home)
    plan = Plan("macos", steps=[
        Step("mkdir", paths.log_dir()),  # launchd opens the log files itself and does not create folders
        Step("write", plist, render_plist(cmd, env, home, paths.log_dir())),
        Step("run", cmd=["launchctl", "bootout", f"gui/{uid}/{LABEL}"], check=False),  # a previous install
        Step("run", cmd=["launchctl", "bootstrap", f"gui/{uid}", str(plist)]),
    ], openclaw=oc, service_path=spath, target=plist)
    plan.notes = [f"Logs: {paths.display_path(paths.log_dir())}.",
                  "Check it with `occd service status` and `occd status`."]
    return plan


def uninstall_plan(platform: str | None = None, *, home: Path | None = None, uid: int | None = None) -> Plan:
    """Stop first, then remove the file (systemd cannot disable a unit whose file is gone). Nothing installed
    (no unit / plist under this HOME): an empty plan with installed=False; the service manager is not asked
    (a unit of another HOME is none of this command's business)."""
    platform = _check_platform(platform)
    home = _home(home)
    target = installed_path(platform, home)
    if not target.exists():
        return Plan(platform, installed=False, target=target,
                    notes=[f"The occd service is not installed ({paths.display_path(target)} does not exist): "
                           "nothing to remove."])
    if platform == "linux":
        plan = Plan("linux", steps=[
            Step("run", cmd=["systemctl", "--user", "disable", "--now", UNIT_NAME], check=False),
            Step("remove", systemd_unit_path(home)),
            Step("run", cmd=["systemctl", "--user", "daemon-reload"]),
            Step("run", cmd=["systemctl", "--user", "reset-failed", UNIT_NAME], check=False),
        ], target=target)
        if env_file_path().exists():
            plan.notes.append(f"Kept {paths.display_path(env_file_path())} (it may hold API keys); delete it if unwanted.")
    else:
        uid = os.getuid() if uid is None else uid
        plan = Plan("macos", steps=[
            Step("run", cmd=["launchctl", "bootout", f"gui/{uid}/{LABEL}"], check=False),
            Step("remove", plist_path(home)),
        ], target=target)
    plan.notes.append("The ledger, logs and backups stay where they are.")
    return plan


def installed_path(platform: str | None = None, home: Path | None = None) -> Path:
    platform = _check_platform(platform)
    return systemd_unit_path(_home(home)) if platform == "linux" else plist_path(_home(home))


def status_command(platform: str | None = None, uid: int | None = None) -> list[str]:
    if _check_platform(platform) == "linux":
        return ["systemctl", "--user", "status", "--no-pager", UNIT_NAME]
    return ["launchctl", "print", f"gui/{os.getuid() if uid is None else uid}/{LABEL}"]


def service_state(platform: str | None = None, home: Path | None = None, runner=None, environ=None) -> dict:
    """What the service manager says about occd, without printing: installed (unit file), active, enabled, and
    on Linux whether the user lingers (a user unit only runs while logged in otherwise) and whether the user
    manager could be reached at all (bus False: "not active" would be a guess). For `service status --json`
    and `occd doctor`."""
    runner = runner or run_command
    platform = _check_platform(platform)
    f = installed_path(platform, home)
    out: dict = {"platform": platform, "installed": f.exists(), "unitPath": str(f), "active": None,
                 "enabled": None, "lingering": None, "bus": None}
    if not out["installed"]:
        return out
    if platform == "linux":
        r = runner(["systemctl", "--user", "is-active", UNIT_NAME])
        why = bus_error(r)
        if why or r.returncode == 127:
            out["bus"] = False
            out["busError"] = why or (r.stderr or "systemctl not found").strip()
        else:
            out["bus"] = True
            out["active"] = (r.stdout or "").strip() == "active"
            out["activeState"] = (r.stdout or "").strip() or None
            r = runner(["systemctl", "--user", "is-enabled", UNIT_NAME])
            out["enabledState"] = (r.stdout or "").strip() or None
            out["enabled"] = out["enabledState"] == "enabled"
        out["lingering"] = user_lingers(runner)
    else:
        r = runner(status_command(platform))
        out["active"] = r.returncode == 0 and "state = running" in (r.stdout or "")
        out["enabled"] = True
    return out


def installed_environment(platform: str | None = None, home: Path | None = None) -> dict[str, str] | None:
    """The environment variables the installed unit / plist gives the service (on Linux with the env file's,
    which systemd applies after Environment=), or None when nothing is installed or it cannot be read."""
    import plistlib

    platform = _check_platform(platform)
    f = installed_path(platform, home)
    try:
        raw = f.read_bytes()
    except OSError:
        return None
    if platform == "macos":
        try:
            env = plistlib.loads(raw).get("EnvironmentVariables") or {}
        except Exception:  # noqa: BLE001 - a damaged plist: nothing to compare
            return None
        return {str(k): str(v) for k, v in env.items()}
    env: dict[str, str] = {}
    for line in raw.decode(errors="replace").splitlines():
        if line.startswith("Environment="):
            try:
                words = shlex.split(line[len("Environment="):])
            except ValueError:
                continue
            for w in words:
                k, sep, v = w.partition("=")
                if sep:
                    env[k] = v.replace("%%", "%")
    try:
        lines = env_file_path().read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    for line in lines:
        k, sep, v = line.strip().partition("=")
        if sep and k and not k.startswith("#"):
            env[k.strip()] = v.strip().strip("\"'")
    return env


def logs_command(platform: str | None = None, lines: int = 100, follow: bool = False, which=shutil.which) -> list[str]:
    if _check_platform(platform) == "linux" and which("journalctl"):
        return ["journalctl", "--user", "-u", UNIT_NAME, "-n", str(lines), "--no-pager"] + (["-f"] if follow else [])
    log_file = paths.log_dir() / "occd.log"
    if not log_file.exists():
        raise NotFoundError(f"No log file at {paths.display_path(log_file)} yet",
                            "the daemon writes it when it starts: `occd service status`")
    return ["tail", "-n", str(lines)] + (["-F"] if follow else []) + [str(log_file)]


def journal_command(lines: int | None = 50, follow: bool = False, since: float | None = None,
                    which=shutil.which) -> list[str]:
    """journalctl for the user service's journal (where the systemd unit sends stdout and stderr).
    NotFoundError when journalctl is not installed."""
    exe = which("journalctl")
    if not exe:
        raise NotFoundError("journalctl not found: the service's journal cannot be read on this machine",
                            "`occd logs` without --journal reads occd's own log, "
                            f"{paths.display_path(paths.log_dir() / 'occd.log')}",
                            code="JOURNALCTL_MISSING")
    cmd = [exe, "--user", "-u", UNIT_NAME, "--no-pager", "-o", "short-iso"]
    if since is not None:
        cmd += ["--since", time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))]
    if lines is not None:
        cmd += ["-n", str(lines)]
    return cmd + (["-f"] if follow else [])


# ------------------------------------------------------------------------------------------------ execution
def run_command(cmd: list[str], *, capture: bool = True) -> subprocess.CompletedProcess:
    """The one place occd runs service-manager commands (tests replace it). capture=False: output goes
    straight to the terminal (status, logs -f)."""
    env = manager_env()
    try:
        if capture:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        return subprocess.run(cmd, env=env)
    except FileNotFoundError:
        return subprocess.CompletedProcess(cmd, 127, "", f"{cmd[0]}: command not found")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", f"{shlex.join(cmd)} did not finish in 120 s")
    except KeyboardInterrupt:  # Ctrl-C on `logs -f`
        return subprocess.CompletedProcess(cmd, 0, "", "")


def _write(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def execute(plan: Plan, runner=None) -> list[subprocess.CompletedProcess]:
    """Carry the plan out in order. A failing checked command stops it with an OccdError naming the command."""
    runner = runner or run_command
    results = []
    changed = None  # "write" / "remove": what the plan did to the files before a command failed
    for step in plan.steps:
        try:
            if step.kind == "write":
                _write(step.path, step.text or "", step.mode)
            elif step.kind == "mkdir":
                paths.ensure_dir(step.path)
            elif step.kind == "remove":
                step.path.unlink(missing_ok=True)
        except OSError as e:
            raise OccdError(f"Cannot {step.kind} {paths.display_path(step.path)}: {e.strerror}",
                            "check the folder's permissions", code="SERVICE_FAILED") from None
        if step.kind in ("write", "remove"):
            changed = changed or step.kind
        if step.kind != "run":
            continue
        r = runner(step.cmd)
        results.append(r)
        no_bus = bus_error(r)
        if no_bus:  # even a tolerated step: nothing after it can work, and an uninstall must not orphan a unit
            done = {"write": "the unit file is written, not yet loaded; ",
                    "remove": "the unit file is removed, the manager not yet told; "}.get(changed or "", "nothing "
                                                                                           "was changed; ")
            raise OccdError(f"Cannot reach your systemd user manager ({no_bus})", done + no_bus_hint(),
                            code="SERVICE_NO_BUS")
        if r.returncode != 0 and step.check:
            out = (r.stderr or r.stdout or "").strip()
            why = out.splitlines()[-1] if out else f"exit status {r.returncode}"
            if r.returncode == 127:
                hint = f"{step.cmd[0]} is not available here; use --dry-run to see the files and commands"
            elif changed == "write":
                hint = "the files are in place; run the command yourself to see why"
            elif changed == "remove":
                hint = "the files are removed; run the command yourself to see why"
            else:
                hint = "run the command yourself to see why"
            raise OccdError(f"{shlex.join(step.cmd)} failed: {why}", hint, code="SERVICE_FAILED")
    return results
