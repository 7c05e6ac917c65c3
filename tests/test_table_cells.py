"""occd.cli.render.format_table and clean_cells: the table of `occd sessions` (5,000 rows) is cleaned with one
search over all its cells and laid out column by column; it must be the table the cell-by-cell way gave."""

from __future__ import annotations


def reference_table(headers, rows, right=frozenset()) -> str:
    """format_table cell by cell (before issue 29's speed-up), kept as the oracle."""
    from occd.cli.render import clean

    rows = [[clean(c) for c in r] for r in rows]
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


def test_tables_are_what_cleaning_cell_by_cell_gave():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from occd.cli.render import clean, clean_cells, format_table

    text = st.text(alphabet="ab -é\t\n\x1b\u202e\x9b", max_size=6)
    cell = st.one_of(text, text, text, st.none(), st.integers(-5, 500))

    @settings(max_examples=400, deadline=None)
    @given(st.integers(1, 5), st.data())
    def check(n, data):
        headers = data.draw(st.lists(st.text(alphabet="AB ", max_size=4), min_size=n, max_size=n))
        rows = data.draw(st.lists(st.lists(cell, min_size=max(1, n - 1), max_size=n), max_size=6))
        right = data.draw(st.sets(st.integers(0, n - 1)))
        assert clean_cells(rows) == [[clean(c) for c in r] for r in rows]
        assert format_table(headers, rows, right) == reference_table(headers, rows, right)
        assert format_table(tuple(headers), [tuple(r) for r in rows], right) == reference_table(headers, rows, right)

    check()


def test_wrapped_cells_are_what_textwrap_gives():
    """wrap_words fills single-spaced text itself (5,000 rows of `occd sessions`); any text, and any width, gives
    what textwrap gave (break_long_words on, hyphens not breaks)."""
    import textwrap

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from occd.cli.render import wrap_words

    word = st.text(alphabet="abé-.\u00a0", min_size=1, max_size=12)
    spaced = st.lists(word, min_size=1, max_size=12).map(" ".join)
    anything = st.text(alphabet="ab -\t\n\u00a0", max_size=40)

    @settings(max_examples=600, deadline=None)
    @given(st.one_of(spaced, spaced, anything), st.integers(-1, 30))
    def check(text, width):
        want = [text] if width <= 0 or len(text) <= width else (
            textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""])
        assert wrap_words(text, width) == want

    check()
