"""Units as people read them, shared by the CLI's renderers and the domain modules that word figures
(occd.openclaw.figure, occd.health.doctor): sizes ("1.5 MB") and token counts ("154k"); and the times OpenClaw
writes (ISO text, epoch seconds or milliseconds) as epoch seconds, for every layer that reads them."""

from __future__ import annotations


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} B"
    for unit in ("KB", "MB", "GB", "TB"):
        n /= 1024.0
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if n >= 10 else f"{n:.1f} {unit}"
    return f"{n:.0f} TB"  # pragma: no cover


def human_tokens(n: int | None) -> str:
    if n is None:
        return "-"
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.0f}k"
    return str(n)


def iso_seconds(v) -> float | None:
    """An ISO time as OpenClaw writes it ("2026-11-29T02:31:18.123Z") in epoch seconds; None for anything else
    or text that does not parse. A time without a zone is local time, as `datetime.fromisoformat` reads it."""
    from datetime import datetime

    if not isinstance(v, str):
        return None
    try:
        return datetime.fromisoformat(v.strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def epoch_seconds(v) -> float | None:
    """ISO text, or an epoch figure in seconds or milliseconds (a figure over 1e11 is ms), in epoch seconds;
    None for anything else (booleans, None, text that does not parse)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return v / 1000.0 if v > 1e11 else float(v)
    return iso_seconds(v) if v else None
