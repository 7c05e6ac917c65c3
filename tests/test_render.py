"""occd.cli.render: the plain-text tables of the human output."""


def test_a_cell_that_fits_is_what_textwrap_gives():
    """Table cells that fit take a shortcut past textwrap (2,000 agents' tables in `occd status`): it must give
    what textwrap gives, tabs, odd spaces and hyphens included."""
    import textwrap

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from occd.cli.render import Table

    @settings(max_examples=400, deadline=None)
    @given(st.text(alphabet="ab c\t-x\u00a0\u2003.\n", max_size=30), st.integers(1, 25))
    def check(text, w):
        t = Table()
        t.add_column("X")
        got = t._cell(0, text, w)
        exp = []
        for line in text.split("\n"):
            long = any(len(x) > w for x in line.split())
            exp += textwrap.wrap(line, w, break_long_words=long, break_on_hyphens=False) or [""]
        assert got == exp

    check()
