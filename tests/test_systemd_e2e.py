"""occd's user service under a real systemd (issue 22): tests/systemd's kit boots systemd 252 as PID 1 of an
nspawn container (journald, dbus, logind, a lingering `systemd --user`) and runs its seven checks on this
checkout (install, sd_notify and the watchdog, restart after kill -9, clean stop, journal, doctor, uninstall);
then tests/systemd/probes.sh, in the same container, proves issue 22's probes: the service finds an openclaw
that only the user's PATH has, a shell without a logind session sees the daemon and cannot start a second one,
linger is found with USER/LOGNAME unset, an active but disabled unit is flagged.

Needs root (systemd-nspawn) and a machine that can boot the container: skipped with the reason otherwise, and a
failure in CI (CI=true runs as root). About 3-4 minutes (setup.sh builds the rootfs once, ~1 min, cached under
$SYSD_STATE)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from conftest import REPO, TESTS, missing_tool

KIT = TESTS / "systemd"  # setup.sh, lib.sh, run-test.sh: the container kit (tests/systemd/README.md)
PROBES = REPO / "tests" / "systemd" / "probes.sh"
KIT_CHECKS = [str(n) for n in range(1, 8)]
PROBE_NAMES = ["P1", "P2", "P3", "P4", "P5", "P6"]
# The kit's check 5 (journal) cannot wait for the daemon's line: its loop `$(seq 1 60)` is expanded on the host
# inside a double-quoted command, so the loop is a syntax error in the container and the check passes only when
# the daemon's lines happen to be among the last 6 (it failed once in six runs). P6 makes the same check with a
# real wait; a failure of check 5 alone is accepted only when P6 passed.
KIT_JOURNAL_CHECK = "5"
BOOT_FAILURE = re.compile(r"did not boot|systemd-nspawn exited during boot|no working systemd --user|"
                          r"the unpacked systemd-nspawn does not run|mmdebstrap failed|is already running")

pytestmark = [pytest.mark.systemd, pytest.mark.slow]


def _cannot(why: str):
    missing_tool(f"a bootable systemd container: {why}")


def _kit_env() -> dict[str, str]:
    """A root shell's environment for the kit: without the test isolation's XDG_*/OCCD_*/OPENCLAW_* variables
    (nsenter and runuser pass them on into the container, where they would point occd at this test's tmp
    folders); pip (the wheelhouse) keeps its cache beside the kit's state, never in a home folder."""
    state = os.environ.get("SYSD_STATE", "/tmp/sysd/state")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XDG_", "OCCD_", "OPENCLAW_", "CLAWDBOT_", "WATCHDOG_", "DBUS_"))
           and k != "NOTIFY_SOCKET"}
    return {**env, "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or f"{state}/pip-cache", "SYSD_KEEP": "1"}


def _run(cmd: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return subprocess.CompletedProcess(cmd, 124, out, f"timed out after {timeout:.0f} s")


def _results(out: str) -> list[str]:
    """The PASS/FAIL/INFO lines of the script's closing summary (its transcript above may hold doctor lines
    that start with FAIL too)."""
    lines = out.splitlines()
    start = max((i for i, line in enumerate(lines) if re.match(r"^=== (probes )?summary", line)), default=None)
    if start is None:
        return []
    return [line for line in lines[start + 1:] if re.match(r"^(PASS|FAIL|INFO) ", line)]


def test_service_under_a_real_systemd():
    if not (KIT / "run-test.sh").is_file():
        _cannot(f"{KIT / 'run-test.sh'} is missing")
    if os.geteuid() != 0:
        missing_tool("root: the kit boots systemd in a systemd-nspawn container")
    env = _kit_env()
    setup = _run([str(KIT / "setup.sh")], env, timeout=900)
    if setup.returncode != 0:
        _cannot("the container cannot boot here: " + " | ".join((setup.stderr or setup.stdout).strip().splitlines()[-3:]))
    try:
        kit = _run([str(KIT / "run-test.sh"), str(REPO)], env, timeout=900)
        results = _results(kit.stdout)
        if not results:
            text = f"{kit.stdout}\n{kit.stderr}"
            if BOOT_FAILURE.search(text):
                _cannot("the container did not boot: " + " | ".join(text.strip().splitlines()[-3:]))
            pytest.fail(f"run-test.sh printed no results (exit {kit.returncode}):\n{text[-3000:]}")
        probes = _run(["bash", str(PROBES), str(KIT)], env, timeout=600)
    finally:
        _run([str(KIT / "run-test.sh"), "--stop"], env, timeout=180)
    presults = _results(probes.stdout)
    report = "\n".join(results + presults)
    print(report)
    passed = {r.split()[1] for r in results + presults if r.startswith("PASS")}
    failed = [r for r in results + presults if r.startswith("FAIL")]
    excused = [r for r in failed if r.split()[1] == KIT_JOURNAL_CHECK and "P6" in passed]
    if excused:
        print(f"(the kit's check {KIT_JOURNAL_CHECK} failed on its own quoting bug; P6 made the check with a real wait"
              " and passed)")
    failed = [r for r in failed if r not in excused]
    assert not failed, f"{report}\n\nkit stderr:\n{kit.stderr[-1500:]}\nprobes stderr:\n{probes.stderr[-1500:]}"
    assert (set(KIT_CHECKS) - {KIT_JOURNAL_CHECK}) <= passed and set(PROBE_NAMES) <= passed, report
    assert (kit.returncode == 0 or excused) and probes.returncode == 0, report
