"""What the user typed, in a Claude Code transcript line: the prompt Claude Code shows (a slash command as
"/name args"), or None for tool results, meta lines, the compact summary and command output. Shared by the
discovery (tasks, last prompt) and the line counter (occd.relevance.headtail)."""

from __future__ import annotations

import re

SKIP_PREFIXES = ("<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>",
                 "Caveat: The messages below", "[Request interrupted", "<system-reminder>",
                 "<bash-stdout>", "<bash-stderr>", "<user-prompt-submit-hook>", "<task-notification>")
CMD_NAME = re.compile(r"<command-name>\s*/?([^<\s]+)\s*</command-name>")
CMD_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)


def text_of(content) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, dict):
                if b.get("type") in ("tool_result", "toolResult"):
                    return None  # a tool result carried in a user line: not something the user asked
                if b.get("type") == "text" and isinstance(b.get("text"), str):
                    parts.append(b["text"])
        return "\n".join(parts) if parts else None
    return None


def claude_prompt_text(o: dict) -> str | None:
    """What the user typed, for a Claude Code `user` line that Claude Code shows as a prompt (a slash command
    as "/name args"); None for tool results, meta lines, the compact summary, command output and the like."""
    if o.get("type") != "user" or o.get("isMeta") or o.get("isCompactSummary") or o.get("isVisibleInTranscriptOnly") \
            or o.get("isSidechain") is True:
        return None
    msg = o.get("message")
    t = text_of(msg.get("content")) if isinstance(msg, dict) else None
    if not t or not t.strip():
        return None
    s = t.strip()
    if s.startswith(("<command-name>", "<command-message>")):
        m = CMD_NAME.search(s)
        if m is None:
            return None
        a = CMD_ARGS.search(s)
        args = a.group(1).strip() if a else ""
        return f"/{m.group(1)} {args}".strip()
    if s.startswith(SKIP_PREFIXES):
        return None
    return t
