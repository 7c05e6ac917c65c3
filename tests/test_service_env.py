"""The service as the caller's environment varies (issue 22): one runtime folder whatever XDG_RUNTIME_DIR says,
the openclaw resolved at install time and written into the unit and the plist, linger asked by uid with
USER/LOGNAME unset, an active-but-disabled unit flagged, an unreachable user bus reported as such, and an
uninstall with nothing installed. Fake runners and tmp folders: nothing touches the real service manager."""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from occd import paths
from occd.health import doctor
from occd.runtime import service, service_probe, statusfile
from occd.runtime.lock import InstanceLock
from occd.cli.main import cli
from occd.runtime.service_openclaw import compare, env_interpreter, resolve_openclaw

UID = os.getuid()
NO_BUS = "Failed to connect to bus: $DBUS_SESSION_BUS_ADDRESS and $XDG_RUNTIME_DIR not defined"


def _exe(path: Path, text: str = "#!/bin/sh\necho 2026.9.6\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


class Manager:
    """A fake systemctl/loginctl: answers by sub-command, records every call."""

    def __init__(self, active="active", enabled="enabled", linger="yes", bus=True, loginctl_rc=0):
        self.calls: list[list[str]] = []
        self.active, self.enabled, self.linger, self.bus, self.loginctl_rc = active, enabled, linger, bus, loginctl_rc

    def __call__(self, cmd, capture=True):
        cmd = list(cmd)
        self.calls.append(cmd)
        if cmd[0] == "loginctl":
            if self.loginctl_rc:
                return subprocess.CompletedProcess(cmd, self.loginctl_rc, "", "loginctl: command not found")
            if self.linger is None:
                return subprocess.CompletedProcess(cmd, 1, "", f"Failed to get user: User ID {cmd[2]} is not "
                                                               "logged in or lingering")
            return subprocess.CompletedProcess(cmd, 0, f"Linger={self.linger}\n", "")
        if not self.bus:
            return subprocess.CompletedProcess(cmd, 1, "", NO_BUS + "\n")
        if "is-active" in cmd:
            return subprocess.CompletedProcess(cmd, 0 if self.active == "active" else 3, self.active + "\n", "")
        if "is-enabled" in cmd:
            return subprocess.CompletedProcess(cmd, 0 if self.enabled == "enabled" else 1, self.enabled + "\n", "")
        return subprocess.CompletedProcess(cmd, 0, "", "")


@pytest.fixture
def run_user(tmp_path, monkeypatch):
    """paths.RUN_USER pointed at a tmp folder (logind's /run/user), with OCCD_HOME and XDG_RUNTIME_DIR unset:
    the shell of `sudo -u`, `runuser` or cron."""
    base = tmp_path / "run-user"
    base.mkdir()
    monkeypatch.setattr(paths, "RUN_USER", base)
    monkeypatch.delenv("OCCD_HOME", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    return base


# ------------------------------------------------------------------------------------------- runtime folder
def test_runtime_dir_is_the_same_with_and_without_xdg_runtime_dir(run_user, tmp_path):
    state_fallback = paths.state_dir() / "run"
    assert paths.runtime_dir() == state_fallback  # no /run/user/UID, no variable: the state folder
    mine = run_user / str(UID)
    mine.mkdir(mode=0o700)
    login = {**os.environ, "XDG_RUNTIME_DIR": str(mine)}   # a login session / the service
    no_session = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}  # runuser, sudo -u, cron
    assert paths.runtime_dir(login) == paths.runtime_dir(no_session) == mine / "occd"
    # /run/user/UID wins over a variable carried over from elsewhere; a folder of another uid is never used
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert paths.runtime_dir({**os.environ, "XDG_RUNTIME_DIR": str(other)}) == mine / "occd"
    assert paths.user_runtime_dir({"XDG_RUNTIME_DIR": str(other)}, uid=UID + 4242) is None
    # no /run/user/UID (another system's layout): an existing XDG_RUNTIME_DIR of ours, else the fallback
    mine.rmdir()
    assert paths.runtime_dir({**os.environ, "XDG_RUNTIME_DIR": str(other)}) == other / "occd"
    assert paths.runtime_dir({**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "missing")}) == state_fallback
    # OCCD_HOME still puts everything in one place
    assert paths.runtime_dir({"OCCD_HOME": str(tmp_path / "h")}) == tmp_path / "h" / "run"


