"""Service templates and `occd service`: rendered, verified by systemd-analyze where present, plist keys;
install/uninstall/status/logs with a fake runner (nothing touches the real service manager).

CI needs the Debian package `systemd` (it ships systemd-analyze); without it the verify tests fail under CI=1
and are skipped elsewhere."""

from __future__ import annotations

import json
import os
import plistlib
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import missing_tool
from click.testing import CliRunner

from occd import paths
from occd.runtime import service
from occd.cli.main import cli
from occd.errors import OccdError, UsageError


def _need_systemd_analyze():
    if shutil.which("systemd-analyze") is None:
        missing_tool("systemd-analyze: it checks the service unit (Debian package systemd; scripts/test.sh installs it as root)")


def _verify(unit: Path) -> subprocess.CompletedProcess:
    # --man=no: the Documentation= link is not looked up; the unit is checked as a user unit (which wants
    # XDG_RUNTIME_DIR to exist)
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True)
    return subprocess.run(["systemd-analyze", "--user", "--man=no", "verify", str(unit)], capture_output=True,
                          text=True, env={**os.environ, "SYSTEMD_LOG_LEVEL": "warning"})


class FakeRunner:
    def __init__(self, fail: dict[str, tuple[int, str]] | None = None):
        self.calls: list[list[str]] = []
        self.fail = fail or {}

    def __call__(self, cmd, capture=True):
        self.calls.append(list(cmd))
        for word, (code, err) in self.fail.items():
            if word in cmd:
                return subprocess.CompletedProcess(cmd, code, "", err)
        return subprocess.CompletedProcess(cmd, 0, "", "")


def test_systemd_unit_renders_and_verifies(tmp_path):
    text = service.render_systemd(service.occd_command(), tmp_path / "occd.env", {"OCCD_POLICY__MODE": "act"})
    for line in ("Type=notify", "NotifyAccess=main", "WatchdogSec=", "Restart=on-failure", "RestartSec=",
                 "Environment=OCCD_POLICY__MODE=act", f"EnvironmentFile=-{tmp_path / 'occd.env'}",
                 "ExecReload=/bin/kill -HUP $MAINPID"):
        assert line in text, line
    assert not re.search(r"\{(exec_start|env_file|environment)\}", text)  # every placeholder filled
    exec_line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    assert exec_line.split("=", 1)[1].startswith("/") and exec_line.endswith(" run")
    unit = tmp_path / "occd.service"
    unit.write_text(text)
    _need_systemd_analyze()
    r = _verify(unit)
    assert r.returncode == 0, r.stderr
    assert "occd.service" not in r.stderr, r.stderr  # no warnings about our unit either


def test_systemd_escapes_spaces_percent_and_dollar(tmp_path):
    odd = tmp_path / "my tools 100%" / "bin"
    odd.mkdir(parents=True)
    exe = odd / "occd"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    text = service.render_systemd([str(exe)], tmp_path / "a%b" / "occd.env", {"OCCD_HOME": "/x/my $HOME %h"})
    exec_line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    assert exec_line == f'ExecStart="{str(exe).replace("%", "%%")}" run'
    assert 'Environment="OCCD_HOME=/x/my $HOME %%h"' in text
    assert "EnvironmentFile=-" + str(tmp_path / "a%%b" / "occd.env") in text
    unit = tmp_path / "occd.service"
    unit.write_text(text)
    _need_systemd_analyze()
    r = _verify(unit)
    assert r.returncode == 0, r.stderr


def test_plist_renders_with_required_keys(tmp_path):
    text = service.render_plist(["/opt/occd venv/bin/occd"], {"OCCD_POLICY__MODE": "act", "X": "a&b<c"}, tmp_path,
                                tmp_path / "logs")
    assert not re.search(r"\{(label|program_arguments|environment|log_dir)\}", text)
    d = plistlib.loads(text.encode())
    assert d["Label"] == service.LABEL == "io.occd.daemon"
    assert d["ProgramArguments"] == ["/opt/occd venv/bin/occd", "run"]
    assert d["KeepAlive"] == {"SuccessfulExit": False} and d["RunAtLoad"] is True
    env = d["EnvironmentVariables"]
    assert env["HOME"] == str(tmp_path) and env["X"] == "a&b<c" and env["OCCD_POLICY__MODE"] == "act"
    assert env["PATH"].split(":")[0] == "/opt/occd venv/bin" and "/usr/bin" in env["PATH"].split(":")
    assert d["StandardOutPath"].startswith(str(tmp_path / "logs") + "/")
    assert d["StandardErrorPath"].startswith(str(tmp_path / "logs") + "/")


