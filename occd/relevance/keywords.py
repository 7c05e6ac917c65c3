"""The keyword fallback: Jaccard similarity of content-word sets (stop words removed, light stemming)."""

from __future__ import annotations

import re

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
_STOP = frozenset("""
a an and are as at be been but by can could do does for from had has have how i if in into is it its just
let me my no not of on or our please should so than that the their them then there these this those to up us
was we were what when where which while who why will with would you your yes also any all some more most
need needs want make made get got use used using now new one two via per about after before again over under
""".split())


def _stem(w: str) -> str:
    for suf in ("ations", "ation", "ings", "ing", "ers", "er", "ies", "ied", "ed", "es", "s", "ly"):
        if len(w) > len(suf) + 2 and w.endswith(suf):
            return w[: -len(suf)] + ("y" if suf in ("ies", "ied") else "")
    return w


def terms(text: str | None) -> set[str]:
    """Content words of a text: split camelCase/snake_case, lower-case, drop stop words, stem."""
    if not text:
        return set()
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    out = set()
    for w in _WORD.findall(spaced.replace("_", " ")):
        w = w.lower()
        if w in _STOP or len(w) < 3:
            continue
        out.add(_stem(w))
    return out


def jaccard(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def keyword_relevance(task: str, session_text: str) -> float:
    """0..1: Jaccard similarity of the task's content words and the session's: of its whole text, or of one of
    its lines (its label, its first request, its latest task: one per line), whichever is higher. A session that
    holds the very request is rated 1, not diluted by the rest of its words."""
    t = terms(task)
    parts = [session_text, *session_text.splitlines()] if "\n" in session_text else [session_text]
    return round(max(jaccard(t, terms(p)) for p in parts), 4)
