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

# Per session, one piece of work: the first message starts it and the later ones are its next steps, so the
# session is about something a user can name (and `occd select --task` can match by its words).
TOPICS = {
    "webhook": ["the Stripe webhook signature check fails for events with a trailing newline; find out why",
                "add a test for Stripe webhook events with a trailing newline in the body",
                "log the Stripe event id whenever the webhook signature check rejects an event",
                "make the Stripe webhook signature check strip only the final newline of the body",
                "run the webhook tests and tell me which Stripe events still fail the signature check"],
    "billing": ["the invoice PDF shows the wrong VAT rate for Austrian customers",
                "check which Austrian invoices since March used the wrong VAT rate",
                "add a test that invoices for Austrian customers get the 20% VAT rate",
                "regenerate the invoice PDFs of the Austrian customers with the wrong VAT rate"],
    "report": ["build the nightly report: failed jobs, slowest endpoints, error rate per service",
               "the nightly report mail was empty yesterday; check the cron log",
               "add disk usage of /var/lib/postgres to the nightly report"],
    "research": ["compare pgvector and qdrant for 2M embeddings: latency, memory, ops effort",
                 "collect the pgvector and qdrant benchmark numbers into one table",
                 "which of pgvector and qdrant handles updates to embeddings without a full re-index?",
                 "summarise the pgvector and qdrant comparison for the team"],
    "ops": ["rotate the TLS certificate on the staging load balancer",
            "check that the new TLS certificate on the staging load balancer covers api.staging.example.com",
            "add an alert 30 days before the staging TLS certificate expires"],
    "calendar": ["what's on my calendar tomorrow morning?",
                 "move the dentist appointment on my calendar to Thursday afternoon",
                 "block two hours on my calendar on Friday for the quarterly review"],
    "deploys": ["can you remind me what we decided about the Friday deploys?",
                "write the Friday deploy freeze rule into the team notes",
                "who approves an urgent deploy on a Friday?"],
}

FILES = {"webhook": ["app/webhooks.py", "app/providers/stripe.py", "tests/test_webhooks.py"],
         "billing": ["app/billing/invoice.py", "app/billing/vat.py", "tests/test_vat.py"],
         "report": ["jobs/nightly_report.py", "/var/log/cron.log", "jobs/templates/report.html"],
         "research": ["bench/pgvector.md", "bench/qdrant.md", "bench/vector_db.md"],
         "ops": ["/etc/nginx/sites-enabled/staging", "/etc/ssl/staging.pem", "ops/cert_alert.sh"],
         "calendar": ["MEMORY.md", "memory/calendar.md"],
         "deploys": ["MEMORY.md", "memory/team-notes.md"]}


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
                start_ms: int, seed: int, open_call: bool = False, tools: bool = True,
                end_ms: int | None = None) -> StoryResult:
    """Write a transcript whose last usage is about `target_tokens` (the context when it was last measured).
    `end_ms`: when its last entry was written (the entries' times are spread between start_ms and it)."""
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
        text = prefix.format(m=t * 7) + (task if t < len(tasks) else f"again: {task}")
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
                        return _finish(path, lines, session_id, last_usage, n_compactions, start_ms, end_ms)
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
    return _finish(path, lines, session_id, last_usage, n_compactions, start_ms, end_ms)


def _usage(total: int, rnd: random.Random) -> dict:
    out = 80 + rnd.randrange(600)
    cached = int(total * 0.85)
    return {"input": total - cached, "output": out, "cacheRead": cached, "cacheWrite": 0, "totalTokens": total + out,
            "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}}


def _iso(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _finish(path: Path, lines: list[dict], sid: str, tokens: int, compactions: int, start_ms: int,
            end_ms: int | None) -> StoryResult:
    if end_ms is not None:  # spread the entries over [start_ms, end_ms]: none is later than the file's last write
        from datetime import datetime

        def ms(x: str) -> int:
            return int(datetime.fromisoformat(x.replace("Z", "+00:00")).timestamp() * 1000)

        last = max(ms(x["timestamp"]) for x in lines)
        scale = (end_ms - start_ms) / (last - start_ms) if last > start_ms else 1.0

        def fit(t: int) -> int:
            return start_ms + int((t - start_ms) * scale)

        for x in lines:
            x["timestamp"] = _iso(fit(ms(x["timestamp"])))
            if isinstance(x.get("message"), dict) and isinstance(x["message"].get("timestamp"), int):
                x["message"]["timestamp"] = fit(x["message"]["timestamp"])
    data = "\n".join(json.dumps(x, separators=(",", ":")) for x in lines) + "\n"
    path.write_text(data, encoding="utf-8")
    return StoryResult(path, sid, tokens, compactions, len(data.encode()))
