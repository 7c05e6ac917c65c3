"""The demo's transcripts as a story a user can check: real task text per channel, tool calls with the
arguments and results such work has, token figures that match the text (OpenClaw's usage = a fixed prompt
overhead + the context so far, about 4 characters a token), and exactly as many compaction entries as the
index's compactionCount says.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

PROMPT_OVERHEAD = 9_000   # system prompt + tool schemas, in tokens, sent with every request
CHARS_PER_TOKEN = 4
COMPACT_AT_TOKENS = 170_000  # OpenClaw compacts when the context nears the window (200k in the demo)

# Per channel: how a user message is wrapped (OpenClaw prefixes the channel and sender) and what is asked.
CHANNELS = {
    "main": ("", "direct"),
    "telegram": ("[Telegram Alice id:42 +{m}m] ", "direct"),
    "discord": ("[Discord bob#7 +{m}m] ", "direct"),
    "slack": ("[Slack #general Carol +{m}m] ", "channel"),
    "cron": ("[cron nightly-report] ", "cron"),
}

TOPICS = {
    "webhook": ["refactor the webhook handler in app/webhooks.py so every provider goes through one verify() step",
                "the Stripe signature check fails for events with a trailing newline; find out why",
                "add a test for replayed webhook events (same id twice must be ignored)",
                "move the retry logic of webhook deliveries into app/queue.py",
                "why does test_webhooks.py::test_github_push time out on CI?",
                "log the provider and event id on every rejected webhook"],
    "billing": ["the invoice PDF shows the wrong VAT rate for Austrian customers",
                "add a --dry-run flag to scripts/charge_subscriptions.py",
                "check which customers were charged twice on the 14th",
                "write the migration that adds invoices.currency (default EUR)"],
    "report": ["build the nightly report: failed jobs, slowest endpoints, error rate per service",
               "the nightly report mail was empty yesterday; check the cron log",
               "add disk usage of /var/lib/postgres to the nightly report"],
    "research": ["summarise the three papers on retrieval-augmented agents in ~/papers/rag/",
                 "compare pgvector and qdrant for 2M embeddings: latency, memory, ops effort",
                 "collect the benchmark numbers from the qdrant blog posts into a table",
                 "which of these approaches handles updates to documents without a full re-index?"],
    "ops": ["rotate the TLS certificate on the staging load balancer",
            "disk on db-2 is at 91%: find what grew",
            "set up a weekly restic check of the backup repository"],
    "chat": ["can you remind me what we decided about the Friday deploys?",
             "draft a short note to the team about the new on-call rotation",
             "what's on my calendar tomorrow morning?"],
}

FILES = {"webhook": ["app/webhooks.py", "app/queue.py", "tests/test_webhooks.py", "app/providers/stripe.py"],
         "billing": ["app/billing/invoice.py", "scripts/charge_subscriptions.py", "app/billing/vat.py"],
         "report": ["jobs/nightly_report.py", "/var/log/cron.log", "jobs/templates/report.html"],
         "research": ["~/papers/rag/lewis2020.pdf", "~/papers/rag/notes.md", "bench/vector_db.md"],
         "ops": ["/etc/nginx/sites-enabled/staging", "/var/lib/postgres", "ops/restic.sh"],
         "chat": ["MEMORY.md", "memory/2026-11-24.md"]}


@dataclass
class StoryResult:
    path: Path
    session_id: str
    tokens: int           # the last assistant message's usage (what OpenClaw records as totalTokens)
    compactions: int
    size: int


def _code_block(rnd: random.Random, path: str, lines: int) -> str:
    names = ["verify", "handle_event", "deliver", "retry", "parse_payload", "sign", "charge", "render"]
    out = [f"# {path}"]
    for i in range(lines):
        fn = rnd.choice(names)
        out.append(f"def {fn}_{i}(event, *, provider=None):\n    payload = parse_payload(event.body)\n"
                   f"    if not verify(payload, provider):\n        raise InvalidSignature(event.id)\n"
                   f"    return deliver(payload, attempt={i})")
    return "\n".join(out)


def write_story(path: Path, session_id: str, *, topic: str, channel: str, target_tokens: int, compactions: int = 0,
                start_ms: int, seed: int, open_call: bool = False, tools: bool = True) -> StoryResult:
    """Write a transcript whose last usage is about `target_tokens` (the context when it was last measured)."""
    rnd = random.Random(seed)
    prefix, _chat = CHANNELS[channel]
    tasks = TOPICS[topic]
    files = FILES[topic]
    lines: list[dict] = [{"type": "session", "version": 3, "id": session_id,
                          "timestamp": _iso(start_ms), "cwd": "/home/molt/.openclaw/workspace"}]
    clock = [start_ms]
    ids = [0]
    parent = [None]

    def tick() -> int:
        clock[0] += rnd.randrange(5_000, 90_000)
        return clock[0]

    def add(entry: dict) -> str:
        ids[0] += 1
        eid = f"{seed:02x}{ids[0]:06x}"
        entry = {"type": entry.pop("type"), "id": eid, "parentId": parent[0], "timestamp": _iso(clock[0]), **entry}
        lines.append(entry)
        parent[0] = eid
        return eid

    ctx_chars = [0]          # characters of context since the last compaction
    turn_starts: list[str] = []
    turn_chars: list[int] = []
    n_compactions = 0
    # The context grows turn by turn. With compactions to make, it grows to COMPACT_AT_TOKENS, is compacted to
    # the summary and the last two turns, and grows again; after the last one it grows to the target.
    overhead = min(PROMPT_OVERHEAD, target_tokens // 3)  # a small chat agent has a small prompt
    target_chars = max(0, target_tokens - overhead) * CHARS_PER_TOKEN
    compact_chars = (COMPACT_AT_TOKENS - overhead) * CHARS_PER_TOKEN
    call_n = 0
    last_usage = overhead
    t = 0
    while n_compactions < compactions or ctx_chars[0] < target_chars:
        at_start = ctx_chars[0]
        task = tasks[t % len(tasks)]
        text = prefix.format(m=t * 7) + (task if t < len(tasks) else f"{task} (again: it is back after the change)")
        tick()
        uid = add({"type": "message", "message": {"role": "user", "content": text, "timestamp": clock[0]}})
        turn_starts.append(uid)
        ctx_chars[0] += len(text)
        last = n_compactions >= compactions and ctx_chars[0] >= target_chars * 0.95
        if tools and t % 4 != 3:
            for r in range(1 + rnd.randrange(2)):
                calls = []
                for _ in range(1 + rnd.randrange(2)):
                    call_n += 1
                    f = rnd.choice(files)
                    kind = rnd.choice(["read", "exec", "edit"])
                    args = ({"path": f} if kind == "read" else
                            {"command": f"pytest -q {files[-1]}" if topic != "ops" else f"du -sh {f}"} if kind == "exec"
                            else {"path": f, "oldText": "raise InvalidSignature(event.id)",
                                  "newText": "raise InvalidSignature(event.id, provider=provider)"})
                    calls.append({"type": "toolCall", "id": f"toolu_{seed:02d}{call_n:04d}", "name": kind,
                                  "arguments": args})
                say = {"type": "text", "text": f"Looking at {calls[0]['arguments'].get('path') or calls[0]['arguments'].get('command')}."}
                tick()
                last_usage = overhead + ctx_chars[0] // CHARS_PER_TOKEN
                add({"type": "message", "message": {"role": "assistant", "content": [say, *calls],
                                                    "api": "anthropic-messages", "provider": "anthropic",
                                                    "model": "claude-opus-4-6", "usage": _usage(last_usage, rnd),
                                                    "stopReason": "toolUse", "timestamp": clock[0]}})
                ctx_chars[0] += len(json.dumps(calls)) + len(say["text"])
                for c in calls:
                    if open_call and last and c is calls[-1]:
                        return _finish(path, lines, session_id, last_usage, n_compactions)
                    name = c["name"]
                    if name == "read":
                        body = _code_block(rnd, c["arguments"]["path"], 10 + rnd.randrange(30))
                    elif name == "exec":
                        body = (f"$ {c['arguments']['command']}\n" + "".join(
                            f"{files[-1]}::test_case_{i} PASSED\n" for i in range(8 + rnd.randrange(20)))
                            + f"{rnd.randrange(1, 4)} failed, {rnd.randrange(20, 60)} passed in {rnd.randrange(2, 30)}.{rnd.randrange(10)}s")
                    else:
                        body = f"Edited {c['arguments']['path']}: 1 replacement."
                    tick()
                    add({"type": "message", "message": {"role": "toolResult", "toolCallId": c["id"], "toolName": name,
                                                        "content": [{"type": "text", "text": body}], "isError": False,
                                                        "timestamp": clock[0]}})
                    ctx_chars[0] += len(body)
        reply = (f"Done: {task}. " + rnd.choice([
            "The change is in place and the tests pass.", "I left a note in MEMORY.md for tomorrow.",
            "Two tests still fail; they look unrelated (network timeouts).", "Here is the summary you asked for."]))
        tick()
        last_usage = overhead + ctx_chars[0] // CHARS_PER_TOKEN
        add({"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": reply}],
                                            "api": "anthropic-messages", "provider": "anthropic",
                                            "model": "claude-opus-4-6", "usage": _usage(last_usage, rnd),
                                            "stopReason": "stop", "timestamp": clock[0]}})
        ctx_chars[0] += len(reply)
        turn_chars.append(ctx_chars[0] - at_start)
        t += 1
        if n_compactions < compactions and ctx_chars[0] >= compact_chars and len(turn_starts) > 2:
            keep_from = turn_starts[-2]
            summary = (f"## Summary\nWorking on: {tasks[0]}. Done so far: "
                       + "; ".join(tasks[: min(t, len(tasks))]) + ".\nOpen: the CI timeout.")
            tick()
            add({"type": "compaction", "summary": summary, "firstKeptEntryId": keep_from,
                 "tokensBefore": last_usage})
            n_compactions += 1
            # what the model sees now: the summary and the last two turns
            ctx_chars[0] = len(summary) + sum(turn_chars[-2:])
    return _finish(path, lines, session_id, last_usage, n_compactions)


def _usage(total: int, rnd: random.Random) -> dict:
    out = 80 + rnd.randrange(600)
    cached = int(total * 0.85)
    return {"input": total - cached, "output": out, "cacheRead": cached, "cacheWrite": 0, "totalTokens": total + out,
            "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}}


def _iso(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _finish(path: Path, lines: list[dict], sid: str, tokens: int, compactions: int) -> StoryResult:
    data = "\n".join(json.dumps(x, separators=(",", ":")) for x in lines) + "\n"
    path.write_text(data, encoding="utf-8")
    return StoryResult(path, sid, tokens, compactions, len(data.encode()))
