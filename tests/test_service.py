"""Service templates: rendered, verified by systemd-analyze where present, plist keys; install/uninstall with a
fake runner (nothing touches the real service manager)."""

from __future__ import annotations

import plistlib
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from occd import service
from occd.cli.main import cli
import os


def test_systemd_unit_renders_and_verifies(tmp_path):
    text = service.render_systemd(service.occd_command(), tmp_path / "occd.env", {"OCCD_POLICY__MODE": "act"})
    assert "Type=notify" in text and "WatchdogSec=" in text and "Restart=on-failure" in text
    assert "Environment=OCCD_POLICY__MODE=act" in text and "EnvironmentFile=-" in text
    exec_line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    assert exec_line.split("=", 1)[1].startswith("/") and exec_line.endswith(" run")
    unit = tmp_path / "occd.service"
    unit.write_text(text)
    if shutil.which("systemd-analyze") is None:
        if os.environ.get("CI"):
            pytest.fail("systemd-analyze missing in CI (apt-get install systemd)")
        pytest.skip("systemd-analyze not installed")
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_plist_renders_with_required_keys(tmp_path):
    text = service.render_plist(["/usr/local/bin/occd"], {"OCCD_POLICY__MODE": "act", "X": "a&b<c"}, tmp_path,
                                tmp_path / "logs")
    d = plistlib.loads(text.encode())
    assert d["Label"] == service.LABEL
    assert d["ProgramArguments"] == ["/usr/local/bin/occd", "run"]
    assert d["KeepAlive"] == {"SuccessfulExit": False} and d["RunAtLoad"] is True
    assert d["EnvironmentVariables"]["HOME"] == str(tmp_path) and "PATH" in d["EnvironmentVariables"]
    assert d["EnvironmentVariables"]["X"] == "a&b<c"
    assert d["StandardErrorPath"].startswith(str(tmp_path / "logs"))


def test_install_linux_with_fake_runner(isolated_env):
    calls = []

    def runner(cmd):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    plan = service.install_plan("linux", act=True, interval="5m")
    service.execute(plan, runner)
    unit = isolated_env / ".config/systemd/user/occd.service"
    assert unit.exists() and "OCCD_DAEMON__SCAN_INTERVAL_SECONDS=300" in unit.read_text()
    env = [p for p in plan.files if p.name == "occd.env"][0]
    assert (env.stat().st_mode & 0o777) == 0o600
    assert calls == [["systemctl", "--user", "daemon-reload"], ["systemctl", "--user", "enable", "--now", "occd.service"]]
    service.execute(service.uninstall_plan("linux"), runner)
    assert not unit.exists() and calls[-2][:3] == ["systemctl", "--user", "disable"]


def test_install_macos_plan_and_failure_message(isolated_env):
    plan = service.install_plan("macos", uid=501)
    (plist,) = plan.files
    assert plist == isolated_env / "Library/LaunchAgents/io.occd.daemon.plist"
    assert plan.commands[-1] == ["launchctl", "bootstrap", "gui/501", str(plist)]

    def failing(cmd):
        return subprocess.CompletedProcess(cmd, 5, "", "Bootstrap failed: 5: Input/output error")

    from occd.errors import OccdError

    with pytest.raises(OccdError, match="Bootstrap failed"):
        service.execute(plan, failing)


def test_cli_dry_run_writes_nothing(isolated_env):
    r = CliRunner().invoke(cli, ["service", "install", "--dry-run", "--platform", "linux", "--json"])
    assert r.exit_code == 0, r.output
    import json

    out = json.loads(r.stdout)
    assert out["dryRun"] and any(k.endswith("occd.service") for k in out["files"])
    assert not (isolated_env / ".config/systemd").exists()
