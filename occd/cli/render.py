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


def short_id(session_id: str | None, among=None) -> str:
    """The id as tables show it: from its second group on, unique among `among` (occd.ids)."""
    from occd.ids import short_id as _short

    return _short(session_id, among)


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


# ---- layout: tables and lines that fit the terminal (no rich import: read commands must start fast) ----

def terminal_width(stream=None) -> int | None:
    """Columns to fit: $COLUMNS when set, else the terminal's width; None on a pipe (lines stay whole)."""
    import os
    import shutil
    import sys

    env = os.environ.get("COLUMNS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    stream = stream or sys.stdout
    if getattr(stream, "isatty", lambda: False)():
        return shutil.get_terminal_size((100, 24)).columns
    return None


def wrap_words(text: str, width: int) -> list[str]:
    """Wrap at spaces; a single word longer than the width is cut (never happens mid-word otherwise)."""
    import textwrap

    if width <= 0 or len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


def cut_path(path: str, width: int) -> str:
    """Shorten a path to `width` keeping its file name (the part people look for): '…/archive/01a2….jsonl'."""
    if len(path) <= width:
        return path
    head, _, name = path.rpartition("/")
    if len(name) + 2 > width:
        keep = max(width - 1, 1)
        return name[: keep - keep // 2] + "…" + name[len(name) - keep // 2:] if keep > 2 else name[:width]
    room = width - len(name) - 2
    return ("…" + head[len(head) - room:] if room > 0 else "…") + "/" + name


class Table:
    """The small part of rich.table.Table that occd uses, rendered as plain aligned text fitted to the width:
    columns that may wrap do so at spaces, path columns are cut before the file name, others never change."""

    def __init__(self, *_, **__):
        self.columns: list[dict] = []
        self.rows: list[list[str]] = []

    def add_column(self, header: str, justify: str = "left", no_wrap: bool = False, overflow: str = "wrap", **_):
        self.columns.append({"header": header, "justify": justify, "overflow": None if no_wrap else overflow})

    def add_row(self, *cells) -> None:
        self.rows.append(["" if c is None else str(c) for c in cells])

    def render(self, width: int | None = None) -> str:
        n = len(self.columns)
        widths = [max([len(c["header"])] + [len(r[i]) for r in self.rows]) for i, c in enumerate(self.columns)]
        gap = 2
        if width is not None:
            excess = sum(widths) + gap * (n - 1) - width
            flex = [i for i, c in enumerate(self.columns) if c["overflow"]]
            # shrink the widest flexible columns first, never below their header or 12 columns
            while excess > 0 and flex:
                i = max(flex, key=lambda j: widths[j])
                floor = max(len(self.columns[i]["header"]), 12)
                if widths[i] <= floor:
                    flex.remove(i)
                    continue
                step = min(excess, widths[i] - floor)
                widths[i] -= step
                excess -= step
        lines = []
        for cells in [[c["header"] for c in self.columns]] + self.rows:
            parts = []
            for i, cell in enumerate(cells):
                ov = self.columns[i]["overflow"]
                if len(cell) > widths[i] and ov == "path":
                    parts.append([cut_path(cell, widths[i])])
                elif len(cell) > widths[i]:
                    parts.append(wrap_words(cell, widths[i]))
                else:
                    parts.append([cell])
            for k in range(max(len(p) for p in parts)):
                out = []
                for i, p in enumerate(parts):
                    text = p[k] if k < len(p) else ""
                    last = i == n - 1
                    if self.columns[i]["justify"] == "right":
                        out.append(text.rjust(widths[i]))
                    else:
                        out.append(text if last else text.ljust(widths[i]))
                lines.append((" " * gap).join(out).rstrip())
        return "\n".join(lines)


class Console:
    """Plain output for the human renderers: `print` of strings (no markup is interpreted, so '[running]' in
    data stays as it is) and of Tables, fitted to the terminal width."""

    def __init__(self, stderr: bool = False):
        import sys

        self.stream = sys.stderr if stderr else sys.stdout
        self.width = terminal_width(self.stream)

    def print(self, *objs, wrap: bool = False, indent: int = 0, **_) -> None:
        """`wrap`: a long line is wrapped at spaces to the terminal width, continuation lines indented."""
        import click

        text = " ".join(o.render(self.width) if isinstance(o, Table) else str(o) for o in objs)
        if wrap and self.width and any(len(x) > self.width for x in text.split("\n")):
            import textwrap

            lead = len(text) - len(text.lstrip("\n"))
            body = text[lead:]
            text = "\n" * lead + "\n".join(textwrap.wrap(body, self.width, subsequent_indent=" " * indent,
                                                          break_long_words=False, break_on_hyphens=False))
        click.echo(text, file=self.stream)
