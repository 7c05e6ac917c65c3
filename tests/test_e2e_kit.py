"""The project's own end-to-end kit (tests/e2e, tests/oracle): the installer installs once under a lock and never
leaves a half-finished install in place, the scripted model answers as the e2e tests expect, and a test whose
tool is missing is counted in the run's last line (and fails with CI=true). No network, no real npm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import install
import pytest

from conftest import E2E_DIR, REPO

FAKE_NPM = r"""#!/usr/bin/env python3
import json, os, sys, time
args = sys.argv[1:]
with open(os.environ["NPM_CALLS"], "a") as f:
    f.write(json.dumps(args) + "\n")
if os.environ.get("NPM_FAIL"):
    print("npm ERR! 404 Not Found", file=sys.stderr); sys.exit(1)
prefix = args[args.index("--prefix") + 1]
spec = args[args.index("--prefix") + 2]
time.sleep(0.5)  # long enough for a second installer to arrive while this one works
name = spec.rsplit("@", 1)[0]
bin_name = {"openclaw": "openclaw", "@anthropic-ai/claude-code": "claude"}.get(name)
if bin_name:
    os.makedirs(os.path.join(prefix, "node_modules", ".bin"), exist_ok=True)
    open(os.path.join(prefix, "node_modules", ".bin", bin_name), "w").write("#!/bin/sh\n")
else:
    d = os.path.join(prefix, "node_modules", name, "bin")
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "node"), "w").write("#!/bin/sh\n")
"""


@pytest.fixture
def fake_npm(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(FAKE_NPM)
    npm.chmod(0o755)
    calls = tmp_path / "npm-calls.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NPM_CALLS", str(calls))
    return calls


def test_parallel_installs_run_npm_once_per_target(fake_npm, tmp_path):
    cache = tmp_path / "cache"
    results, errors = [], []

    def one():
        try:
            results.append(install.openclaw("2026.9.6", cache))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 3
    oc, node_bin = results[0]
    assert oc == cache / "oc-2026.9.6" / "node_modules" / ".bin" / "openclaw" and oc.exists()
    assert (node_bin / "node").exists() and node_bin.parts[-4] == "node24"
    calls = [json.loads(x) for x in fake_npm.read_text().splitlines()]
    assert sorted(c[3] for c in calls) == [f"{install.node_package()}@24", "openclaw@2026.9.6"], calls
    assert not [p for p in cache.iterdir() if ".tmp-" in p.name]  # nothing left half-way
    install.openclaw("2026.9.6", cache)  # installed: npm is not asked again
    assert len(fake_npm.read_text().splitlines()) == 2


def test_a_failed_install_leaves_nothing_that_looks_installed(fake_npm, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("NPM_FAIL", "1")
    with pytest.raises(install.InstallError, match="404 Not Found"):
        install.claude_code("9.9.9", cache)
    assert not install.claude_bin("9.9.9", cache).exists()
    assert not [p for p in cache.iterdir() if p.is_dir()]


def test_without_npm_the_reason_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "npm" in install.npm_missing()
    with pytest.raises(install.InstallError, match="npm"):
        install.openclaw("2026.9.6", tmp_path / "cache")


def _model(*messages, tools=("read",)):
    sys.path.insert(0, str(E2E_DIR))
    try:
        import fake_model_server as fms
    finally:
        sys.path.remove(str(E2E_DIR))
    return fms.decide(list(messages), set(tools))


def test_scripted_model_reads_what_the_user_orders():
    user = {"role": "user", "content": "[Fri 2026-11-27 18:00 UTC] Q1: READ /w/doc1.txt and tell me"}
    assert _model(user) == ("tool", {"name": "read", "args": {"path": "/w/doc1.txt"}})
    internal = {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT stuff READ /x"}
    assert _model(user, internal)[0] == "tool"  # OpenClaw's own context block does not hide the order
    called = {"role": "assistant", "tool_calls": [{"id": "c1"}]}
    result = {"role": "tool", "content": "text"}
    assert _model(user, called, result) == ("text", "Done reading. I was sent 3 messages.")
    many = {"role": "user", "content": "READ /a,/b"}
    assert _model(many, called, result) == ("tool", {"name": "read", "args": {"path": "/b"}})
    deep = {"role": "user", "content": "one two three four five six seven READ /far"}
    assert _model(deep) == ("text", "Reply to: one two three four five six seven READ | messages sent: 1")
    assert _model(user, tools=())[0] == "text"


def _pytest(tmp_path, env: dict, *args: str) -> subprocess.CompletedProcess:
    run_env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=300, env={**run_env, **env})


@pytest.mark.slow
def test_missing_tools_are_counted_in_the_last_line_and_fail_in_ci(tmp_path):
    """Without an OpenClaw release installed: skipped and counted at the very end; CI=true: failed."""
    target = ["tests/test_lean.py", "-k", "real_packages"]
    empty = {"OC_CACHE": str(tmp_path / "nothing")}
    p = _pytest(tmp_path, empty, *target)
    last = p.stdout.strip().splitlines()[-1]
    assert p.returncode == 0 and last.startswith("3 tests could not run, a tool is missing: OpenClaw"), p.stdout[-2000:]
    assert "CI=true fails them instead" in last
    # in CI a missing release is installed on first use; without npm that is impossible: a failure, not a skip
    p = _pytest(tmp_path, {**empty, "CI": "true", "PATH": str(Path(sys.executable).parent)}, *target)
    assert p.returncode == 1 and "3 failed" in p.stdout and "could not run" not in p.stdout, p.stdout[-2000:]
    assert "npm (Node.js) is not installed" in p.stdout
