"""Formatting helpers shared by the human renderers, and their Table/Console drawn by rich (imported lazily,
inside the methods: importing this module costs nothing)."""

from __future__ import annotations

import os
import re
import sys
from datetime import datetime, timezone

from occd.units import human_bytes, human_tokens  # noqa: F401  (the renderers import them from here too)

# ---- terminal safety: what came from OpenClaw's files (keys, labels, agent names, paths, subjects, error
# messages) must never reach a terminal as control characters: OSC 52 (clipboard writes), OSC 8 (links), CSI
# (colours, cursor moves), CR (overwrite a line), BEL, C1 controls, bidi overrides, or lone surrogates (which
# cannot even be encoded). `clean` shows each as an escape (`\x1b`, `\r`, `\u202e`); in one-line text (table
# cells, error lines) newlines and tabs too, so data cannot make fake rows. Every human line occd writes goes
# through SafeStream (installed by the CLI group), which applies clean(one_line=False) as the last step: only
# occd's own newlines pass. Colour comes only from rich (Console below), which writes past SafeStream to the
# real stream, after Console.print and Table have cleaned every string they were given. Human renderers that
# put data into lines of their own clean it first (clean_data), so a newline in a key makes no fake line.
# --json output is written to the byte buffer and keeps the data, escaped as JSON does. ----

