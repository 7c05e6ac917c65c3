"""Issue 31.1 on occd's Python side: the lean view's files (policy, counts, state, marker) and OpenClaw's logs are
read without ever blocking: a FIFO, a device or a directory at their names is refused, never opened for reading,
and named by doctor's lean checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from occd import lean, paths
from test_lean import fake_openclaw  # noqa: F401 - the fixture

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


def _plant(p, kind):
    p.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "devzero":
        os.symlink("/dev/zero", p)
    elif kind == "dir":
        p.mkdir()
    elif kind == "huge":
        with open(p, "wb") as fh:
            fh.truncate(17 * 1024 * 1024)


@pytest.mark.parametrize(("which", "kind"), [(w, k) for w in ("stats", "policy", "state", "marker")
                                               for k in ("fifo", "devzero")] + [("stats", "dir"), ("policy", "huge")])
def test_lean_status_never_hangs_on_a_hostile_file(fake_openclaw, tmp_path, which, kind):  # noqa: F811
    lean.enable(None, fake_openclaw, yes=True)
    logs = tmp_path / "oclogs"
    logs.mkdir()
    os.mkfifo(logs / "openclaw-2026-11-27.log")  # a FIFO named like OpenClaw's log, too
    target = {"stats": lean.stats_path, "policy": lean.policy_path, "state": lean.state_path,
              "marker": lean.marker_path}[which]()
    _plant(target, kind)
    env = {**os.environ, "OPENCLAW_STATE_DIR": str(fake_openclaw), "OCCD_OPENCLAW_LOG_DIR": str(logs)}
    p = subprocess.run([sys.executable, "-m", "occd", "lean", "status", "--json"], capture_output=True, text=True,
                       timeout=60, env=env, stdin=subprocess.DEVNULL)  # a hang fails here, never blocks the suite
    assert p.returncode in (0, 1), p.stderr
    data = json.loads(p.stdout)
    assert "Traceback" not in p.stderr
    if which != "marker":  # an unreadable marker reads as "not enabled": no per-file check is run then
        checks = {c["name"]: c for c in data.get("checks") or data.get("data", {}).get("checks", [])}
        if kind != "huge":
            assert checks["lean-files"]["status"] == "fail" and str(target) in checks["lean-files"]["message"]
    assert os.path.lexists(target) and not (kind == "fifo" and not target.is_fifo())  # left as it was


def test_read_regular_refuses_what_is_not_a_small_regular_file(tmp_path):
    assert paths.read_regular(tmp_path / "none") is None
    (tmp_path / "ok").write_bytes(b"{}")
    assert paths.read_regular(tmp_path / "ok") == b"{}"
    os.mkfifo(tmp_path / "fifo")
    os.symlink("/dev/zero", tmp_path / "zero")
    os.symlink(tmp_path / "ok", tmp_path / "link")
    (tmp_path / "big").write_bytes(b"x" * 100)
    for name in ("fifo", "zero", "link"):
        with pytest.raises(paths.NotRegular):
            paths.read_regular(tmp_path / name)
    assert paths.read_regular(tmp_path / "link", follow_symlinks=True) == b"{}"
    with pytest.raises(paths.NotRegular):
        paths.read_regular(tmp_path / "big", limit=99)
    assert paths.read_regular(tmp_path / "big", limit=100) == b"x" * 100
    with pytest.raises(paths.NotRegular):
        paths.read_regular(tmp_path, limit=100)


def test_a_plugin_copy_missing_a_module_it_imports_is_incomplete(tmp_path):
    import shutil

    folder = tmp_path / "plugin"
    shutil.copytree(lean.plugin_source(), folder)
    assert lean.plugin_folder_problem(folder) is None
    (folder / "safefs.js").unlink()  # imported by the other modules: OpenClaw could not load the engine
    assert lean.plugin_folder_problem(folder) == "incomplete (no safefs.js)"
    # an older copy whose modules import no safefs.js is complete as it is
    for f in folder.glob("*.js"):
        f.write_text(f.read_text().replace('from "./safefs.js"', 'from "node:fs"'))
    assert lean.plugin_folder_problem(folder) is None


def test_keep_results_setting_reaches_the_plugins_rules():
    from occd.config import Settings
    from occd.jobs.lean import rules_from_settings

    assert rules_from_settings(Settings())["keepResults"] == 5
    s = Settings.model_validate({"lean": {"keep_results": 0, "keep_turns": 3}})
    assert rules_from_settings(s)["keepResults"] == 0 and rules_from_settings(s)["keepTurns"] == 3
