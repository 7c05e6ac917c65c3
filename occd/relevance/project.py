"""Project status of a git working tree: branch, ahead/behind, changes, stashes, recent commits, key docs,
and open pull requests with their checks when `gh` is installed and logged in (skipped silently otherwise).

Every git/gh call runs with a timeout and without prompts or optional locks (status never writes the
index), so a hung remote or a huge repo cannot stall the caller, and on a shadow git directory whose config is
occd's alone (occd.relevance.gitsafe explains why), so the repository cannot make git run a program.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from occd.errors import OccdError
from occd.relevance.gitsafe import Repo, base_env, find_repo, git_args, shadow

GIT_TIMEOUT = 5.0
GH_TIMEOUT = 8.0
KEY_DOCS = ("README.md", "README.rst", "README.txt", "README", "AGENTS.md", "CLAUDE.md", "CONTRIBUTING.md",
            "ARCHITECTURE.md", "docs/design.md")


@dataclass
class Commit:
    sha: str
    time: float
    author: str
    subject: str


@dataclass
class PullRequest:
    number: int
    title: str
    branch: str | None
    url: str | None
    draft: bool
    checks: dict[str, int]   # state → count (success, failure, pending, ...)


@dataclass
class ProjectStatus:
    path: str
    root: str
    branch: str | None
    detached: bool
    upstream: str | None
    ahead: int | None
    behind: int | None
    uncommitted: int
    untracked: int
    conflicts: int
    stashes: int
    commits: list[Commit]
    key_docs: list[str]
    pull_requests: list[PullRequest] | None = None   # None: gh not installed, not logged in, or failed
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        d = asdict(self)
        return {"path": d["path"], "root": d["root"], "branch": d["branch"], "detached": d["detached"],
                "upstream": d["upstream"], "ahead": d["ahead"], "behind": d["behind"],
                "uncommitted": d["uncommitted"], "untracked": d["untracked"], "conflicts": d["conflicts"],
                "stashes": d["stashes"], "commits": d["commits"], "keyDocs": d["key_docs"],
                "pullRequests": d["pull_requests"], "warnings": d["warnings"]}

    def summary(self, limit: int = 300) -> str:
        """One line for a prompt (callers redact it)."""
        bits = [f"branch {self.branch or 'detached'}"]
        if self.uncommitted or self.untracked:
            bits.append(f"{self.uncommitted} changed, {self.untracked} untracked")
        if self.commits:
            bits.append("recent commits: " + "; ".join(c.subject for c in self.commits[:3]))
        if self.pull_requests:
            bits.append("open PRs: " + "; ".join(p.title for p in self.pull_requests[:2]))
        return " | ".join(bits)[:limit]


def run_tool(args: list[str], cwd: Path, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """The one way occd runs git or gh: in the environment of a shadow git directory (gitsafe: no config of the
    repository's that names a program can reach git), `-c` neutralisers for git itself too, no stdin, a timeout."""
    if args and args[0] == "git":
        args = git_args(*args[1:])
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else base_env(), stdin=subprocess.DEVNULL, errors="replace")


_run = run_tool


def find_root(path: str | os.PathLike, *, timeout: float = GIT_TIMEOUT) -> Path:
    """The top of the git working tree containing `path` (found by reading files, not by running git);
    OccdError when it is not one."""
    return _find_repo(path).root


def _find_repo(path: str | os.PathLike) -> Repo:
    p = Path(path).expanduser()
    try:
        exists = p.exists()
    except (OSError, ValueError) as e:  # a name too long for the file system, a NUL byte: not a path at all
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise OccdError(f"Path {str(p)[:80]}{'…' if len(str(p)) > 80 else ''} cannot be used: {why}",
                        "give the path of a git working tree", code="BAD_PATH") from None
    if not exists:
        raise OccdError(f"Path {p} does not exist", "give the path of a git working tree", code="PATH_NOT_FOUND")
    d = p if p.is_dir() else p.parent
    if shutil.which("git") is None:
        raise OccdError("git is not installed", "install git to get project status", code="GIT_MISSING")
    repo = find_repo(d)
    if repo is None:
        raise OccdError(f"{d} is not a git repository", "run it inside a git working tree (git init creates one)",
                        code="NOT_A_REPO")
    return repo


