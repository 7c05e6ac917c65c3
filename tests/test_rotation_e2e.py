"""Rotation end to end with the real OpenClaw, offline (scripted model server): after `occd rotate`, the next
real turn's request to the model holds the seed and not the old history."""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

import pytest

from e2e_harness import OpenClawHome, e2e_available

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def need_e2e():
    why = e2e_available()
    if why:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def _text(m) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    return " ".join(p.get("text", "") for p in c or [] if isinstance(p, dict))


def test_file_era_rotate_then_real_turn(need_e2e, tmp_path, oracle):
    with OpenClawHome("2026.7.1", tmp_path) as oc:
        (oc.workspace / "MEMORY.md").write_text("# Memory\nThe user's cat is called Zanzibar.\n")
        (oc.workspace / "memory").mkdir(exist_ok=True)
        (oc.workspace / "memory" / f"{date.today().isoformat()}.md").write_text("Today we repaired the kettle.\n")
        note = oc.workspace / "notes.txt"
        note.write_text("the secret ingredient is cardamom\n")
        oc.turn(f"Please READ {note} and summarise oldturn0")
        for i in range(1, 7):
            oc.turn(f"plain question oldturn{i}")
        before = oc.requests()[-1]["body"]["messages"]
        assert any(m.get("role") == "tool" for m in before)
        old = oc.sessions_list()["sessions"][0]
        r = oc.occd("rotate", "agent:main:main", "--force", "--json")
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["state"] == "COOLDOWN" and res["oldSessionId"] == old["sessionId"]
        assert Path(res["archivePath"]).exists()

        oc.turn("final question omega")
        sent = oc.requests()[-1]["body"]["messages"]
        texts = [_text(m) for m in sent]
        joined = "\n".join(texts)
        # the seed reached the model: rotation note, MEMORY.md, today's note, the last exchanges
        assert "[occd] This session continues session" in joined
        assert "Zanzibar" in joined and "repaired the kettle" in joined
        for i in range(2, 7):
            assert any(f"oldturn{i}" in t for t in texts if t), f"exchange {i} missing from the seed"
        # ...and not the old history: no tool calls/results, nothing older than the last 5 exchanges
        assert not any(m.get("role") == "tool" for m in sent)
        assert not any(m.get("tool_calls") for m in sent if m.get("role") == "assistant")
        assert not any("oldturn0" in t or "cardamom" in t for t in texts)
        users = [t for m, t in zip(sent, texts) if m.get("role") == "user"]
        assert "final question omega" in users[-1]
        # OpenClaw kept the session and appended to it without duplicating the seed (the writer trap)
        lst = oc.sessions_list()["sessions"]
        cur = next(s for s in lst if s.get("key") == "agent:main:main")
        assert cur["sessionId"] == res["newSessionId"]
        new_path = Path(res["newPath"])
        chk = oracle.check(new_path)
        assert chk["ok"] and not chk["duplicateIds"] and not chk["brokenParent"]
        ids = [json.loads(x).get("id") for x in new_path.read_text().splitlines()[1:]]
        assert len(ids) == len(set(ids))
        assert sum('"[occd] This session continues' in x for x in new_path.read_text().splitlines()) == 1
