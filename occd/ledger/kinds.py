"""The kinds of action occd records in its ledger (no imports: the ledger's core and the CLI both read it)."""

from __future__ import annotations

# Every action kind occd records (Ledger.record_action refuses others): the one list `history --kind` accepts
# and its help names. A job's own failure is recorded as `job:<name>` (JOB_KIND_PREFIX).
ACTION_KINDS = ("edit", "strip", "clone", "restore", "rotate", "rotate-undo", "archive", "compact", "lean",
                "lean-check", "verify-strip", "lean-move")
JOB_KIND_PREFIX = "job:"


def is_action_kind(kind: str) -> bool:
    return kind in ACTION_KINDS or (kind.startswith(JOB_KIND_PREFIX) and len(kind) > len(JOB_KIND_PREFIX))