_CTRL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE_MULTI = re.compile(f"[{_CTRL}]")
_UNSAFE_ONE = re.compile(f"[{_CTRL}\t\n]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _esc(m: re.Match) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    o = ord(c)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def clean(text, *, one_line: bool = True) -> str:
    """`text` safe to print: control characters shown as escapes (one_line: newlines and tabs too)."""
    if text is None:
        return ""
    text = str(text)
    return (_UNSAFE_ONE if one_line else _UNSAFE_MULTI).sub(_esc, text)


def clean_cells(rows: list[list]) -> list[list[str]]:
    """Every cell of a table cleaned to one line. Text cells with nothing to escape anywhere in the table (one
    search over them all: 5,000 rows in `occd sessions`) are kept as they are."""
    from itertools import chain

    cells = list(chain.from_iterable(rows))
    if set(map(type, cells)) <= {str} and not _UNSAFE_ONE.search("".join(cells)):
        return [list(r) for r in rows]
    return [[clean(c) for c in r] for r in rows]


def clean_data(obj):
    """A copy of a JSON-like value with every string cleaned to one line (dict keys too): for the human
    renderers, which put data into lines of their own making."""
    if isinstance(obj, str):
        return clean(obj)
    if isinstance(obj, dict):
        return {clean(k) if isinstance(k, str) else k: clean_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_data(v) for v in obj]
    return obj


class SafeStream:
    """A text stream that writes everything through clean(one_line=False) to the stream it wraps (`raw`)."""

    def __init__(self, stream):
        self.raw = stream

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            return self.raw.write(s)
        self.raw.write(clean(s, one_line=False))
        return len(s)

    def writelines(self, lines) -> None:
        for ln in lines:
            self.write(ln)

    def __getattr__(self, name):
        return getattr(self.raw, name)


def raw_stream(stream):
    """The stream under a SafeStream (rich writes there: its input is cleaned already, its colours are occd's)."""
    return stream.raw if isinstance(stream, SafeStream) else stream


def install_safe_streams() -> None:
    """Wrap sys.stdout and sys.stderr in SafeStream (once)."""
    for name in ("stdout", "stderr"):
        cur = getattr(sys, name)
        if cur is not None and not isinstance(cur, SafeStream):
            setattr(sys, name, SafeStream(cur))


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 session', '2 sessions' (`many`: an irregular plural, 'emergencies')."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def plain(v) -> str:
    """A value as people read it, never a Python repr: yes/no, '-' for nothing, '2.5' not '2.50000', a map as
    'key value, ...', a list comma-separated ('none' when empty)."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict):
        return ", ".join(f"{k} {plain(x)}" for k, x in v.items()) or "none"
    if isinstance(v, (list, tuple, set)):
        return ", ".join(plain(x) for x in v) or "none"
    return str(v)


def use_color(stream=None) -> bool:
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


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
    """The id as tables show it: from its second group on, unique among `among` (occd.openclaw.ids)."""
    from occd.openclaw.ids import short_id as _short

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
    """A plain aligned table, printed without importing rich (`occd list` must start fast). Columns in `right`
    are right-aligned; the last column is never padded. Cells are cleaned (one line each)."""
    from itertools import zip_longest

    rows = clean_cells(rows)
    widths = [len(h) for h in headers]
    for i, column in enumerate(zip_longest(*rows, fillvalue="")):  # (column by column: 5,000 rows)
        widths[i] = max(widths[i], max(map(len, column)))
    pad = [str.rjust if i in right else str.ljust for i in range(len(widths))]

    def line(cells):  # every cell padded to its column but the last
        padded = [p(c, w) for p, w, c in zip(pad, widths, cells[:-1])]
        return "  ".join(padded + list(cells[-1:])).rstrip()

    return "\n".join([line(headers)] + [line(r) for r in rows])


LAST_MIN = 30  # fit_table: narrower than this, the last column's text goes on lines of its own under each row


def fit_table(headers: list[str], rows: list[list[str]], right: set[int] = frozenset(), width: int | None = None,
              last_min: int = LAST_MIN, indent: int = 4) -> str:
    """format_table fitted to `width` columns (None: a pipe, lines stay whole), without rich. The last column
    (free text: a task, a note) is wrapped at spaces inside its column when at least `last_min` columns are
    left for it, or when its longest word fits; otherwise it is printed under each row, indented by `indent` and wrapped to the width. The
    other columns are short figures and ids and are never cut."""
    if width is None or not rows:
        return format_table(headers, rows, right)
    rows = clean_cells(rows)
    n = len(headers)
    widths = [max([len(headers[i])] + [len(r[i]) for r in rows]) for i in range(n - 1)]
    lead = sum(widths) + 2 * (n - 1)  # where the last column starts
    if lead + max([len(headers[-1])] + [len(r[-1]) for r in rows]) <= width:
        return format_table(headers, rows, right)

    def cells(r):
        return "  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r[:-1]))

    out = []
    room = width - lead
    longest_word = max([len(w) for r in rows for w in r[-1].split()] or [0])
    if room >= len(headers[-1]) and (room >= last_min or longest_word <= room):
        out.append((cells(headers) + "  " + headers[-1]).rstrip())
        for r in rows:
            parts = wrap_words(r[-1], width - lead) if r[-1] else [""]
            out.append((cells(r) + "  " + parts[0]).rstrip())
            out += [" " * lead + p for p in parts[1:]]
        return "\n".join(out)
    out.append(cells(headers).rstrip())
    for r in rows:
        out.append(cells(r).rstrip())
        if r[-1]:
            out += [" " * indent + p for p in wrap_words(r[-1], max(width - indent, 1))]
    return "\n".join(out)


# ---- layout: tables and lines that fit the terminal, drawn by rich (imported lazily, inside the methods, so
# read commands and `occd --help` do not pay for it: tests/test_cli_help.py checks) ----

PIPE_WIDTH = 100_000  # on a pipe (no TTY, no $COLUMNS) rich gets a width no line reaches: lines stay whole


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
    if width <= 0 or len(text) <= width:
        return [text]
    words = text.split(" ")
    if all(0 < len(w) <= width for w in words) and not _OTHER_SPACE.search(text):
        # the common case, single spaces and no word longer than the width: a greedy fill gives what textwrap
        # gives (tests/test_table_cells.py compares them) in a fraction of its time (a table of 5,000 rows)
        lines, line = [], words[0]
        for w in words[1:]:
            if len(line) + 1 + len(w) <= width:
                line += " " + w
            else:
                lines.append(line)
                line = w
        lines.append(line)
        return lines
    import textwrap

    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


_OTHER_SPACE = re.compile(r"[^\S ]")  # whitespace other than a plain space (tabs, newlines, ...): textwrap's way


def clip_words(text: str | None, limit: int) -> str:
    """`text` on one line, at most about `limit` characters, cut after a whole word ('…' marks the cut)."""
    text = " ".join((text or "").split())
    if len(text) <= limit:
        return text
    head = text[: limit + 1].rsplit(" ", 1)[0] if " " in text[: limit + 1] else text[:limit]
    return head.rstrip(" ,;:") + "…"


def wrap_text(text: str, width: int | None, indent: int = 2) -> str:
    """A line (or lines) wrapped at spaces to `width` (None: whole), continuation lines indented by `indent`;
    without rich, for the commands that must start fast."""
    import textwrap

    if not width:
        return text
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        lead = len(line) - len(line.lstrip(" "))
        out += textwrap.wrap(line, width, subsequent_indent=" " * (lead + indent), break_long_words=False,
                             break_on_hyphens=False) or [line]
    return "\n".join(out)


def _cut_word(word: str, width: int) -> str:
    """A path-like word cut to `width` (cut_path), the punctuation around it kept: "(/long/…/name.toml;"."""
    import re

    m = re.match(r"^([(\[\"'`]*)(.*?)([)\]\"'`,;:.]*)$", word)
    pre, core, post = m.groups() if m else ("", word, "")
    return pre + cut_path(core, max(width - len(pre) - len(post), 8)) + post


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


GAP = 2  # columns between two table columns (rich: padding (0, 1) on each side, no edge padding)


class Table:
    """A table drawn as plain text at the console's width (no rich import: read commands start fast). Columns
    that may wrap do so at spaces only and give way (widest first) no further than their longest word, so no word,
    id or UUID is broken; path columns (overflow="path") are cut before the file name. Only when even that cannot
    fit does a wrapping column fold its longest words."""

    def __init__(self, *_, **options):
        self.options = options  # rich.table.Table-style keywords (show_edge, box, ...): accepted, not needed
        self.columns: list[dict] = []
        self.rows: list[list[str]] = []

    def add_column(self, header: str, justify: str = "left", no_wrap: bool = False, overflow: str = "wrap", **_):
        self.columns.append({"header": header, "justify": justify, "overflow": None if no_wrap else overflow})

    def add_row(self, *cells) -> None:
        self.rows.append([clean(c) for c in cells])

    def _floor(self, i: int, fold: bool) -> int:
        c = self.columns[i]
        if c["overflow"] == "path":
            return max(len(c["header"]), 12)
        if fold:
            return max(len(c["header"]), 8)
        return max([len(c["header"])] + [len(w) for r in self.rows for w in r[i].split()])

    def widths(self, width: int | None) -> list[int]:
        """Each column's width so the table fits `width` (None: natural widths)."""
        w = [max([len(c["header"])] + [max((len(x) for x in r[i].split("\n")), default=0) for r in self.rows])
             for i, c in enumerate(self.columns)]
        if width is None:
            return w
        for fold in (False, True):
            excess = sum(w) + GAP * (len(w) - 1) - width
            flex = [i for i, c in enumerate(self.columns) if c["overflow"]]
            while excess > 0 and flex:
                i = max(flex, key=lambda j: w[j])
                floor = self._floor(i, fold)
                if w[i] <= floor:
                    flex.remove(i)
                    continue
                step = min(excess, w[i] - floor)
                w[i] -= step
                excess -= step
            if excess <= 0:
                break
        return w

    def _cell(self, i: int, text: str, w: int) -> list[str]:
        import textwrap

        c = self.columns[i]
        if c["overflow"] == "path":
            return [cut_path(text, w)]
        if not c["overflow"]:
            return text.split("\n")
        out = []
        for line in text.split("\n"):
            if len(line) <= w and line.isprintable() and line == line.strip() and "  " not in line:  # fits:
                out.append(line)  # what textwrap would give (most cells), without its cost
                continue
            long = any(len(x) > w for x in line.split())
            out += textwrap.wrap(line, w, break_long_words=long, break_on_hyphens=False) or [""]
        return out

    def _under(self, width: int) -> bool:
        """The last column (free text) goes under each row when the table cannot fit with that column holding
        its longest word (a UUID, a path): wrapping it there would cut the word."""
        last = len(self.columns) - 1
        if width is None or last < 1 or self.columns[last]["overflow"] != "wrap":
            return False
        w = self.widths(None)
        fixed = [self._floor(i, False) if self.columns[i]["overflow"] else w[i] for i in range(last + 1)]
        return sum(fixed) + GAP * last > width

    def render(self, width: int | None = None) -> str:
        """The table as plain text, lines without trailing spaces."""
        import textwrap

        if not self._under(width):
            w = self.widths(width)
            return "\n".join(x for r in [[c["header"] for c in self.columns]] + self.rows for x in self._row(r, w))
        head = Table()
        head.columns = self.columns[:-1]
        head.rows = [r[:-1] for r in self.rows]
        w = head.widths(width)
        lines = head._row([c["header"] for c in head.columns], w)
        for r in self.rows:
            lines += head._row(r[:-1], w)
            for part in r[-1].split("\n"):
                lines += ["    " + x for x in textwrap.wrap(part, max(width - 4, 1), break_long_words=False,
                                                            break_on_hyphens=False)]
        return "\n".join(lines)

    def _row(self, r: list[str], w: list[int]) -> list[str]:
        cells = [self._cell(i, cell, w[i]) for i, cell in enumerate(r)]
        out = []
        for k in range(max(len(x) for x in cells)):
            parts = []
            for i, x in enumerate(cells):
                v = x[k] if k < len(x) else ""
                parts.append(v.rjust(w[i]) if self.columns[i]["justify"] == "right" else v.ljust(w[i]))
            out.append((" " * GAP).join(parts).rstrip())
        return out


class Console:
    """Output for the human renderers: strings printed as they are (no markup: '[running]' in data stays) and
    Tables, fitted to the terminal width (whole lines on a pipe). A style (rich's name, e.g. "dim") is drawn by
    rich, imported then, only on a terminal with colour (not under NO_COLOR)."""

    def __init__(self, stderr: bool = False):
        import sys

        self.stream = sys.stderr if stderr else sys.stdout
        self.width = terminal_width(self.stream)

    def print(self, *objs, wrap: bool = False, indent: int = 0, style: str | None = None,
              lead: tuple[int, str] | None = None, **_) -> None:
        """`wrap`: a long line is wrapped at spaces to the terminal width, continuation lines indented by `indent`
        (without it a line is printed whole); a path longer than a line is cut in the middle (its file name kept).
        `style`: a rich style, shown on a colour terminal only; `lead` (n, style): only the first n characters
        styled (a status mark: FAIL, WARN, OK)."""
        text = " ".join(o.render(self.width) if isinstance(o, Table) else clean(o, one_line=False) for o in objs)
        if wrap and self.width and any(len(x) > self.width for x in text.split("\n")):
            text = "\n".join(self._wrap(x, indent) if len(x) > self.width else x for x in text.split("\n"))
        if (style or lead) and use_color(self.stream):
            from rich.console import Console as RichConsole
            from rich.text import Text

            t = Text(text, style=style or "")
            if lead:
                t.stylize(lead[1], 0, lead[0])
            RichConsole(file=raw_stream(self.stream), width=self.width or PIPE_WIDTH, highlight=False, markup=False,
                        emoji=False, soft_wrap=True, force_terminal=True).print(t, soft_wrap=True)
            return
        self.stream.write(text + "\n")
        self.stream.flush()

    def _wrap(self, line: str, indent: int) -> str:
        import textwrap

        room = max(self.width - indent, 20)
        words = [_cut_word(w, room) if len(w) > room and "/" in w else w for w in line.split(" ")]
        return "\n".join(textwrap.wrap(" ".join(words), self.width, subsequent_indent=" " * indent,
                                       break_long_words=False, break_on_hyphens=False))


def headroom_text(left: int | None) -> str:
    """How far a context is from OpenClaw's compaction point (`-` unknown)."""
    if left is None:
        return "-"
    return human_tokens(left) if left >= 0 else f"over by {human_tokens(-left)}"
