"""Issue 24 item 1: no repository occd inspects can make occd's git (or gh) run a program, whatever its own
config, an included config, a submodule's config or its attributes say. The class: every config key and attribute
git documents as naming a program, in the superproject, in a submodule and in included files, plus commits signed
in every format git verifies; every occd entry point that runs git (project-status, select in the repo, the MCP
tool, the daemon's score job in observe mode) must leave the marker folder empty."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
       "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def git(cwd: Path, *args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=cwd, check=check,
                          capture_output=True, text=True, env={**env, **ENV}, **kw)


def _evil(bin_dir: Path, marker: Path, name: str) -> str:
    p = bin_dir / name
    p.write_text(f"#!/bin/sh\necho {name} >> {marker / name}\ncat >/dev/null 2>&1 || true\nexit 0\n")
    p.chmod(0o755)
    return str(p)


# every config key git documents as naming a program (value: the program), and the switches that make git use them
def program_keys(bin_dir: Path, marker: Path, hooks: Path) -> list[tuple[str, str]]:
    e = lambda n: _evil(bin_dir, marker, n)  # noqa: E731
    keys = [
        ("core.fsmonitor", e("fsmonitor")), ("core.hooksPath", str(hooks)), ("core.pager", e("pager")),
        ("pager.log", e("pager-log")), ("pager.status", e("pager-status")), ("pager.stash", e("pager-stash")),
        ("core.editor", e("editor")), ("sequence.editor", e("seqeditor")), ("core.sshCommand", e("ssh")),
        ("core.askPass", e("askpass")), ("core.gitProxy", e("gitproxy")), ("credential.helper", "!" + e("cred")),
        ("diff.external", e("diffext")), ("diff.evil.textconv", e("textconv")), ("diff.evil.command", e("diffcmd")),
        ("filter.evil.clean", e("clean")), ("filter.evil.smudge", e("smudge")), ("filter.evil.required", "true"),
        ("filter.evilp.process", e("process")), ("merge.evil.driver", e("mergedrv")),
        ("gpg.program", e("gpg")), ("gpg.openpgp.program", e("gpg-openpgp")), ("gpg.x509.program", e("gpgsm")),
        ("gpg.ssh.program", e("ssh-keygen")), ("gpg.ssh.defaultKeyCommand", e("sshkeycmd")),
        ("gpg.ssh.allowedSignersFile", str(bin_dir / "allowed")), ("log.showSignature", "true"),
        ("status.showSignature", "true"), ("uploadpack.packObjectsHook", e("packhook")),
        ("remote.origin.url", "ext::" + e("ext-url")), ("remote.origin.uploadpack", e("uploadpack")),
        ("remote.origin.receivepack", e("receivepack")), ("protocol.ext.allow", "always"),
        ("protocol.allow", "always"), ("core.alternateRefsCommand", e("altrefs")),
        ("submodule.recurse", "true"), ("status.submoduleSummary", "true"), ("diff.ignoreSubmodules", "none"),
        ("fetch.recurseSubmodules", "true"), ("core.untrackedCache", "true"), ("interactive.diffFilter", e("difffilt")),
        ("web.browser", e("browser")), ("man.viewer", e("man")), ("trailer.evil.command", e("trailer")),
        ("core.attributesFile", str(bin_dir / "attributes")), ("mailmap.file", str(bin_dir / "mailmap")),
        ("alias.st", "!" + e("alias")), ("gc.auto", "1"), ("maintenance.auto", "true"),
        ("transfer.fsckObjects", "true"), ("safe.directory", "*"),
    ]
    return keys


def hostile_repo(tmp: Path) -> tuple[Path, Path]:
    """A repository (with a submodule) configured with every program-naming key, attribute and signed commit;
    returns (repo, marker folder)."""
    marker = tmp / "marker"
    marker.mkdir()
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    hooks = tmp / "hooks"
    hooks.mkdir()
    for h in ("pre-commit", "post-checkout", "reference-transaction", "post-index-change", "fsmonitor-watchman",
              "pre-auto-gc", "post-rewrite", "push-to-checkout"):
        _evil(hooks, marker, h)
    (bin_dir / "attributes").write_text("* filter=evil diff=evil merge=evil\n")
    keys = program_keys(bin_dir, marker, hooks)
    # an included config and a conditionally included one carry the same keys
    inc = tmp / "included.gitconfig"
    inc.write_text("[core]\n\tfsmonitor = " + _evil(bin_dir, marker, "inc-fsmonitor") + "\n[gpg \"x509\"]\n\tprogram = "
                   + _evil(bin_dir, marker, "inc-gpgsm") + "\n[log]\n\tshowSignature = true\n")

    sub_src = tmp / "subsrc"
    sub_src.mkdir()
    git(sub_src, "init", "-q", "-b", "main")
    (sub_src / "s.txt").write_text("sub\n")
    git(sub_src, "add", "s.txt")
    git(sub_src, "commit", "-qm", "sub initial")

    repo = tmp / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("hello\n")
    (repo / "b.dat").write_text("data\n")
    (repo / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n*.dat filter=evilp\n")
    git(repo, "add", "a.txt", "b.dat", ".gitattributes")
    git(repo, "commit", "-qm", "initial")
    git(repo, "submodule", "add", "-q", str(sub_src), "sub")
    git(repo, "commit", "-qm", "add submodule")
    # commits signed in each format git verifies (x509 = gpgsm, ssh, openpgp): the newest three
    for kind, armour in (("openpgp", "PGP SIGNATURE"), ("x509", "SIGNED MESSAGE"), ("ssh", "SSH SIGNATURE")):
        tree = git(repo, "rev-parse", "HEAD^{tree}").stdout.strip()
        parent = git(repo, "rev-parse", "HEAD").stdout.strip()
        body = (f"tree {tree}\nparent {parent}\nauthor t <t@t> {int(time.time())} +0000\n"
                f"committer t <t@t> {int(time.time())} +0000\n"
                f"gpgsig -----BEGIN {armour}-----\n \n AAAA\n -----END {armour}-----\n\nsigned {kind}\n")
        sha = git(repo, "hash-object", "-t", "commit", "-w", "--stdin", input=body).stdout.strip()
        git(repo, "update-ref", "HEAD", sha)
    (repo / "a.txt").write_text("hello, changed\n")
    git(repo, "stash", "-q")
    (repo / "a.txt").write_text("changed again!\n")  # dirty: status re-reads it (clean filter)
    (repo / "b.dat").write_text("data, changed\n")
    (repo / "untracked.txt").write_text("u\n")
    (repo / ".git" / "info" / "attributes").write_text("* filter=evil diff=evil\n")

    sub = repo / "sub"
    (sub / ".gitattributes").write_text("* filter=evil diff=evil\n")
    (sub / "s.txt").write_text("sub, changed\n")  # a dirty submodule: a recursing status runs its clean filter
    for where in (repo, sub):
        for k, v in keys:
            git(where, "config", k, v)
        git(where, "config", "include.path", str(inc))
        git(where, "config", f"includeIf.gitdir:{tmp}/**.path", str(inc))
        git(where, "config", "includeIf.onbranch:main.path", str(inc))
    return repo, marker


def ran(marker: Path) -> list[str]:
    return sorted(p.name for p in marker.iterdir())


def test_the_attack_is_real_with_plain_git(tmp_path):
    """Plain git in this repository does run programs it names (else the test below proves nothing)."""
    repo, marker = hostile_repo(tmp_path)
    git(repo, "status", "--porcelain", check=False)
    git(repo, "log", "-n3", "--format=%H", check=False)
    # (status runs the clean filter only when the file's stat is racy against the index, which depends on the
    # machine's timing; a diff of the changed file always does)
    git(repo, "diff", "--quiet", check=False)
    got = ran(marker)
    assert {"clean", "gpg-openpgp", "ssh-keygen", "inc-gpgsm", "inc-fsmonitor"} <= set(got), got


def _state_with_session_in(home: Path, repo: Path) -> Path:
    from tests.test_relevance import make_file_agent

    state = home / ".openclaw"
    now = time.time()
    make_file_agent(state, "main", [
        {"sid": "active", "users": ["fix the webhook"], "cwd": str(repo), "mtime": now - 60},
        {"sid": "old", "users": ["plan the rota"], "cwd": str(repo / "sub"), "mtime": now - 30 * 86400},
    ])
    return state


@pytest.mark.slow
def test_no_entry_point_runs_a_program_the_repository_names(isolated_env, tmp_path, monkeypatch):
    from occd.relevance.mcp_server import project_status_tool
    from occd.relevance.project import find_root, project_status

    repo, marker = hostile_repo(tmp_path)
    bindir = tmp_path / "ghbin"
    bindir.mkdir()
    gh = bindir / "gh"  # a gh that runs git the way the real one does (remote, config, rev-parse, status)
    gh.write_text("#!/bin/sh\ngit remote -v >/dev/null 2>&1; git config --get-regexp '^remote\\.' >/dev/null 2>&1\n"
                  "git status --porcelain >/dev/null 2>&1; git log -n2 >/dev/null 2>&1\n"
                  "git rev-parse --show-toplevel >/dev/null 2>&1\n"
                  "if [ \"$1\" = auth ]; then exit 0; fi\necho '[]'\n")
    gh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")

    st = project_status(repo)
    assert st.branch == "main" and st.uncommitted >= 2 and st.untracked == 1 and st.stashes == 1
    assert [c.subject for c in st.commits[:3]] == ["signed ssh", "signed x509", "signed openpgp"]
    assert st.pull_requests == []
    assert find_root(repo / "sub") == (repo / "sub").resolve()
    assert ran(marker) == [], "project_status"
    assert project_status(repo / "sub").uncommitted == 1
    assert ran(marker) == [], "project_status in the submodule"

    assert project_status_tool(str(repo))["branch"] == "main"
    assert ran(marker) == [], "the MCP tool"

    env = {**os.environ}
    r = subprocess.run([sys.executable, "-m", "occd", "project-status", str(repo), "--json"], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout)["branch"] == "main", r.stderr
    assert ran(marker) == [], "occd project-status"

    state = _state_with_session_in(isolated_env, repo)
    for cwd in (repo, repo / "sub"):
        r = subprocess.run([sys.executable, "-m", "occd", "select", "--task", "fix the webhook", "--json"], cwd=cwd,
                           capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0 and json.loads(r.stdout)["repo"] == str(cwd.resolve()), r.stdout + r.stderr
        assert ran(marker) == [], f"occd select in {cwd}"

    r = subprocess.run([sys.executable, "-m", "occd", "run", "--once", "--json", "--state-dir", str(state)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "score" in r.stdout
    assert ran(marker) == [], "the daemon's score job (observe mode)"


@pytest.mark.slow
def test_mcp_server_tools_over_stdio(isolated_env, tmp_path):
    """The real MCP server (stdio), both tools that reach git, started inside the hostile repository."""
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    repo, marker = hostile_repo(tmp_path)
    _state_with_session_in(isolated_env, repo)
    params = StdioServerParameters(command=sys.executable, args=["-m", "occd", "mcp"], env=dict(os.environ),
                                   cwd=str(repo))

    async def go():
        async with Client(params, read_timeout_seconds=60) as client:
            a = await client.call_tool("openclaw_project_status", {"path": str(repo)})
            b = await client.call_tool("openclaw_session_list", {"repo": str(repo / "sub"), "task": "webhook"})
            return a, b

    a, b = anyio.run(go)
    assert "main" in str(a) and "hostile" not in str(b)
    assert ran(marker) == []
