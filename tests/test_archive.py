"""Archiving a whole session (occd.actions.archive.archive_session): complete archive first, then the index entry,
then the original name; listed by `occd list --archived`; refused while busy; nothing lost when it fails."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from occd.errors import BusyError, OccdError
from test_rotation import KEY, disk_full_after, make_state


@pytest.fixture
def settings():
    from occd.config import load_settings

    return load_settings()


def test_archive_session_moves_and_unindexes(isolated_env, settings):
    from occd.actions.archive import archive_session
    from occd.ledger import Ledger

    st = make_state(Path(os.environ["OPENCLAW_STATE_DIR"]))
    p = st.transcript()
    before = p.read_bytes()
    with Ledger.open() as led:
        res = archive_session(settings, ref=KEY, ledger=led, reason="idle and irrelevant")
        assert led.history(kind="archive")[0]["outcome"] == "ok"
    a = Path(res["archivePath"])
    assert a == st.sessions / "archive" / p.name and a.read_bytes() == before and not p.exists()
    assert KEY not in st.index() and "agent:main:other" in st.index()
    from occd.cli.main import cli

    out = CliRunner().invoke(cli, ["list", "--archived", "--json"])
    assert out.exit_code == 0 and p.stem in out.output


def test_archive_dry_run_and_busy(isolated_env, settings):
    from occd.actions.archive import archive_session

    st = make_state(Path(os.environ["OPENCLAW_STATE_DIR"]))
    p = st.transcript()
    res = archive_session(settings, ref=KEY, dry_run=True)
    assert res["dryRun"] and p.exists() and KEY in st.index()
    os.utime(p, None)
    with pytest.raises(BusyError):
        archive_session(settings, ref=KEY)
    assert p.exists() and KEY in st.index() and not list((st.sessions / "archive").glob("*.jsonl"))


def test_archive_copy_fails_nothing_lost(isolated_env, settings, monkeypatch):
    import occd.actions.archive as arch
    import occd.transcript.archive as files

    st = make_state(Path(os.environ["OPENCLAW_STATE_DIR"]))
    p = st.transcript()
    before = p.read_bytes()

    def no_links(a, b):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(files, "_link", no_links)
    monkeypatch.setattr(files, "_copy_range", disk_full_after(1000))
    with pytest.raises(OccdError):
        arch.archive_session(settings, ref=KEY)
    assert p.read_bytes() == before and st.index()[KEY]["sessionId"] == p.stem
    assert not any((st.sessions / "archive").iterdir())


def test_archive_refuses_damaged_index(isolated_env, settings):
    from occd.actions.archive import archive_session

    st = make_state(Path(os.environ["OPENCLAW_STATE_DIR"]))
    p = st.transcript()
    idx = st.sessions / "sessions.json"
    data = json.loads(idx.read_text())
    idx.write_text(json.dumps(data)[:-5])
    with pytest.raises(OccdError):
        archive_session(settings, ref=p.stem)
    assert p.exists()
