"""Domain errors. Every error a user can meet is an OccdError: one line, a hint, a stable code, an exit code.

The CLI maps them to stderr + exit code in one place (occd.cli.common.handle_errors); nothing else prints them.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_USER = 1
EXIT_USAGE = 2
EXIT_TEMPFAIL = 75  # EX_TEMPFAIL: locked or busy, retry later


class OccdError(Exception):
    """A failure the user can act on. `message` is one line; `hint` says what to do."""

    exit_code = EXIT_USER
    code = "ERROR"

    def __init__(self, message: str, hint: str | None = None, *, code: str | None = None, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if code:
            self.code = code
        self.details = details or {}

    def to_json(self) -> dict:
        out = {"code": self.code, "message": self.message, "hint": self.hint}
        if self.details:
            out["details"] = self.details
        return out


class UsageError(OccdError):
    exit_code = EXIT_USAGE
    code = "USAGE"


class BusyError(OccdError):
    """The session, store or ledger is in use right now; the same call may work later (exit 75)."""

    exit_code = EXIT_TEMPFAIL
    code = "SESSION_IN_USE"


class NotFoundError(OccdError):
    code = "NOT_FOUND"


class ParseError(OccdError):
    code = "PARSE_ERROR"


class WriteError(OccdError):
    code = "WRITE_FAILED"


class UnsupportedEraError(OccdError):
    code = "UNSUPPORTED_ERA"
