"""Rotation end to end with the real OpenClaw, offline (scripted model server): after `occd rotate`, the next
real turn's request to the model holds the seed and not the old history. Releases: OCCD_E2E_RELEASES."""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

import pytest

from e2e_harness import OpenClawHome, edge_releases, message_text, newest_release, require_e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def need_e2e():
    require_e2e()


_text = message_text


# the file era's last release, which file-era users run (2026.7.1's loader takes occd's files in the edit, lean
# and closed-loop e2e tests and the oracle checks every written file; OCCD_E2E_RELEASES runs any)
@pytest.mark.parametrize("version", newest_release("file"))
def test_file_era_rotate_then_real_turn(need_e2e, tmp_path, oracle, version):
    with OpenClawHome(version, tmp_path) as oc:
        (oc.workspace / "MEMORY.md").write_text("# Memory\nThe user's cat is called Zanzibar.\n")
        (oc.workspace / "memory").mkdir(exist_ok=True)
        (oc.workspace / "memory" / f"{date.today().isoformat()}.md").write_text("Today we repaired the kettle.\n")
        note = oc.workspace / "notes.txt"
        note.write_text("the secret ingredient is cardamom\n")
        oc.turn(f"Please READ {note} and summarise oldturn0")
        note2 = oc.workspace / "notes2.txt"
        note2.write_text("the second ingredient is nutmeg\n")
        for i in range(1, 7):  # oldturn5 is a READ order again: it is among the exchanges the seed recalls
            oc.turn(f"Please READ {note2} and summarise oldturn{i}" if i == 5 else f"plain question oldturn{i}")
        before = oc.requests()[-1]["body"]["messages"]
        assert any(m.get("role") == "tool" for m in before)
        old = oc.sessions_list()["sessions"][0]
        r = oc.occd("rotate", "agent:main:main", "--force", "--json")
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["state"] == "COOLDOWN" and res["oldSessionId"] == old["sessionId"]
        assert Path(res["archivePath"]).exists()

        n_before = len(oc.requests())
        oc.turn("final question omega")
        # one model call: the recalled "Please READ <path>" is quoted history, not an order carried out again
        assert len(oc.requests()) == n_before + 1
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
        # the recalled exchanges reached the model inside the seed, quoted, never as real user turns
        assert not any("oldturn" in u and "[occd]" not in u for u in users)
        seed_msgs = [u for u in users if "[occd] This session continues" in u]
        assert len(seed_msgs) == 1 and "<occd-recalled-history>" in seed_msgs[0]
        seed_lines = seed_msgs[0].splitlines()
        for i in range(2, 7):  # every recalled line is quoted, the READ order included
            assert any(ln.startswith(">") and f"oldturn{i}" in ln for ln in seed_lines), i
            assert not any(f"oldturn{i}" in ln and not ln.startswith(">") for ln in seed_lines), i
        assert any(ln.startswith(">") and f"READ {note2}" in ln for ln in seed_lines)
        assert not any("nutmeg" in t for t in texts)  # the old read's result is not carried over
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


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, ValueError, IndexError):
                pass
    return out


class Gateway:
    """`openclaw gateway run` for the e2e home, stopped by pid (and its own children) at the end."""

    def __init__(self, oc: OpenClawHome, port: int):
        self.oc = oc
        oc.env["OPENCLAW_GATEWAY_PORT"] = str(port)  # the CLI's gateway calls (and occd's) go to this gateway
        oc.env["OCCD_OPENCLAW_BIN"] = oc.oc
        self.port = port
        self.log = open(oc.root / "gateway.log", "w")
        self.proc = self._spawn()

    def _spawn(self):
        import subprocess

        return subprocess.Popen([self.oc.oc, "gateway", "run", "--port", str(self.port)], env=self.oc.env,
                                stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, timeout: float = 300) -> None:
        import time

        retries = 2  # a loaded machine can make the gateway miss its 5 s start-up lease deadline: start again
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None and retries and "did not become ready" in (
                    self.oc.root / "gateway.log").read_text(errors="replace"):
                retries -= 1
                self.proc = self._spawn()
                deadline = time.monotonic() + timeout
            p = self.oc.openclaw("gateway", "call", "sessions.describe", "--params", '{"key":"agent:main:main"}',
                                 "--json", timeout=60)
            if p.returncode == 0:
                return
            time.sleep(1)
        raise RuntimeError("the gateway did not come up: " + (self.oc.root / "gateway.log").read_text()[-1000:])

    def stop(self) -> None:
        import signal

        pids = [self.proc.pid] + _children(self.proc.pid)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=20)
        except Exception:  # noqa: BLE001
            self.proc.kill()
        self.log.close()


def _rotate_once(oc, n_expected_before: int | None = None) -> dict:
    n_before = len(oc.requests())
    r = oc.occd("rotate", "agent:main:main", "--json", timeout=600)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["state"] == "COOLDOWN" and res["modelCalls"] == 1
    assert len(oc.requests()) == n_before + 1  # the seed cost exactly one model call (no quoted READ redone)
    return res


