"""Results of the actions, shaped as the CLI contract's JSON (camelCase keys; add fields, never rename)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class StripStats:
    messages_original: int = 0
    messages_after: int = 0
    tool_calls_original: int = 0
    tool_calls_removed: int = 0
    tool_calls_truncated: int = 0
    tool_calls_preserved: int = 0
    size_original: int = 0
    size_after: int = 0
    tokens_before: int | None = None
    tokens_before_source: str | None = None
    tokens_after_estimate: int | None = None
    context_window: int | None = None
    turns: dict = field(default_factory=dict)  # --verbose turn analysis
    estimate_before: int | None = None   # chars/4 estimate of what the model is sent, before and after
    estimate_after: int | None = None

    def to_json(self, clone: bool = False) -> dict:
        from occd.cleaner.plan import contract_statistics

        out = {
            **contract_statistics(self, self.size_after, clone=clone),
            "tokensBefore": self.tokens_before,
            "tokensBeforeSource": self.tokens_before_source,
            "tokensAfterEstimate": self.tokens_after_estimate,
            "contextWindow": self.context_window,
            "estimateBefore": self.estimate_before,
            "estimateAfter": self.estimate_after,
        }
        if self.turns:
            out["turns"] = self.turns
        return out


@dataclass
class EditResult:
    session_id: str
    path: Path
    preset: str
    changed: bool
    backup_path: Path | None
    stats: StripStats
    dry_run: bool = False
    pruned_backups: list[Path] = field(default_factory=list)
    dropped_malformed: list[int] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"success": True, "mode": "edit", "sessionId": self.session_id, "sessionPath": str(self.path),
                "preset": self.preset, "changed": self.changed, "dryRun": self.dry_run,
                "backupPath": str(self.backup_path) if self.backup_path else None,
                "droppedMalformedLines": self.dropped_malformed,
                "statistics": self.stats.to_json()}


@dataclass
class CloneResult:
    source_session_id: str
    cloned_session_id: str
    cloned_path: Path
    resume_command: str | None
    registered_key: str | None
    preset: str | None
    stats: StripStats

    def to_json(self) -> dict:
        return {"success": True, "mode": "clone", "sourceSessionId": self.source_session_id,
                "clonedSessionId": self.cloned_session_id, "clonedSessionPath": str(self.cloned_path),
                "resumeCommand": self.resume_command, "registeredKey": self.registered_key,
                "resumeNote": None if self.resume_command else "not registered and outside the agent's sessions "
                "folder: OpenClaw cannot resume it there; clone again without -o/--no-register to resume it",
                "preset": self.preset, "statistics": self.stats.to_json(clone=True)}


@dataclass
class RestoreResult:
    session_id: str
    path: Path
    restored_from: Path
    backup_of_current: Path | None
    size_before: int
    size_after: int
    discarded_entries: int = 0   # entries appended after the restored backup (--discard-newer): in the pinned backup
    discarded_turns: int = 0
    pinned: bool = False         # the replaced file was kept as a pinned backup (never pruned)

    def to_json(self) -> dict:
        return {"success": True, "mode": "restore", "sessionId": self.session_id, "sessionPath": str(self.path),
                "restoredFrom": str(self.restored_from),
                "backupPath": str(self.backup_of_current) if self.backup_of_current else None,
                "sizeBefore": self.size_before, "sizeAfter": self.size_after,
                "discardedEntries": self.discarded_entries, "discardedTurns": self.discarded_turns,
                "backupPinned": self.pinned}