def test_templates_ship_as_package_data():
    from importlib import resources

    assert resources.files("occd.systemd").joinpath("occd.service").is_file()
    assert resources.files("occd.systemd").joinpath("occd.env").is_file()
    assert resources.files("occd.launchd").joinpath("io.occd.daemon.plist").is_file()


def test_install_linux_order_modes_and_reinstall(isolated_env):
    runner = FakeRunner()
    plan = service.install_plan("linux", act=True, interval="5m", command=["/usr/bin/occd"])
    service.execute(plan, runner)
    unit = isolated_env / ".config/systemd/user/occd.service"
    text = unit.read_text()
    assert "Environment=OCCD_DAEMON__SCAN_INTERVAL_SECONDS=300" in text and "Environment=OCCD_POLICY__MODE=act" in text
    assert "ExecStart=/usr/bin/occd run" in text
    env_file = service.env_file_path()
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600 and stat.S_IMODE(unit.stat().st_mode) == 0o644
    assert runner.calls == [["systemctl", "--user", "daemon-reload"],
                            ["systemctl", "--user", "enable", "--now", "occd.service"]]
    # a reinstall keeps the user's env file and restarts the running daemon with the new unit
    env_file.write_text("OPENAI_API_KEY=sk-mine\n")
    runner.calls.clear()
    plan = service.install_plan("linux", command=["/usr/bin/occd"])
    assert env_file not in plan.files
    service.execute(plan, runner)
    assert env_file.read_text() == "OPENAI_API_KEY=sk-mine\n"
    assert "OCCD_POLICY__MODE" not in unit.read_text()
    assert runner.calls[-1] == ["systemctl", "--user", "restart", "occd.service"]
    assert not [p for p in unit.parent.iterdir() if p.name != "occd.service"]  # no temp files left


def test_uninstall_linux_stops_before_removing_and_tolerates_not_loaded(isolated_env):
    service.execute(service.install_plan("linux", command=["/usr/bin/occd"]), FakeRunner())
    unit = isolated_env / ".config/systemd/user/occd.service"
    seen = []

    def runner(cmd, capture=True):
        seen.append((list(cmd), unit.exists()))
        if "disable" in cmd:
            return subprocess.CompletedProcess(cmd, 1, "", "Unit occd.service not loaded.")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    r = CliRunner().invoke(cli, ["service", "uninstall", "--dry-run", "--platform", "linux"])
    assert r.exit_code == 0 and "$ systemctl --user disable --now occd.service" in r.output and unit.exists()
    service.execute(service.uninstall_plan("linux"), runner)
    assert seen[0] == (["systemctl", "--user", "disable", "--now", "occd.service"], True)  # file still there
    assert seen[1] == (["systemctl", "--user", "daemon-reload"], False)
    assert not unit.exists() and service.env_file_path().exists()  # API keys are the user's


def test_install_macos_plan_and_failure_message(isolated_env):
    plan = service.install_plan("macos", uid=501, command=["/usr/local/bin/occd"])
    plist = isolated_env / "Library/LaunchAgents/io.occd.daemon.plist"
    assert list(plan.files) == [plist]
    assert plan.commands == [["launchctl", "bootout", "gui/501/io.occd.daemon"],
                             ["launchctl", "bootstrap", "gui/501", str(plist)]]
    # bootout of an agent that is not loaded is fine; a failing bootstrap is a clear error
    runner = FakeRunner({"bootout": (3, "Boot-out failed: 3: No such process"),
                         "bootstrap": (5, "Bootstrap failed: 5: Input/output error")})
    with pytest.raises(OccdError, match="launchctl bootstrap gui/501 .* failed: Bootstrap failed: 5"):
        service.execute(plan, runner)
    assert plistlib.loads(plist.read_bytes())["ProgramArguments"] == ["/usr/local/bin/occd", "run"]
    assert paths.log_dir().is_dir()  # launchd does not create the folder of StandardOutPath
    service.execute(service.uninstall_plan("macos", uid=501), FakeRunner({"bootout": (3, "not loaded")}))
    assert not plist.exists()


