"""Project status of a git working tree: branch, ahead/behind, changes, stashes, recent commits, key docs,
and open pull requests with their checks when `gh` is installed and logged in (skipped silently otherwise).

Every git/gh call runs with a timeout and without prompts or optional locks (status never writes the
index), so a hung remote or a huge repo cannot stall the caller.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from occd.errors import OccdError

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


# Config that would make git run a program named by the repository (or by the user's config): switched off for
# every git occd runs, and for the git that gh runs (passed as GIT_CONFIG_* environment, which git >= 2.31
# reads like `-c` and which outranks every config file). An attacker's repository (the MCP tool takes any
# directory) must not get a command run by `git status`.
SAFE_GIT_CONFIG = (
    ("core.fsmonitor", "false"),          # core.fsmonitor=<program> runs it on every status
    ("core.hooksPath", os.devnull),       # no hooks (status runs none today; defence in depth)
    ("core.untrackedCache", "false"),
    ("core.sshCommand", "false"), ("core.askPass", ""), ("credential.helper", ""),
    ("core.pager", "cat"), ("core.editor", "false"), ("sequence.editor", "false"),
    ("diff.external", ""), ("diff.noprefix", "false"),
    ("protocol.allow", "never"),          # no fetch of any kind (ext:: runs programs)
    ("uploadpack.packObjectsHook", ""), ("gpg.program", "false"), ("gpg.ssh.program", "false"),
    ("core.gitProxy", ""), ("http.proxy", ""),
)
# environment that names programs or redirects git to other repositories/config: dropped
_DROP_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
             "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EDITOR",
             "GIT_SEQUENCE_EDITOR", "GIT_PROXY_COMMAND", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_EXEC_PATH",
             "GIT_TRACE", "GIT_CEILING_DIRECTORIES_UNSAFE", "GIT_CONFIG_GLOBAL")


def _filter_overrides(cwd: Path) -> list[tuple[str, str]]:
    """Clean/smudge/process filters the repository's own config defines (a .gitattributes can make `git status`
    run one on a file whose stat changed): each is set to nothing. Reading config runs nothing."""
    try:
        r = subprocess.run(["git", "config", "--name-only", "--get-regexp", r"^filter\..*\.(clean|smudge|process)$"],
                           cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT, env=_env(),
                           stdin=subprocess.DEVNULL, errors="replace")
    except (subprocess.TimeoutExpired, OSError):
        return []
    return [(name.strip(), "") for name in r.stdout.splitlines() if name.strip()]


def _env(extra: list[tuple[str, str]] = ()) -> dict:
    """The environment of every git/gh process occd starts: no prompts, no optional locks, no system config, no
    program named by config (SAFE_GIT_CONFIG, as GIT_CONFIG_COUNT/KEY/VALUE so the git run by gh has it too)."""
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV and not k.startswith("GIT_CONFIG_")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GH_PROMPT_DISABLED="1", GH_NO_UPDATE_NOTIFIER="1",
               LC_ALL="C", GIT_PAGER="cat", PAGER="cat", GIT_CONFIG_NOSYSTEM="1", GIT_ATTR_NOSYSTEM="1",
               GIT_NO_REPLACE_OBJECTS="1", GIT_PROTOCOL_FROM_USER="0", GH_PAGER="cat", GIT_NO_LAZY_FETCH="1")
    pairs = list(SAFE_GIT_CONFIG) + list(extra)
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for i, (k, v) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = k
        env[f"GIT_CONFIG_VALUE_{i}"] = v
    return env


def run_tool(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """The one way occd runs git or gh: hardened environment (_env, plus the repository's filters switched
    off), `-c` flags for git itself as well, no stdin, a timeout."""
    if args and args[0] == "git":
        flags = [x for k, v in SAFE_GIT_CONFIG for x in ("-c", f"{k}={v}")]
        args = ["git", *flags, *args[1:]]
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=_env(_filter_overrides(cwd)), stdin=subprocess.DEVNULL, errors="replace")


_run = run_tool


def _git(cwd: Path, *args: str, timeout: float = GIT_TIMEOUT) -> subprocess.CompletedProcess:
    return run_tool(["git", *args], cwd, timeout)


def find_root(path: str | os.PathLike, *, timeout: float = GIT_TIMEOUT) -> Path:
    """The top of the git working tree containing `path`; OccdError when it is not one."""
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
    try:
        r = _git(d, "rev-parse", "--show-toplevel", timeout=timeout)
    except subprocess.TimeoutExpired:
        raise OccdError(f"git did not answer within {timeout:g} s in {d}", "check the repository (network "
                        "file system? a hung hook?)", code="GIT_TIMEOUT") from None
    if r.returncode != 0 or not r.stdout.strip():
        raise OccdError(f"{d} is not a git repository", "run it inside a git working tree (git init creates one)",
                        code="NOT_A_REPO")
    return Path(r.stdout.strip())


def _status(root: Path, st: ProjectStatus) -> None:
    r = _git(root, "status", "--porcelain=v2", "--branch", "--untracked-files=normal")
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


def _gh_prs(root: Path, timeout: float) -> list[PullRequest] | None:
    if shutil.which("gh") is None:
        return None
    try:
        auth = _run(["gh", "auth", "status"], root, timeout)
        if auth.returncode != 0:
            return None
        r = _run(["gh", "pr", "list", "--state", "open", "--limit", "10", "--json",
                  "number,title,headRefName,url,isDraft,statusCheckRollup"], root, timeout)
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
    root = find_root(path, timeout=git_timeout)
    st = ProjectStatus(path=str(Path(path).expanduser().absolute()), root=str(root), branch=None, detached=False,
                       upstream=None, ahead=None, behind=None, uncommitted=0, untracked=0, conflicts=0, stashes=0,
                       commits=[], key_docs=[])
    try:
        _status(root, st)
    except subprocess.TimeoutExpired:
        st.warnings.append(f"git status timed out after {git_timeout:g} s")
    try:
        r = _git(root, "stash", "list", "--format=%gd", timeout=git_timeout)
        st.stashes = len([ln for ln in r.stdout.splitlines() if ln.strip()]) if r.returncode == 0 else 0
    except subprocess.TimeoutExpired:
        st.warnings.append("git stash list timed out")
    try:
        r = _git(root, "log", f"-n{int(commits)}", "--format=%H%x1f%ct%x1f%an%x1f%s", timeout=git_timeout)
        if r.returncode == 0:
            for line in r.stdout.splitlines():
                parts = line.split("\x1f")
                if len(parts) == 4:
                    st.commits.append(Commit(parts[0][:12], float(parts[1]), parts[2], parts[3]))
    except subprocess.TimeoutExpired:
        st.warnings.append("git log timed out")
    st.key_docs = [d for d in KEY_DOCS if (root / d).is_file()]
    if use_gh:
        st.pull_requests = _gh_prs(root, gh_timeout)
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