def test_a_shell_without_xdg_runtime_dir_sees_the_service_daemon_and_cannot_start_a_second(run_user, monkeypatch,
                                                                                           isolated_env):
    mine = run_user / str(UID)
    mine.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(mine))  # the service's environment
    lock = InstanceLock().acquire()
    statusfile.write_json(statusfile.status_file(), {"pid": os.getpid(), "lastCycle": 1.0})
    try:
        assert lock.path == mine / "occd" / "occd.lock"
        monkeypatch.delenv("XDG_RUNTIME_DIR")  # now the caller: `sudo -u`, runuser, cron
        assert InstanceLock.holder() == os.getpid()
        (isolated_env / ".openclaw").mkdir(exist_ok=True)
        r = CliRunner().invoke(cli, ["run", "--once"])
        assert r.exit_code == 75, r.output
        assert f"already running (pid {os.getpid()})" in r.output
        r = CliRunner().invoke(cli, ["status", "--json"])
        assert json.loads(r.stdout)["daemon"]["pid"] == os.getpid(), r.output
    finally:
        lock.release()


def test_systemctl_gets_the_user_runtime_dir_from_a_shell_without_one(run_user):
    env = service_probe.manager_env({"PATH": "/usr/bin"})
    assert "XDG_RUNTIME_DIR" not in env  # nothing to point at
    (run_user / str(UID)).mkdir()
    assert service_probe.manager_env({"PATH": "/usr/bin"})["XDG_RUNTIME_DIR"] == str(run_user / str(UID))
    assert service_probe.manager_env({"XDG_RUNTIME_DIR": "/run/user/0-not-mine"}, uid=UID)["XDG_RUNTIME_DIR"] \
        == str(run_user / str(UID))


# ------------------------------------------------------------------------------- openclaw in the unit/plist
@pytest.fixture
def npm_openclaw(tmp_path):
    """openclaw as npm installs it into a per-user prefix: a link to a node script run through `env node`, and
    node in another folder (nvm)."""
    pkg = _exe(tmp_path / "npm" / "lib" / "node_modules" / "openclaw" / "openclaw.mjs",
               "#!/usr/bin/env node\nconsole.log('2026.9.6')\n")
    link = tmp_path / "home" / ".local" / "bin" / "openclaw"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(pkg)
    node = _exe(tmp_path / "nvm" / "v22" / "bin" / "node")
    return link, node


def test_env_interpreter():
    assert env_interpreter(__file__) is None


def test_unit_and_plist_get_the_openclaw_of_the_installing_shell(isolated_env, npm_openclaw, tmp_path):
    link, node = npm_openclaw
    assert env_interpreter(str(link)) == "node"
    environ = {**os.environ, "PATH": f"{link.parent}:{node.parent}:/usr/bin:/bin"}
    occd = _exe(tmp_path / "venv" / "bin" / "occd")
    plan = service.install_plan("linux", command=[str(occd)], environ=environ)
    unit = plan.files[service.systemd_unit_path(isolated_env)]
    assert f"Environment=OCCD_OPENCLAW_BIN={link}" in unit
    want_path = f"{link.parent}:{node.parent}:{occd.parent}:{service.BASE_PATH}"
    assert f"Environment=PATH={want_path}" in unit
    line = plan.openclaw_line()
    assert line.startswith("openclaw: ~/.local/bin/openclaw (written into the service") and "node" in line
    assert plan.to_json()["openclaw"]["bin"] == str(link) and plan.to_json()["servicePath"] == want_path
    # the plist, from the same code path: the same variables
    mac = service.install_plan("macos", uid=501, command=[str(occd)], environ=environ)
    env = plistlib.loads(mac.files[service.plist_path(isolated_env)].encode())["EnvironmentVariables"]
    assert env["OCCD_OPENCLAW_BIN"] == str(link) and env["PATH"] == want_path and env["HOME"] == str(isolated_env)
    # what the service gets, read back from the written unit, runs the same openclaw
    service.execute(plan, Manager())
    svc_env = service.installed_environment("linux")
    assert svc_env["OCCD_OPENCLAW_BIN"] == str(link) and svc_env["PATH"] == want_path
    assert compare(svc_env, resolve_openclaw(environ))["status"] == "ok"
    if shutil.which("systemd-analyze"):
        Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["systemd-analyze", "--user", "--man=no", "verify", str(service.installed_path("linux"))],
                           capture_output=True, text=True, env={**os.environ, "SYSTEMD_LOG_LEVEL": "warning"})
        assert r.returncode == 0 and "occd.service" not in r.stderr, r.stderr


