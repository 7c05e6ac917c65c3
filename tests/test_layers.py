"""The package's shape, from its own imports (every import, function-level ones included): no import cycle between
modules, no cycle between the folders of occd/ (so no two of them import each other), at most 7 modules loose at
the top, no module over 500 lines but those still to be split, and import-linter's contracts in pyproject.toml
(`lint-imports`) kept."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "occd"
MAX_LINES = 500
# Still over MAX_LINES, to be split after the move of issue 25 (a module may leave this list, never join it).
LONG_PENDING = {"occd.runtime.daemon", "occd.relevance.discovery", "occd.openclaw.dbstore", "occd.transcript.scan",
                "occd.jobs.scan"}


def modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the occd modules it imports anywhere in its text (`from a import b` is a.b when b is a module)."""
    def known(name: str | None) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        pkg = m if path.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                for a in node.names:
                    targets.append(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base)
            for t in targets:
                if t == "occd" or not t.startswith("occd."):
                    continue  # the root package holds only __version__
                k = known(t)
                if k and k != m:
                    graph[m].add(k)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1; stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]; counter[0] += 1; stack.append(nxt); on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def folder_graph(graph: dict[str, set[str]], depth: int) -> dict[str, set[str]]:
    """The same imports between folders (packages) at a depth below occd (1: occd.X), each module counted in its
    folder; loose modules stand for themselves. Imports inside one folder are left out."""
    def folder(m: str) -> str:
        parts = m.split(".")
        return ".".join(parts[: depth + 1])

    out: dict[str, set[str]] = {}
    for m, deps in graph.items():
        f = folder(m)
        out.setdefault(f, set())
        for d in deps:
            g = folder(d)
            if g != f and not f.startswith(g + ".") and not g.startswith(f + "."):
                out[f].add(g)
    return out


def test_no_import_cycle_between_modules():
    assert cycles(import_graph(modules())) == []


def test_no_cycle_between_folders():
    graph = import_graph(modules())
    for depth in (1, 2):
        fg = folder_graph(graph, depth)
        assert cycles(fg) == [], depth
        mutual = sorted((a, b) for a in fg for b in fg[a] if a < b and a in fg.get(b, ()))
        assert mutual == [], depth


def test_the_checks_find_a_cycle():
    """The checks above can fail: a made-up graph with a two-module and a folder cycle is caught."""
    g = {"occd.a.x": {"occd.b.y"}, "occd.b.y": {"occd.a.z"}, "occd.a.z": {"occd.a.x"}, "occd.c": set()}
    assert cycles(g) == [["occd.a.x", "occd.a.z", "occd.b.y"]]
    assert cycles(folder_graph(g, 1)) == [["occd.a", "occd.b"]]


def test_few_modules_loose_at_the_top():
    loose = sorted(p.name for p in PKG.glob("*.py"))
    assert len(loose) <= 7, loose


def test_modules_stay_short():
    mods = modules()
    long = {m for m, p in mods.items() if len(p.read_text().splitlines()) > MAX_LINES}
    assert long <= LONG_PENDING, sorted(long - LONG_PENDING)


def _lint_imports() -> str | None:
    exe = Path(sys.executable).parent / "lint-imports"
    return str(exe) if exe.exists() else shutil.which("lint-imports")


def test_import_linter_contracts_are_kept():
    exe = _lint_imports()
    if exe is None:
        pytest.fail("lint-imports is not installed: pip install -e '.[test]' (import-linter is in the test extra)")
    r = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout, r.stdout[-2000:]