def _status(root: Path, st: ProjectStatus, env: dict, timeout: float) -> None:
    r = run_tool(["git", "status", "--porcelain=v2", "--branch", "--untracked-files=normal",
                  "--ignore-submodules=all"], root, timeout, env)
    if r.returncode != 0:
        st.warnings.append(f"git status failed: {r.stderr.strip().splitlines()[0] if r.stderr.strip() else r.returncode}")
        return
    for line in r.stdout.splitlines():
        if line.startswith("# branch.head "):
            head = line[len("# branch.head "):]
            st.detached = head == "(detached)"
            st.branch = None if st.detached else head
        elif line.startswith("# branch.upstream "):
            st.upstream = line[len("# branch.upstream "):]
        elif line.startswith("# branch.ab "):
            a, b = line[len("# branch.ab "):].split()
            st.ahead, st.behind = int(a.lstrip("+")), int(b.lstrip("-"))
        elif line.startswith(("1 ", "2 ")):
            st.uncommitted += 1
        elif line.startswith("u "):
            st.conflicts += 1
            st.uncommitted += 1
        elif line.startswith("? "):
            st.untracked += 1


def _gh_prs(root: Path, timeout: float, env: dict) -> list[PullRequest] | None:
    if shutil.which("gh") is None:
        return None
    try:
        auth = _run(["gh", "auth", "status"], root, timeout, env)
        if auth.returncode != 0:
            return None
        r = _run(["gh", "pr", "list", "--state", "open", "--limit", "10", "--json",
                  "number,title,headRefName,url,isDraft,statusCheckRollup"], root, timeout, env)
    except (subprocess.TimeoutExpired, OSError):
        return None
    if r.returncode != 0:
        return None
    import json

    try:
        rows = json.loads(r.stdout or "[]")
    except ValueError:
        return None
    out = []
    for p in rows if isinstance(rows, list) else []:
        if not isinstance(p, dict) or not isinstance(p.get("number"), int):
            continue
        checks: dict[str, int] = {}
        for c in p.get("statusCheckRollup") or []:
            if isinstance(c, dict):
                state = (c.get("conclusion") or c.get("state") or c.get("status") or "unknown").lower()
                checks[state] = checks.get(state, 0) + 1
        out.append(PullRequest(p["number"], str(p.get("title") or ""), p.get("headRefName"), p.get("url"),
                               bool(p.get("isDraft")), checks))
    return out


def project_status(path: str | os.PathLike = ".", *, commits: int = 5, git_timeout: float = GIT_TIMEOUT,
                   gh_timeout: float = GH_TIMEOUT, use_gh: bool = True) -> ProjectStatus:
    repo = _find_repo(path)
    root = repo.root
    st = ProjectStatus(path=str(Path(path).expanduser().absolute()), root=str(root), branch=None, detached=False,
                       upstream=None, ahead=None, behind=None, uncommitted=0, untracked=0, conflicts=0, stashes=0,
                       commits=[], key_docs=[])
    with shadow(repo, git_timeout) as env:
        try:
            _status(root, st, env, git_timeout)
        except subprocess.TimeoutExpired:
            st.warnings.append(f"git status timed out after {git_timeout:g} s")
        try:
            r = run_tool(["git", "stash", "list", "--format=%gd"], root, git_timeout, env)
            st.stashes = len([ln for ln in r.stdout.splitlines() if ln.strip()]) if r.returncode == 0 else 0
        except subprocess.TimeoutExpired:
            st.warnings.append("git stash list timed out")
        try:
            r = run_tool(["git", "log", "--no-show-signature", "--no-mailmap", f"-n{int(commits)}",
                          "--format=%H%x1f%ct%x1f%an%x1f%s"], root, git_timeout, env)
            if r.returncode == 0:
                for line in r.stdout.splitlines():
                    parts = line.split("\x1f")
                    if len(parts) == 4:
                        st.commits.append(Commit(parts[0][:12], float(parts[1]), parts[2], parts[3]))
        except subprocess.TimeoutExpired:
            st.warnings.append("git log timed out")
        st.key_docs = [d for d in KEY_DOCS if (root / d).is_file()]
        if use_gh:
            st.pull_requests = _gh_prs(root, gh_timeout, env)
    return st


def status_or_none(path: str | os.PathLike | None) -> ProjectStatus | None:
    """project_status for callers that can live without it (scoring): None when not a repo or git fails."""
    if not path:
        return None
    try:
        return project_status(path)
    except OccdError:
        return None
    except (OSError, subprocess.SubprocessError):
        return None


