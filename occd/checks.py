"""The one result type of occd's health checks (`occd doctor`'s registry, the OpenClaw store checks in
occd.openclaw.health): a name, a status — "ok" (✓), "warn" (!: optional or informational) or "fail" (✗: `occd
doctor` exits 1) —, a line of detail, what to do about it, and figures for --json."""

from __future__ import annotations

from dataclasses import dataclass, field

STATUSES = ("ok", "warn", "fail")


@dataclass
class CheckResult:
    name: str
    status: str            # ok | warn | fail
    detail: str
    hint: str | None = None
    data: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")

    @property
    def ok(self) -> bool:
        return self.status != "fail"

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "detail": self.detail, "hint": self.hint, **self.data}
