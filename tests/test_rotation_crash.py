"""Crash a rotation at every step (OCCD_CRASH_AT: SIGKILL right after the step is persisted), in a real
subprocess, then resume it as the daemon does at start. At every crash point and after the resume: the archive
is complete or the original is still in place; the index is valid JSON pointing to an existing, valid
transcript; no transcript byte is lost; the state machine ends in COOLDOWN; the ledger tells the story."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_rotation import KEY, make_state

STEPS = ["PENDING", "ARCHIVING", "ARCHIVED", "NEW_WRITTEN", "INDEX_SWITCHED", "OLD_REMOVED", "INJECTED", "COOLDOWN"]


def _check_key_valid(st, old_bytes: bytes, old_path: Path, oracle=None) -> str:
    """The guarantees at any instant; returns which session the key points to."""
    from occd.transcript import check_invariants

    index = json.loads((st.sessions / "sessions.json").read_text())  # valid JSON
    e = index[KEY]
    p = Path(e["sessionFile"])
    assert p.exists(), "the key points to a missing transcript"
    assert check_invariants(p) == [], check_invariants(p)
    if oracle is not None:
        assert oracle.check(p)["ok"]
    archive = st.sessions / "archive" / old_path.name
    # nothing lost: the old transcript's bytes are in place or completely in the archive
    assert (old_path.exists() and old_path.read_bytes() == old_bytes) or archive.read_bytes() == old_bytes
    if not old_path.exists():
        assert e["sessionId"] != old_path.stem
    return e["sessionId"]


@pytest.mark.parametrize("step", STEPS)
def test_crash_at_every_step_then_resume(isolated_env, step, oracle):
    st = make_state(Path(os.environ["OPENCLAW_STATE_DIR"]))
    old_path = st.transcript()
    old_bytes = old_path.read_bytes()
    env = {**os.environ, "OCCD_CRASH_AT": step}
    p = subprocess.run([sys.executable, "-m", "occd", "rotate", KEY, "--json"], capture_output=True, text=True,
                       env=env, timeout=120)
    if step == "COOLDOWN":
        assert p.returncode == -9  # killed after the last step: the rotation is complete
    else:
        assert p.returncode == -9, (p.returncode, p.stdout, p.stderr)
    _check_key_valid(st, old_bytes, old_path, oracle)

    from occd.ledger import Ledger

    led = Ledger.open()
    rows = led.rotations()
    assert len(rows) == 1
    assert rows[0]["state"] == ("ARCHIVED" if step in ("NEW_WRITTEN", "INDEX_SWITCHED", "OLD_REMOVED") else step)
    if step == "ARCHIVING":  # a torn archive from the cut-off copy: the resume must notice and redo it
        arch = Path(rows[0]["archive_path"])
        arch.parent.mkdir(exist_ok=True)
        arch.write_bytes(old_bytes[: len(old_bytes) // 2])
    led.close()

    # the daemon starts: resume in a fresh process, the way `occd run --once` does
    code = ("import json,os;from pathlib import Path;from occd.config import load_settings;from occd.ledger import "
            "Ledger;from occd.rotation.recovery import resume_all;led=Ledger.open();"
            "print(json.dumps(resume_all(load_settings(),led,state_dir=Path(os.environ['OPENCLAW_STATE_DIR']))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["failed"] == 0 and out["deferred"] == 0
    sid = _check_key_valid(st, old_bytes, old_path, oracle)

    led = Ledger.open()
    row = led.rotations()[0]
    assert row["state"] == "COOLDOWN"
    assert sid == row["new_session_id"] and not old_path.exists()
    assert (st.sessions / "archive" / old_path.name).read_bytes() == old_bytes
    states = [h["to_state"] for h in led.rotation_history(row["id"])]
    assert states == ["PENDING", "ARCHIVING", "ARCHIVED", "INJECTED", "COOLDOWN"]
    new = Path(row["new_path"])
    assert oracle.check(new)["ok"] and "Mia" in new.read_text()
    # exactly one new session file beside the index; no temp files left
    names = sorted(x.name for x in st.sessions.iterdir() if x.is_file())
    assert names == sorted([new.name, "sessions.json"]), names
    assert not list((st.sessions / "archive").glob(".*"))
    led.close()
