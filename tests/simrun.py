"""A file-era OpenClaw agent, simulated on disk for the daemon's reaction tests and bench/bench_react.py: a
session whose turns each read a tool result, and runs that do what OpenClaw's do to the sessions folder (take the
transcript's `.jsonl.lock` run lock with a live pid, append the turn, update sessions.json, release the lock)."""

from __future__ import annotations

import json
import math
import os
import time
from datetime import datetime, timezone
from pathlib import Path

WINDOW = 60_000          # OpenClaw's budget: 40,000 (reserve floor 20,000)
BUDGET = 40_000
OVERHEAD = 9_500
SID = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
RESULT_CHARS = 2_400     # ~1.2k tokens per tool result (OpenClaw counts them at 2 chars a token)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SimAgent:
    def __init__(self, home: Path, turns: int, *, result_chars: int = RESULT_CHARS):
        self.state = home / ".openclaw"
        self.sdir = self.state / "agents" / "main" / "sessions"
        self.sdir.mkdir(parents=True)
        self.path = self.sdir / f"{SID}.jsonl"
        self.lock = self.path.with_name(self.path.name + ".lock")
        self.result_chars = result_chars
        (self.state / "openclaw.json").write_text(json.dumps(
            {"models": {"providers": {"fake": {"models": [{"id": "fake-model", "contextWindow": WINDOW}]}}}}))
        self.entries = [{"type": "session", "version": 3, "id": SID, "timestamp": _iso(time.time() - 3600),
                         "cwd": "/w"}]
        self.turns = 0
        for _ in range(turns):
            self._add_turn()
        self.path.write_text("".join(json.dumps(e) + "\n" for e in self.entries))
        old = time.time() - 3600
        os.utime(self.path, (old, old))
        self._index(old)

    def _add(self, o: dict) -> None:
        o.update(id=f"e{len(self.entries):07d}", parentId=self.entries[-1]["id"], timestamp=_iso(time.time()))
        self.entries.append(o)

    def _add_turn(self) -> list[dict]:
        self.turns += 1
        i, n0 = self.turns, len(self.entries)
        usage = {"input": 1000 * i, "output": 5, "totalTokens": 1000 * i + 5}
        self._add({"type": "message", "message": {"role": "user", "content": f"Q{i}: READ /w/doc{i}.txt"}})
        self._add({"type": "message", "message": {"role": "assistant", "content": [
            {"type": "toolCall", "id": f"call_{i}", "name": "read", "arguments": {"path": f"/w/doc{i}.txt"}}],
            "usage": usage, "stopReason": "toolUse"}})
        self._add({"type": "message", "message": {"role": "toolResult", "toolCallId": f"call_{i}", "toolName": "read",
                                                 "content": [{"type": "text", "text": (f"doc{i} alpha beta " * 2000)
                                                              [:self.result_chars]}]}})
        self._add({"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": f"done {i}"}],
                                                 "usage": usage, "stopReason": "stop"}})
        return self.entries[n0:]

    def _index(self, t: float) -> None:
        from occd.policy import budget as b

        msgs = b.context_messages([json.loads(x) for x in self.path.read_text().splitlines()])
        est = b.estimate_context(msgs)
        count = len(msgs) - 4  # OpenClaw's check before the last turn
        status = {"estimatedPromptTokens": math.ceil(sum(est.per_message[:count]) * 1.2) + OVERHEAD,
                  "messageCount": count, "contextTokenBudget": WINDOW, "promptBudgetBeforeReserve": BUDGET}
        idx = {"agent:main:main": {"sessionId": SID, "sessionFile": str(self.path), "updatedAt": int(t * 1000),
                                   "model": "fake-model", "modelProvider": "fake", "contextTokens": WINDOW,
                                   "contextBudgetStatus": status}}
        tmp = self.sdir / ".sessions.json.tmp"
        tmp.write_text(json.dumps(idx))
        os.replace(tmp, self.sdir / "sessions.json")

    def predicted(self) -> int:
        from occd.policy import budget as b

        est = b.estimate_context(b.context_messages([json.loads(x) for x in self.path.read_text().splitlines()]))
        return b.with_margin(est.history) + OVERHEAD

    def tool_results(self) -> int:
        return sum(1 for x in self.path.read_text().splitlines() if '"toolResult"' in x and len(x) > 2000)

    # a run, as OpenClaw does it -----------------------------------------------------------------------------
    def start_run(self) -> None:
        fd = os.open(self.lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, json.dumps({"pid": os.getpid(), "createdAt": _iso(time.time())}).encode())
        os.close(fd)

    def append_turn(self) -> None:
        new = self._add_turn()
        with open(self.path, "a") as fh:
            for e in new:
                fh.write(json.dumps(e) + "\n")
                fh.flush()

    def end_run(self) -> float:
        """Update the index, release the lock; returns when (time.time()) the run ended."""
        self._index(time.time())
        os.unlink(self.lock)
        return time.time()

    def run(self, turns: int = 1) -> float:
        self.start_run()
        for _ in range(turns):
            self.append_turn()
        return self.end_run()


