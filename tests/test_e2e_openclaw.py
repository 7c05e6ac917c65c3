"""End to end with the real OpenClaw, offline (scripted model server): the final word on whether occd's changes
work for a user. Both storage eras, on the releases OCCD_E2E_RELEASES chooses (e2e_harness.releases)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e_harness import OpenClawHome, message_text as _texts, releases, require_e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def need_e2e():
    require_e2e()


@pytest.mark.parametrize("version", releases("file"))
def test_file_era_edit_then_real_turn(need_e2e, tmp_path, version):
    """Real turns with real tool calls, `occd edit --strip-tools=extreme`, one more real turn: OpenClaw accepts the
    session, and the request it sends holds the whole conversation minus the stripped tool calls."""
    with OpenClawHome(version, tmp_path) as oc:
        for i in range(3):
            note = oc.workspace / f"notes{i}.txt"
            note.write_text(f"secret ingredient number {i} is cardamom\n")
            oc.turn(f"Please READ {note} and summarise item{i}")
        oc.turn("plain question alpha")
        before = oc.requests()[-1]["body"]["messages"]
        assert any(m.get("role") == "tool" for m in before), "the real turns made real tool calls"
        r = oc.occd("edit", _newest(oc), "--strip-tools=extreme", "--force", "--json")
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["statistics"]["toolCallsRemoved"] == 3 and Path(res["backupPath"]).exists()
        oc.turn("final question omega")
        after = oc.requests()[-1]["body"]["messages"]
        assert not any(m.get("role") == "tool" for m in after)
        assert not any(m.get("tool_calls") for m in after if m.get("role") == "assistant")
        users = [_texts(m) for m in after if m.get("role") == "user"]
        for i in range(3):
            assert any(f"item{i}" in u for u in users), f"user turn {i} lost"
        assert any("plain question alpha" in u for u in users) and "final question omega" in users[-1]
        assistants = [_texts(m) for m in after if m.get("role") == "assistant"]
        assert any("plain question alpha | messages sent" in a for a in assistants)
        assert sum("Done reading" in a for a in assistants) == 3  # the text after each tool call stays
        # OpenClaw kept appending to the cleaned file: it is still one valid session
        lst = oc.sessions_list()
        assert lst["sessions"][0]["sessionId"] == res["sessionId"]


def _newest(oc) -> str:
    """The newest session's id (edit needs the session named; it never guesses)."""
    r = oc.occd("list", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["sessions"][0]["id"]