def test_occd_openclaw_bin_wins_and_a_missing_node_is_said(isolated_env, npm_openclaw, tmp_path):
    link, node = npm_openclaw
    other = _exe(tmp_path / "opt" / "openclaw")
    plan = service.install_plan("linux", command=["/usr/bin/occd"],
                                environ={"PATH": f"{link.parent}:/usr/bin", "OCCD_OPENCLAW_BIN": str(other)})
    assert f"Environment=OCCD_OPENCLAW_BIN={other}" in plan.files[service.systemd_unit_path(isolated_env)]
    plan = service.install_plan("linux", command=["/usr/bin/occd"], environ={"PATH": f"{link.parent}:/nowhere"})
    assert "no node is on PATH" in plan.openclaw_line()


def test_install_without_openclaw_says_so_and_writes_no_bin(isolated_env, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(service, "run_command", Manager())
    r = CliRunner().invoke(cli, ["service", "install", "--platform", "linux"])
    assert r.exit_code == 0, r.output
    assert "openclaw: none found on PATH" in r.output
    assert "OCCD_OPENCLAW_BIN" not in service.installed_path("linux").read_text()
    # the service's PATH holds ~/.local/bin all the same: an openclaw installed there later is found
    svc_env = service.installed_environment("linux")
    assert str(isolated_env / ".local" / "bin") in svc_env["PATH"].split(":")
    assert compare(svc_env, None)["status"] == "warn"
    later = _exe(isolated_env / ".local" / "bin" / "openclaw")
    r = compare(svc_env, resolve_openclaw({"PATH": str(later.parent)}))
    assert r["status"] == "ok" and r["service"]["bin"] == str(later)


def test_cli_install_names_the_openclaw_it_wrote(isolated_env, npm_openclaw, monkeypatch):
    link, node = npm_openclaw
    monkeypatch.setenv("PATH", f"{link.parent}:{node.parent}:{os.environ['PATH']}")
    monkeypatch.setattr(service, "run_command", Manager())
    r = CliRunner().invoke(cli, ["service", "install", "--platform", "linux"])
    assert r.exit_code == 0, r.output
    assert "openclaw: ~/.local/bin/openclaw (written into the service as OCCD_OPENCLAW_BIN" in r.output


def test_doctor_compares_the_services_openclaw_with_the_shells(isolated_env, npm_openclaw, monkeypatch, tmp_path):
    link, node = npm_openclaw
    monkeypatch.setattr(service, "run_command", Manager())
    monkeypatch.setenv("PATH", f"{link.parent}:{node.parent}:/usr/bin:/bin")

    def line():
        return {r.name: r for r in doctor.diagnose(only=["service-openclaw"])}["service-openclaw"]

    service.execute(service.install_plan("linux", command=["/usr/bin/occd"]), Manager())
    r = line()
    assert r.status == "ok" and "~/.local/bin/openclaw, as this shell does" in r.detail
    # another openclaw first on the shell's PATH: the service still runs the installed one
    newer = _exe(tmp_path / "newer" / "openclaw")
    monkeypatch.setenv("PATH", f"{newer.parent}:{os.environ['PATH']}")
    r = line()
    assert r.status == "warn" and str(newer) in r.detail and "install` again" in r.hint
    # a unit written before issue 22 (no PATH, no OCCD_OPENCLAW_BIN): the manager's PATH has no ~/.local/bin
    unit = service.installed_path("linux")
    unit.write_text("\n".join(x for x in unit.read_text().splitlines()
                              if not x.startswith(("Environment=PATH=", "Environment=OCCD_OPENCLAW_BIN="))))
    r = line()
    assert r.status == "fail" and "the service finds no openclaw" in r.detail
    # the env file (applied after Environment=) can name it
    service.env_file_path().write_text(f"OCCD_OPENCLAW_BIN={newer}\n")
    assert line().status == "ok"


# ----------------------------------------------------------------------------------- linger, enabled, bus
def test_linger_is_asked_by_uid_with_user_and_logname_unset(isolated_env, monkeypatch, tmp_path):
    monkeypatch.delenv("USER", raising=False)
    monkeypatch.delenv("LOGNAME", raising=False)
    monkeypatch.setattr(service_probe, "LINGER_DIR", tmp_path / "linger")
    m = Manager(linger="yes")
    assert service_probe.user_lingers(m) is True
    assert m.calls == [["loginctl", "show-user", str(UID), "-p", "Linger"]]
    assert service_probe.user_lingers(Manager(linger="no")) is False
    assert service_probe.user_lingers(Manager(linger=None)) is False  # "not logged in or lingering"
    # no loginctl (or no system bus): logind's record, named by the uid's account from the password database
    assert service_probe.user_lingers(Manager(loginctl_rc=127)) is None
    (tmp_path / "linger").mkdir()
    assert service_probe.user_lingers(Manager(loginctl_rc=127)) is False
    import pwd

    (tmp_path / "linger" / pwd.getpwuid(UID).pw_name).touch()
    assert service_probe.user_lingers(Manager(loginctl_rc=127)) is True
    # the doctor, end to end, with USER/LOGNAME unset
    service.execute(service.install_plan("linux", command=["/usr/bin/occd"]), Manager())
    monkeypatch.setattr(service, "run_command", Manager(linger="yes"))
    r = {r.name: r for r in doctor.diagnose(only=["service"])}["service"]
    assert r.status == "ok" and "lingering" not in r.detail, r.detail
    monkeypatch.setattr(service, "run_command", Manager(linger="no"))
    r = {r.name: r for r in doctor.diagnose(only=["service"])}["service"]
    assert r.status == "warn" and "not lingering" in r.detail and pwd.getpwuid(UID).pw_name in r.hint


def test_doctor_flags_an_active_but_disabled_unit(isolated_env, monkeypatch):
    service.execute(service.install_plan("linux", command=["/usr/bin/occd"]), Manager())
    m = Manager(enabled="disabled")
    monkeypatch.setattr(service, "run_command", m)
    r = {r.name: r for r in doctor.diagnose(only=["service"])}["service"]
    assert ["systemctl", "--user", "is-enabled", "occd.service"] in m.calls
    assert r.status == "warn" and "active, but disabled" in r.detail and "systemctl --user enable occd" in r.hint
    st = service.service_state("linux", runner=Manager(enabled="disabled"))
    assert st["active"] is True and st["enabled"] is False and st["enabledState"] == "disabled"


def test_an_unreachable_user_bus_is_reported_as_such(isolated_env, monkeypatch):
    service.execute(service.install_plan("linux", command=["/usr/bin/occd"]), Manager())
    monkeypatch.setattr(service, "run_command", Manager(bus=False))
    st = service.service_state("linux")
    assert st["bus"] is False and st["active"] is None and "Failed to connect to bus" in st["busError"]
    r = {r.name: r for r in doctor.diagnose(only=["service"])}["service"]
    assert "not active" not in r.detail and "user manager unreachable from this shell" in r.detail
    assert "systemctl --user start" not in (r.hint or "") and "enable-linger" in r.hint
    r = CliRunner().invoke(cli, ["service", "status", "--platform", "linux"])
    assert r.exit_code == 1
    assert "cannot be reached from this shell" in r.output and "hint:" in r.output.lower()
    # uninstall stops before removing anything: no unit left behind running without its file
    r = CliRunner().invoke(cli, ["service", "uninstall", "--platform", "linux"])
    assert r.exit_code == 1 and "Cannot reach your systemd user manager" in r.output
    assert "nothing was changed" in r.output and service.installed_path("linux").exists()
    assert "the files are in place" not in r.output


def test_uninstall_with_nothing_installed_says_not_installed(isolated_env, monkeypatch):
    m = Manager(bus=False)
    monkeypatch.setattr(service, "run_command", m)
    for platform in ("linux", "macos"):
        r = CliRunner().invoke(cli, ["service", "uninstall", "--platform", platform])
        assert r.exit_code == 0 and "is not installed" in r.output and "nothing to remove" in r.output, r.output
        assert "daemon-reload" not in r.output and "in place" not in r.output
        r = CliRunner().invoke(cli, ["service", "uninstall", "--platform", platform, "--json"])
        assert json.loads(r.stdout)["installed"] is False
    assert m.calls == []  # no service manager asked about a unit of another HOME
