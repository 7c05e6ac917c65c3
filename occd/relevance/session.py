"""The one record shape discovery gives for every session it finds (OpenClaw, Claude Code or both), what it turns
into for scoring (facts_of), and the small readers both sources share. Split out of occd/relevance/discovery.py
(issue 25), unchanged but for the shared helpers' names (to_epoch, is_task, inside: no longer private)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterable

from occd.relevance.prompts import SKIP_PREFIXES
from occd.relevance.redact import squash
from occd.units import epoch_seconds

ORIGIN_RE = re.compile(r"\[openclaw:agent=([A-Za-z0-9][A-Za-z0-9_.\-]{0,63})\]")
TEXT_KEEP = 2000          # characters of a user message kept in memory (digests use far fewer)


SHOWN_LIMIT = 300  # characters of a user text that to_json shows by default


@dataclass
class Session:
    id: str
    source: str                       # openclaw | claude-code | both
    agent: str | None = None
    key: str | None = None
    claude_session_id: str | None = None
    repo_path: str | None = None
    branch: str | None = None
    first_user_message: str | None = None
    latest_user_task: str | None = None
    last_modified: float | None = None  # epoch seconds
    created: float | None = None
    message_count: int | None = None
    size: int | None = None
    context_tokens: int | None = None
    context_window: int | None = None
    context_source: str | None = None  # occd.openclaw.figure: usage | estimate | openclaw-estimate | index
    compaction_count: int = 0
    model: str | None = None
    running: bool = False
    running_source: str | None = None   # lock | database | claude-code busy (pid N)
    open_in: str | None = None          # a live Claude Code process holds it, idle
    is_self: bool = False               # the session asking (CLAUDE_CODE_SESSION_ID / the agent's session key)
    file_mtime: float | None = None
    index_updated: float | None = None  # the index's updatedAt (OpenClaw), epoch seconds
    origin_agent: str | None = None
    label: str | None = None
    path: str | None = None
    era: str | None = None
    claude_path: str | None = None
    mtime_ns: int | None = None
    warnings: list[str] = field(default_factory=list)
    shown: dict | None = None           # {"first", "latest"}: the texts as to_json shows them (kept with the file)
    # the texts and `shown` that shown_texts last checked (a table and --json ask again: no second digest)
    _shown_from: tuple | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def fingerprint(self) -> str:
        """Changes whenever the session's content can have changed."""
        import hashlib

        parts = (self.source, self.id, self.size, self.mtime_ns, self.last_modified, self.compaction_count,
                 self.message_count, self.claude_session_id)
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]

    def digest_text(self) -> str:
        """The words the keyword fallback compares (unredacted, local only)."""
        return "\n".join(" ".join(x.split()) for x in (self.label, self.first_user_message, self.latest_user_task) if x)

    def context_percent(self) -> float | None:
        from occd.openclaw.figure import percent

        return percent(self.context_tokens, self.context_window)

    def shown_texts(self, text_limit: int = SHOWN_LIMIT) -> tuple[str | None, str | None]:
        """The first and latest user texts as shown: redacted, squashed, cut (kept in `shown`, with a digest of the
        texts they were made from, for the default limit: redacting thousands of texts is most of what listing
        them costs)."""
        if text_limit != SHOWN_LIMIT:
            return squash(self.first_user_message, text_limit) or None, squash(self.latest_user_task, text_limit) or None
        src = self._shown_from
        if (src is not None and src[0] is self.first_user_message
                and src[1] is self.latest_user_task and src[2] is self.shown):  # checked already
            return self.shown["first"], self.shown["latest"]
        import hashlib

        of = hashlib.sha1(repr((self.first_user_message, self.latest_user_task)).encode()).hexdigest()[:16]
        if not (isinstance(self.shown, dict) and self.shown.get("of") == of):
            self.shown = {"of": of, "first": squash(self.first_user_message, text_limit) or None,
                          "latest": squash(self.latest_user_task, text_limit) or None}
        self._shown_from = (self.first_user_message, self.latest_user_task, self.shown)
        return self.shown["first"], self.shown["latest"]

    def to_json(self, text_limit: int = SHOWN_LIMIT) -> dict:
        first, latest = self.shown_texts(text_limit)
        return {
            "id": self.id, "source": self.source, "agent": self.agent, "key": self.key,
            "claudeSessionId": self.claude_session_id, "repoPath": self.repo_path, "branch": self.branch,
            "firstUserMessage": first,
            "latestUserTask": latest,
            "lastModified": _iso(self.last_modified), "created": _iso(self.created),
            "messageCount": self.message_count, "size": self.size, "contextTokens": self.context_tokens,
            "contextWindow": self.context_window, "contextPercent": self.context_percent(),
            "contextSource": self.context_source,
            "compactionCount": self.compaction_count, "model": self.model, "running": self.running,
            "runningSource": self.running_source, "openIn": self.open_in, "self": self.is_self,
            "fileModified": _iso(self.file_mtime),
            "origin": f"[openclaw:agent={self.origin_agent}]" if self.origin_agent else None,
            "originAgent": self.origin_agent, "label": self.label, "path": self.path, "era": self.era,
            "claudePath": self.claude_path,
        }


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def to_epoch(v) -> float | None:
    """ISO string or epoch (s or ms) → epoch seconds."""
    return epoch_seconds(v)


def is_task(text: str | None) -> bool:
    """Something the user asked: not a tool's output, a hook's note, or occd's own seed of a rotated session
    (that is occd writing, not the user asking: it is never shown as the session's task)."""
    from occd.transcript.marks import SEED_MARK

    if not text or not text.strip():
        return False
    s = text.lstrip()
    return not s.startswith(SKIP_PREFIXES + (SEED_MARK,)) and not s.startswith(("<command-name>", "<command-message>"))


def last_entry_time(objs: list[dict]) -> float | None:
    """The newest `timestamp` among transcript entries (ISO or epoch)."""
    best = None
    for o in objs:
        t = to_epoch(o.get("timestamp"))
        if t is not None and (best is None or t > best):
            best = t
    return best


def origin_of(text: str | None) -> str | None:
    m = ORIGIN_RE.search(text or "")
    return m.group(1) if m else None


def inside(path: str | None, repo: Path | None) -> bool:
    if repo is None:
        return True
    if not path:
        return False
    try:
        Path(path).resolve().relative_to(repo)
        return True
    except (ValueError, OSError):
        return False


def facts_of(s: Session):
    from occd.relevance.scoring import Facts

    return Facts(id=s.id, branch=s.branch, last_modified=s.last_modified, created=s.created,
                 message_count=s.message_count, size=s.size, compactions=s.compaction_count or 0,
                 context_tokens=s.context_tokens, context_window=s.context_window, running=s.running,
                 label=s.label, key=s.key, is_self=s.is_self)


def iter_agents(sessions: Iterable[Session]) -> list[str]:
    return sorted({s.agent for s in sessions if s.agent})