def test_missing_service_manager_is_a_clear_error(isolated_env):
    plan = service.install_plan("linux", command=["/usr/bin/occd"])
    with pytest.raises(OccdError) as e:
        service.execute(plan, lambda cmd, capture=True: subprocess.CompletedProcess(cmd, 127, "", "systemctl: command not found"))
    assert "systemctl --user daemon-reload failed" in e.value.message and "--dry-run" in e.value.hint


def test_parse_interval():
    assert [service.parse_interval(x) for x in ("30s", "5m", "1h", "1.5h", "90", " 2M ")] == [30, 300, 3600, 5400, 90, 120]
    assert service.parse_interval(None) is None
    for bad in ("", "soon", "5x", "1s", "-5m", "nan"):
        with pytest.raises(UsageError):
            service.parse_interval(bad)


def test_occd_command_is_absolute(tmp_path):
    exe = tmp_path / "bin" / "occd"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    assert service.occd_command(str(exe), which=lambda n: None) == [str(exe)]
    assert service.occd_command("occd", which=lambda n: str(exe)) == [str(exe)]
    # started another way and no occd on PATH: this interpreter, unresolved (a venv python is a symlink)
    cmd = service.occd_command("/x/pytest", which=lambda n: None)
    assert cmd == [os.path.abspath(sys.executable), "-m", "occd"]


def test_cli_dry_run_writes_nothing(isolated_env):
    r = CliRunner().invoke(cli, ["service", "install", "--dry-run", "--platform", "linux", "--act", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["dryRun"] and out["platform"] == "linux"
    unit_text = next(v for k, v in out["files"].items() if k.endswith("occd.service"))
    assert "OCCD_POLICY__MODE=act" in unit_text
    assert out["commands"] == ["systemctl --user daemon-reload", "systemctl --user enable --now occd.service"]
    assert any("enable-linger" in n for n in out["notes"])
    r = CliRunner().invoke(cli, ["service", "install", "--dry-run", "--platform", "macos"])
    assert r.exit_code == 0 and "<key>KeepAlive</key>" in r.output and "$ launchctl bootstrap gui/" in r.output
    r = CliRunner().invoke(cli, ["service", "uninstall", "--dry-run", "--platform", "linux"])
    assert r.exit_code == 0 and "is not installed" in r.output  # nothing to remove under this HOME
    assert not (isolated_env / ".config/systemd").exists() and not (isolated_env / "Library").exists()
    assert not service.env_file_path().exists()


def test_cli_bad_interval_is_a_usage_error(isolated_env):
    r = CliRunner().invoke(cli, ["service", "install", "--dry-run", "--platform", "linux", "--interval", "soon"])
    assert r.exit_code == 2 and "not an interval" in r.output


def test_cli_install_status_logs_with_fake_runner(isolated_env, monkeypatch):
    runner = FakeRunner()
    monkeypatch.setattr(service, "run_command", runner)
    r = CliRunner().invoke(cli, ["service", "status", "--platform", "linux"])
    assert r.exit_code == 1 and "not installed" in r.output and runner.calls == []
    r = CliRunner().invoke(cli, ["service", "install", "--platform", "linux", "--interval", "10m"])
    assert r.exit_code == 0, r.output
    assert "started occd (observe mode)" in r.output and "enable-linger" in r.output
    r = CliRunner().invoke(cli, ["service", "status", "--platform", "linux"])
    assert r.exit_code == 0 and runner.calls[-1] == ["systemctl", "--user", "status", "--no-pager", "occd.service"]
    r = CliRunner().invoke(cli, ["service", "logs", "--platform", "linux", "-n", "20"])
    assert r.exit_code == 0
    if shutil.which("journalctl"):
        assert runner.calls[-1] == ["journalctl", "--user", "-u", "occd.service", "-n", "20", "--no-pager"]


def test_logs_command_falls_back_to_the_log_file(isolated_env):
    with pytest.raises(OccdError, match="No log file"):
        service.logs_command("macos")
    log = paths.ensure_dir(paths.log_dir()) / "occd.log"
    log.write_text("x\n")
    assert service.logs_command("macos", 5, True) == ["tail", "-n", "5", "-F", str(log)]
    assert service.logs_command("linux", 5, which=lambda n: None)[0] == "tail"
