"""What counts as a compaction: the one definition every counter in occd uses (spiral detection, the rotation
trigger's transcript facts, the budget trigger, `occd list`/`status` COMPACT figures read from transcripts).

Two kinds:
- OpenClaw's own: a transcript entry `{"type": "compaction", ...}`.
- Provider-native (the default on OpenAI and Anthropic API-key routes since OpenClaw 2026.10.2, CHANGELOG
  2026.10.2 / #168164): NO compaction entry; the provider's checkpoint rides on an assistant message as
  `message.providerReplay` = {"v": 1, "type": <one of PROVIDER_COMPACTION_TYPES>, "id", "data", ...}. Shape and
  types from openclaw/openclaw src/agents/transcript-redact-replay.ts (REPLAY_DESCRIPTORS) and its
  isCompactionReplayCheckpoint (the owner message, found with findLast, carries it; OpenClaw strips it itself
  after its own local history rewrites). The OpenAI endpoint path rewrites the last assistant message in place
  and bumps the entry's `compactionCount` (read from the session entry wherever occd reads compactionCount).

A message carrying such a checkpoint is never hidden or rewritten by occd (the provider's replay depends on it):
the strip planner keeps it byte-identical (occd.cleaner.plan) and the lean view plugin passes it through.
"""

from __future__ import annotations

PROVIDER_COMPACTION_TYPES = frozenset({"anthropic-compaction", "openai-responses-compaction",
                                       "openai-responses-retained-compaction"})


def provider_checkpoint(message) -> str | None:
    """The checkpoint type when `message` (a transcript message's `message` object) is an assistant message
    carrying a provider-native compaction checkpoint, else None."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return None
    replay = message.get("providerReplay")
    t = replay.get("type") if isinstance(replay, dict) else None
    return t if t in PROVIDER_COMPACTION_TYPES else None


def is_compaction(entry) -> bool:
    """A transcript entry (a parsed .jsonl line) that is a compaction: OpenClaw's `compaction` entry, or an
    assistant message carrying a provider-native compaction checkpoint."""
    if not isinstance(entry, dict):
        return False
    t = entry.get("type")
    if t == "compaction":
        return True
    return t == "message" and provider_checkpoint(entry.get("message")) is not None
