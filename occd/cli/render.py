"""Small formatting helpers shared by the human renderers (no heavy imports)."""

from __future__ import annotations

from datetime import datetime, timezone


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


def relative_time(ts: datetime | float | None, now: datetime) -> str:
    """'3m ago', '2h ago', '5d ago'. `ts` is an aware datetime or epoch seconds."""
    if ts is None:
        return "-"
    if not isinstance(ts, datetime):
        ts = datetime.fromtimestamp(ts, tz=timezone.utc)
    secs = (now - ts).total_seconds()
    future = secs < 0
    secs = abs(secs)
    if secs < 60:
        s = f"{int(secs)}s"
    elif secs < 3600:
        s = f"{int(secs // 60)}m"
    elif secs < 86400:
        s = f"{int(secs // 3600)}h"
    else:
        s = f"{int(secs // 86400)}d"
    return f"in {s}" if future else f"{s} ago"


def short_id(session_id: str) -> str:
    return session_id[:13]


def percent_change(before: int, after: int) -> int:
    return round(100 * (before - after) / before) if before else 0


SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | int | None], width: int = 40, ascii_only: bool = False) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return ""
    if len(values) > width:  # downsample by taking the max of each bucket (peaks matter here)
        step = len(values) / width
        buckets = []
        for i in range(width):
            chunk = [v for v in values[int(i * step): int((i + 1) * step) or 1] if v is not None]
            buckets.append(max(chunk) if chunk else None)
        values = buckets
    lo, hi = min(vals), max(vals)
    chars = " .:-=+*#" if ascii_only else SPARK
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        elif hi == lo:
            out.append(chars[len(chars) // 2])
        else:
            out.append(chars[min(len(chars) - 1, int((v - lo) / (hi - lo) * (len(chars) - 1) + 0.5))])
    return "".join(out)


def format_table(headers: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> str:
    """A plain aligned table (no rich import: `occd list` must start fast). Columns in `right` are right-aligned;
    the last column is never padded."""
    widths = [len(h) for h in headers]
    for r in rows:
        for i, cell in enumerate(r):
            widths[i] = max(widths[i], len(cell))

    def line(cells):
        out = []
        for i, c in enumerate(cells):
            if i == len(cells) - 1:
                out.append(c)
            else:
                out.append(c.rjust(widths[i]) if i in right else c.ljust(widths[i]))
        return "  ".join(out).rstrip()

    return "\n".join([line(headers)] + [line(r) for r in rows])
