"""The lean view on real OpenClaw releases (offline, tests/e2e): `occd lean enable` installs the
plugin, the gateway loads it (only the gateway does: `agent --local` runs without startup plugins), and then

- the model's requests lack the old tool calls and results, the current turn's are there;
- OpenClaw asks the engine once per run (not before each model request of the run);
- OpenClaw's store (read-only: SQLite rows, zstd-decoded, or the .jsonl) still holds every one;
- a policy change (drop -> stub) takes effect on the next turn without a restart;
- `occd lean disable` (and a gateway restart) gives the model the full history again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from e2e_harness import OpenClawHome, require_e2e

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
PORTS = {"2026.9.6": 18740, "2026.8.1": 18744, "2026.7.1": 18748}  # this suite's model-server/gateway ports


def gateway_turn(oc: OpenClawHome, message: str) -> dict:
    p = oc.openclaw("agent", "--agent", "main", "--message", message, "--json", timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout[p.stdout.find("{"):])


def start_gateway(oc: OpenClawHome) -> None:
    """The harness's gateway start, after OpenClaw's state migrations (`doctor --fix`), tried again when a loaded
    machine times its start-up out (2026.9.6: "state lease heartbeat did not become ready")."""
    for attempt in range(3):
        oc.openclaw("doctor", "--fix", "--non-interactive", timeout=600)
        try:
            oc.start_gateway(timeout=400)
            return
        except RuntimeError:
            oc.stop_gateway()
            if attempt == 2:
                raise


def calls_and_results(body: dict) -> tuple[list[str], dict[str, str]]:
    """Paths of the read calls in a chat-completions request, and each call id's result text."""
    paths, results, names = [], {}, {}
    for m in body["messages"]:
        for tc in m.get("tool_calls") or []:
            args = json.loads(tc["function"]["arguments"] or "{}")
            names[tc["id"]] = args.get("path") or args.get("file_path") or ""
            paths.append(Path(names[tc["id"]]).name)
        if m.get("role") == "tool":
            c = m.get("content")
            results[Path(names.get(m.get("tool_call_id"), "?")).name] = c if isinstance(c, str) else json.dumps(c)
    return paths, results


def stored_tool_blocks(state_dir: Path) -> tuple[int, int]:
    """Tool calls and results in the agent's stored transcript (occd's read-only readers of both eras)."""
    from occd.errors import OccdError
    from occd.openclaw import open_store

    try:
        store = open_store(state_dir, "main")
        lines = list(store.read_lines(store.latest()))
    except OccdError:  # 2026.8.1's schema (no event_zstd) is not one occd's reader knows: plain rows, read-only
        import sqlite3

        db = state_dir / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        lines = [r[0] for r in c.execute("SELECT event_json FROM transcript_events ORDER BY session_id, seq")]
        c.close()
    n_calls = n_results = 0
    for line in lines:
        e = json.loads(line)
        msg = e.get("message") if isinstance(e.get("message"), dict) else {}
        if msg.get("role") == "toolResult":
            n_results += 1
        if msg.get("role") == "assistant" and isinstance(msg.get("content"), list):
            n_calls += sum(1 for b in msg["content"] if isinstance(b, dict) and b.get("type") == "toolCall")
    return n_calls, n_results


@pytest.mark.parametrize("version", ["2026.9.6", "2026.8.1", "2026.7.1"])
def test_lean_view_on_a_real_gateway(version, tmp_path, monkeypatch):
    require_e2e()
    oc = OpenClawHome(version, tmp_path)
    oc.port = PORTS[version]
    with oc:
        cfg_path = Path(oc.env["OPENCLAW_CONFIG_PATH"])
        cfg = json.loads(cfg_path.read_text())
        oc.gateway_port = cfg["gateway"]["port"] = PORTS[version] + 1
        cfg_path.write_text(json.dumps(cfg, indent=2))
        oc.env["OCCD_OPENCLAW_BIN"] = oc.oc
        p = oc.occd("lean", "enable", "--yes", "--json", timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        res = json.loads(p.stdout)
        assert res["release"] == version
        policy_path = Path(res["policy"])
        pol = json.loads(policy_path.read_text())
        # tiny documents: a sticky boundary that moves at any size (highWater/lowWater: plugin/sticky.js)
        pol["sessions"]["agent:main:main"] = {"mode": "drop", "keepTurns": 1, "batchTurns": 1, "neverHide": [],
                                              "keepResultsUnderChars": 0, "highWater": 0.001, "lowWater": 0.001}
        policy_path.write_text(json.dumps(pol))
        docs = []
        for i in (1, 2, 3):
            d = oc.workspace / f"doc{i}.txt"
            d.write_text(f"document {i}: " + "lorem ipsum " * 300)
            docs.append(d)
        start_gateway(oc)
        for d in docs:
            gateway_turn(oc, f"READ {d} please")
        reqs = [r["body"] for r in oc.requests()]
        last = reqs[-1]  # turn 3 after its tool call: turn 2 kept (keep 1), turn 1 hidden, turn 3 whole
        paths, results = calls_and_results(last)
        assert paths == ["doc2.txt", "doc3.txt"], paths
        assert all("lorem ipsum" in results[n] for n in ("doc2.txt", "doc3.txt"))
        first_of_turn3 = next(r for r in reqs if f"READ {docs[2]}" in json.dumps(r["messages"]))
        assert calls_and_results(first_of_turn3)[0] == ["doc2.txt"]
        # the store still holds every call and result
        assert stored_tool_blocks(oc.state_dir) == (3, 3)
        stats = json.loads((Path(oc.env["OCCD_HOME"]) / "lean" / "stats.json").read_text())
        assert stats["sessions"]["agent:main:main"]["callsHidden"] >= 1
        # OpenClaw asks a context engine that does not own compaction once per run, before its first request,
        # not before each request of the run (each run here: the read, then the answer)
        assert len(reqs) >= 6 and stats["sessions"]["agent:main:main"]["calls"] == 3, (len(reqs), stats)

        # a policy change takes effect on the next turn, without a restart
        pol["sessions"]["agent:main:main"]["mode"] = "stub"
        policy_path.write_text(json.dumps(pol))
        gateway_turn(oc, "and now a plain question")
        paths, results = calls_and_results(oc.requests()[-1]["body"])
        assert paths == ["doc1.txt", "doc2.txt", "doc3.txt"]
        assert results["doc1.txt"].find("[occd: result of read hidden") >= 0 and "lorem" not in results["doc1.txt"]
        assert results["doc2.txt"].find("[occd:") >= 0 and "lorem ipsum" in results["doc3.txt"]

        # disabling gives the model the full history again (after the restart OpenClaw asks for)
        p = oc.occd("lean", "disable", "--json", timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        plugins = json.loads(cfg_path.read_text()).get("plugins") or {}
        assert (plugins.get("slots") or {}).get("contextEngine", "legacy") == "legacy"  # 9.6 drops the key
        oc.stop_gateway()
        start_gateway(oc)
        gateway_turn(oc, "one more plain question")
        paths, results = calls_and_results(oc.requests()[-1]["body"])
        assert paths == ["doc1.txt", "doc2.txt", "doc3.txt"]
        assert all("lorem ipsum" in results[n] for n in ("doc1.txt", "doc2.txt", "doc3.txt"))
        assert stored_tool_blocks(oc.state_dir) == (3, 3)