def _final_turn(oc, message: str) -> list[dict]:
    p = oc.openclaw("agent", "--agent", "main", "--message", message, "--json", timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return oc.requests()[-1]["body"]["messages"]


def _scan_matches(oc) -> None:
    """`occd run --once` sees the sessions and token figures `openclaw sessions list --json` shows."""
    r = oc.occd("run", "--once", "--json")
    assert r.returncode == 0, r.stderr
    st = json.loads(oc.occd("status", "--json").stdout)
    ours = {s["sessionId"]: s for a in st["agents"] for s in a["biggest"]}
    theirs = oc.sessions_list()["sessions"]
    assert {s["sessionId"] for s in theirs} == set(ours)
    for s in theirs:
        assert (ours[s["sessionId"]]["compactions"] or 0) == (s.get("compactionCount") or 0)
        if s.get("totalTokens") is not None:
            assert ours[s["sessionId"]]["contextTokens"] == s["totalTokens"]


@pytest.mark.parametrize("version", edge_releases("db"))  # (9.5's schema 21: test_openclaw_e2e, test_upgrade_e2e)
def test_db_era_rotate_twice_then_real_turn(need_e2e, tmp_path, version):
    """Database era: occd rotates through the gateway (describe → reset → chat.send deliver:false, waits for the
    seed's reply) with exactly one model call; the next real turn's request holds the seed and not the old
    history (the old messages only as quoted history inside the seed, MEMORY.md not repeated in it). Then a
    second rotation: its seed holds no exchange from before the first reset and not the first seed."""
    with OpenClawHome(version, tmp_path) as oc:
        (oc.workspace / "MEMORY.md").write_text("# Memory\nThe user's cat is called Zanzibar.\n")
        note = oc.workspace / "notes.txt"
        note.write_text("the secret ingredient is cardamom\n")
        oc.turn(f"Please READ {note} and summarise oldturn0")
        oc.turn("plain question oldturn1")
        before = [_text(m) for m in oc.requests()[-1]["body"]["messages"] if m.get("role") == "user"]
        assert any("summarise oldturn0" in u and "[occd]" not in u for u in before)  # the old history, as turns
        _scan_matches(oc)
        st = json.loads(oc.occd("status", "--json").stdout)
        assert st["agents"][0]["era"] == "db" and st["lastScan"]["errors"] == 0, st["lastScan"]
        r = oc.occd("edit", "agent:main:main", "--strip-tools", "--json")  # occd never writes OpenClaw's database
        assert r.returncode == 1 and "openclaw sessions compact" in r.stderr
        from e2e_harness import free_port

        gw = Gateway(oc, free_port())
        try:
            gw.wait_ready()
            r = oc.occd("rotate", "agent:main:main", "--dry-run", "--json")
            assert r.returncode == 0, r.stderr
            dry = json.loads(r.stdout)
            assert dry["era"] == "db" and dry["modelCall"] is True and "Zanzibar" not in dry["content"][0]
            assert "<occd-recalled-history>" in dry["content"][0] and "> Please READ" in dry["content"][0]
            res = _rotate_once(oc)
            sent = _final_turn(oc, "final question omega")
            texts = [_text(m) for m in sent]
            assert any("[occd] This session continues session" in t for t in texts)
            assert not any(m.get("role") == "tool" for m in sent)
            assert not any(m.get("tool_calls") for m in sent if m.get("role") == "assistant")
            users = [t for m, t in zip(sent, texts) if m.get("role") == "user"]
            assert not any(("oldturn0" in u or "oldturn1" in u) and "[occd]" not in u for u in users)  # no old turn
            assert any("final question omega" in u for u in users[-2:])  # 9.6 adds an internal-context turn
            seed_msgs = [u for u in users if "[occd] This session continues" in u]
            assert len(seed_msgs) == 1 and "oldturn1" in seed_msgs[0] and "Zanzibar" not in seed_msgs[0]
            # the ledger knows where the old history lives (behind OpenClaw's reset marker)
            led = oc.occd("status", "--rotations", "--json")
            rows = json.loads(led.stdout)["rotations"]
            assert rows[0]["state"] == "COOLDOWN" and "before its reset" in rows[0]["archivePath"]
            # occd's view is the context after the reset: info counts what OpenClaw sends, not the old history
            info = json.loads(oc.occd("info", "agent:main:main", "--json").stdout)["analysis"]
            # (before: 10 messages, the old turns and their tool call counted too)
            assert info["messages"] <= len(sent) + 1 and info["toolCalls"] == 0, info  # + the final reply
            assert info["brokenParentLine"] is None
            _scan_matches(oc)

            # a second rotation right after: the seed carries what came after the first reset only
            oc.openclaw("agent", "--agent", "main", "--message", "plain question midturn2", "--json", timeout=300)
            r = oc.occd("rotate", "agent:main:main", "--dry-run", "--json")
            dry2 = json.loads(r.stdout)["content"][0]
            assert "midturn2" in dry2 and "final question omega" in dry2
            assert "oldturn" not in dry2 and dry2.count("[occd] This session continues") == 1  # no nested seed
            res2 = _rotate_once(oc)
            assert res2["rotationId"] != res["rotationId"]
            sent = _final_turn(oc, "final question sigma")
            users = [_text(m) for m in sent if m.get("role") == "user"]
            seed_msgs = [u for u in users if "[occd] This session continues" in u]
            assert len(seed_msgs) == 1, "only the second seed is context"
            assert "midturn2" in seed_msgs[0] and "oldturn" not in seed_msgs[0]
            assert seed_msgs[0].count("[occd] This session continues") == 1
            assert not any("oldturn" in u or "midturn2" in u for u in users if "[occd]" not in u)
            _scan_matches(oc)
        finally:
            gw.stop()