class RunsAgent:
    """One session whose turns are runs of several tool calls (tests/test_strip_depth.py, bench/bench_runs_sim.py):
    before each model request of a run, OpenClaw's estimate (occd.policy.budget's rules) is computed and kept in
    `checks`; the first of each run, before its prompt, also in `prompt_checks`; at the run's end, after its reply,
    the history's estimate without the prompt overhead in `end_checks` (OpenClaw checks there too). OpenClaw
    compacts where a check reaches its budget: every request's with `midrun` (compaction.midTurnPrecheck on,
    written to its config), the prompt's and the run's end without (OpenClaw's default). After the run, sessions.json gets the last check as OpenClaw records
    it (contextBudgetStatus). Entries carry a simulated clock: a second apart within a run, `gap_s` between a run's
    end and the next user message. The agent itself never compacts."""

    def __init__(self, home: Path, result_chars: int = RESULT_CHARS, *, window: int = WINDOW, budget: int = BUDGET,
                 overhead: int = OVERHEAD, midrun: bool = True, gap_s: float = 0.0):
        self.state = home / ".openclaw"
        self.sdir = self.state / "agents" / "main" / "sessions"
        self.sdir.mkdir(parents=True)
        self.window, self.budget, self.overhead = window, budget, overhead
        self.midrun, self.gap_s = midrun, gap_s
        self.clock = datetime(2026, 11, 25, 10, tzinfo=timezone.utc).timestamp()
        cfg = {"models": {"providers": {"fake": {"models": [{"id": "fake-model", "contextWindow": window}]}}}}
        if midrun:
            cfg["agents"] = {"defaults": {"compaction": {"midTurnPrecheck": {"enabled": True}}}}
        (self.state / "openclaw.json").write_text(json.dumps(cfg))
        self.path = self.sdir / f"{SID}.jsonl"
        self.path.write_text(json.dumps({"type": "session", "version": 3, "id": SID,
                                         "timestamp": "2026-11-25T10:00:00.000Z", "cwd": "/w"}) + "\n")
        self.result_chars = result_chars
        self.turns = 0
        self.checks = []  # OpenClaw's estimate at each model request
        self.prompt_checks = []  # ... at the first of each run, before its prompt
        self.end_checks = []     # ... of the history alone, at each run's end
        self._index(0)

    def _entries(self) -> list[dict]:
        return [json.loads(x) for x in self.path.read_text().splitlines()]

    def estimate(self) -> tuple[int, int]:
        from occd.policy import budget as b

        msgs = b.context_messages(self._entries())
        return b.with_margin(b.estimate_context(msgs).history) + self.overhead, len(msgs)

    def _add(self, entries: list, msg: dict) -> None:
        last = entries[-1]["id"] if entries and "id" in entries[-1] and entries[-1]["type"] != "session" else None
        self.clock += 1.0
        o = {"type": "message", "id": f"e{self.turns:04d}{len(entries):05d}", "parentId": last,
             "timestamp": _iso(self.clock), "message": msg}
        entries.append(o)
        with open(self.path, "a") as fh:
            fh.write(json.dumps(o) + "\n")

    def _check(self) -> None:
        est, count = self.estimate()
        self.checks.append(est)
        self._last = (est, count)

    def run(self, calls: int) -> bool:
        """One user turn: a run of `calls` tool calls, each result `result_chars` long."""
        i = self.turns + 1
        return self.run_texts([(f"doc{i}_{k} alpha beta " * 4000)[:self.result_chars] for k in range(calls)])

    def run_texts(self, texts: list[str]) -> bool:
        """One user turn: a run of one tool call per text (its result), OpenClaw's check before each of its model
        requests. True when a check OpenClaw makes reached the budget (it would have compacted)."""
        self.turns += 1
        i = self.turns
        first = len(self.checks)
        entries = self._entries()
        if self.turns > 1:
            self.clock += self.gap_s
        self._add(entries, {"role": "user", "content": f"Q{i}: READ {len(texts)} files"})
        for k, text in enumerate(texts):
            self._check()
            self._add(entries, {"role": "assistant", "stopReason": "toolUse", "content": [
                {"type": "toolCall", "id": f"c{i}_{k}", "name": "read", "arguments": {"path": f"/w/d{i}_{k}"}}]})
            self._add(entries, {"role": "toolResult", "toolCallId": f"c{i}_{k}", "toolName": "read", "content": [
                {"type": "text", "text": text}]})
        self._check()
        self._add(entries, {"role": "assistant", "stopReason": "stop", "content": [{"type": "text", "text": f"A{i}"}],
                            "usage": {"input": 1000, "output": 5, "totalTokens": 1005}})
        self._index(self._last[1])
        self.prompt_checks.append(self.checks[first])
        self.end_checks.append(self.estimate()[0] - self.overhead)
        made = self.checks[first:] if self.midrun else [self.checks[first], self.end_checks[-1]]
        return any(c >= self.budget for c in made)

    def over(self) -> list[int]:
        """The checks OpenClaw makes that reached its budget (each a compaction)."""
        made = self.checks if self.midrun else self.prompt_checks + self.end_checks
        return [c for c in made if c >= self.budget]

    def _index(self, count: int) -> None:
        old = time.time()   # the run just ended (idle_seconds 0: settled)
        status = {"estimatedPromptTokens": self.checks[-1] if self.checks else self.overhead, "messageCount": count,
                  "contextTokenBudget": self.window, "promptBudgetBeforeReserve": self.budget}
        (self.sdir / "sessions.json").write_text(json.dumps({"agent:main:main": {
            "sessionId": SID, "sessionFile": str(self.path), "updatedAt": int(old * 1000), "model": "fake-model",
            "modelProvider": "fake", "contextTokens": self.window, "contextBudgetStatus": status}}))
        os.utime(self.path, (old, old))

    def whole_results(self) -> list[str]:
        """The tool calls whose results are still in the transcript, oldest first."""
        return [e["message"]["toolCallId"] for e in self._entries()
                if e.get("type") == "message" and e["message"].get("role") == "toolResult"]
