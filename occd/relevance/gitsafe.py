"""Run git on a repository occd inspects so that nothing the repository (or its submodules, or any config it
includes) says can make git run a program.

Why not a list of config keys set to harmless values: that is what failed (issue 24: `log.showSignature` +
`gpg.x509.program` in the repository's own `.git/config` ran a program from `git log`; a submodule's own
`filter.<x>.clean` ran during `git status`). git reads the repository's `.git/config` whatever the environment
says, and the set of keys and attributes that name programs grows with every release (gpg.*.program,
core.fsmonitor, filter.*.process, diff.*.textconv, core.alternateRefsCommand, include/includeIf, ...), so any
deny-list is one release away from failing again.

Why not read everything without git: branch, stashes and refs are easy to read from files, but counting changed
and untracked files means re-implementing the index (v2-v4), tree objects, pack files with deltas, .gitignore
semantics and racy-clean stat checks; a partial copy would give wrong counts.

So occd runs git on a **shadow git directory** (a fresh temporary folder) instead of the repository's own:
- its `config` is written by occd: the repository format and an allow-list of data keys (file-mode and line-end
  settings, `branch.*.remote/merge`, `remote.*.url/fetch`; none of them names a program), nothing else — no
  include, no filter, no diff driver, no fsmonitor, no gpg, no hooks folder;
- `HEAD` is a copy; `refs`, `packed-refs`, `logs` (stash) and `reftable` are symlinks to the real ones (read
  only: status runs with GIT_OPTIONAL_LOCKS=0 and never writes); the objects and index are named by
  GIT_OBJECT_DIRECTORY and GIT_INDEX_FILE; the work tree by GIT_WORK_TREE;
- system and global config are off (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null, GIT_ATTR_NOSYSTEM), every
  GIT_* variable of the caller is dropped, and git also gets `-c` neutralisers as a second layer;
- status never enters submodules (`--ignore-submodules=all`), so a submodule's own config is never read.
Attributes in the work tree's `.gitattributes` are still read, but an attribute only names a driver; the program
of a driver (`filter.<x>.clean`, `diff.<x>.textconv`, `merge.<x>.driver`) comes from config, and the shadow
config has none. `gh` runs its own git with the same environment, so it sees the shadow too.

The repository's config is read (never executed) with `git config --file <it> --no-includes --list`.
The work tree is found in Python (the nearest `.git` folder, or a `.git` file's `gitdir:`), never by git.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# data keys copied from the repository's config (lower-case names as `git config --list` prints them); a key is
# copied only when it matches, and none of them names a program
_DATA_KEYS = re.compile(r"^(core\.(filemode|symlinks|ignorecase|precomposeunicode|checkstat|trustctime|autocrlf|eol)"
                        r"|branch\..+\.(remote|merge)|remote\..+\.(url|pushurl|fetch|gh-resolved))$")
_TOKEN = re.compile(r"^[a-z0-9_-]{1,32}$")
# second layer, passed as GIT_CONFIG_* (which git >= 2.31 reads like -c and which gh's git inherits)
NEUTRAL_CONFIG = (
    ("core.fsmonitor", "false"), ("core.hooksPath", os.devnull), ("core.untrackedCache", "false"),
    ("core.sshCommand", "false"), ("core.askPass", ""), ("credential.helper", ""), ("core.pager", "cat"),
    ("core.editor", "false"), ("sequence.editor", "false"), ("diff.external", ""), ("diff.ignoreSubmodules", "all"),
    ("submodule.recurse", "false"), ("status.submoduleSummary", "false"), ("log.showSignature", "false"),
    ("protocol.allow", "never"), ("uploadpack.packObjectsHook", ""), ("gpg.program", "false"),
    ("gpg.ssh.program", "false"), ("gpg.x509.program", "false"), ("core.gitProxy", ""), ("http.proxy", ""),
    ("core.attributesFile", os.devnull), ("core.alternateRefsCommand", ""), ("fetch.recurseSubmodules", "false"),
)


@dataclass(frozen=True)
class Repo:
    root: Path      # the work tree
    gitdir: Path    # its git directory (a linked worktree's own one)
    common: Path    # the shared one (objects, refs, config)


def _small_file(p: Path, limit: int = 4096) -> bytes | None:
    """The first bytes of a regular file (never a FIFO or device), or None."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def _is_gitdir(d: Path) -> bool:
    try:
        return d.is_dir() and _small_file(d / "HEAD") is not None
    except OSError:
        return False


def find_repo(start: Path) -> Repo | None:
    """The nearest enclosing work tree of `start` (a folder), found by reading files only."""
    try:
        here = start.resolve()
    except (OSError, RuntimeError):
        return None
    for cand in (here, *here.parents):
        if cand.name == ".git":
            continue
        dot = cand / ".git"
        gitdir = None
        try:
            if dot.is_dir():
                gitdir = dot if _is_gitdir(dot) else None
            elif dot.is_file():
                raw = _small_file(dot)
                text = raw.decode("utf-8", "replace").strip() if raw else ""
                if text.startswith("gitdir:"):
                    target = Path(text[len("gitdir:"):].strip())
                    target = (cand / target) if not target.is_absolute() else target
                    gitdir = target.resolve() if _is_gitdir(target) else None
        except (OSError, RuntimeError):
            gitdir = None
        if gitdir is None:
            continue
        common = gitdir
        raw = _small_file(gitdir / "commondir")
        if raw:
            c = Path(raw.decode("utf-8", "replace").strip())
            c = c if c.is_absolute() else gitdir / c
            if _is_gitdir(c):
                common = c.resolve()
        return Repo(cand, gitdir, common)
    return None


def _git_binary() -> str | None:
    return shutil.which("git")


def base_env() -> dict:
    """The caller's environment without any GIT_* variable, plus no prompts, no optional locks, no system or
    global config, no system attributes, and the neutralisers as GIT_CONFIG_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")
           and k not in ("SSH_ASKPASS", "GH_REPO", "GH_HOST_OVERRIDE")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GH_PROMPT_DISABLED="1", GH_NO_UPDATE_NOTIFIER="1",
               LC_ALL="C", GIT_PAGER="cat", PAGER="cat", GH_PAGER="cat", GIT_CONFIG_NOSYSTEM="1",
               GIT_CONFIG_GLOBAL=os.devnull, GIT_ATTR_NOSYSTEM="1", GIT_NO_REPLACE_OBJECTS="1",
               GIT_PROTOCOL_FROM_USER="0", GIT_NO_LAZY_FETCH="1", GIT_ALLOW_PROTOCOL="")
    env["GIT_CONFIG_COUNT"] = str(len(NEUTRAL_CONFIG))
    for i, (k, v) in enumerate(NEUTRAL_CONFIG):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = k, v
    return env


def _read_config(cfg: Path, env: dict, cwd: Path, timeout: float) -> list[tuple[str, str]]:
    """(key, value) pairs of one config file, includes not followed; reading config runs nothing."""
    git = _git_binary()
    if git is None or _small_file(cfg, 1) is None:
        return []
    try:
        r = subprocess.run([git, "config", "--file", str(cfg), "--no-includes", "--null", "--list"], cwd=cwd,
                           env=env, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (subprocess.TimeoutExpired, OSError):
        return []
    out = []
    for item in r.stdout.split(b"\0"):
        if not item:
            continue
        k, _, v = item.decode("utf-8", "surrogateescape").partition("\n")
        out.append((k, v))
    return out


@contextmanager
def shadow(repo: Repo, timeout: float):
    """A temporary git directory that reads `repo` but carries only occd's config; yields the environment to run
    git (and gh) with. Removed afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix="occd-git-"))
    try:
        env = base_env()
        env["GIT_CEILING_DIRECTORIES"] = str(tmp.parent)
        pairs = _read_config(repo.common / "config", env, tmp, timeout)
        env["GIT_DIR"] = str(tmp)
        core = {"repositoryformatversion": "0", "bare": "false"}
        ext = {}
        for k, v in pairs:
            if k == "core.repositoryformatversion" and v.strip() in ("0", "1"):
                core["repositoryformatversion"] = v.strip()
            elif k in ("extensions.objectformat", "extensions.refstorage") and _TOKEN.match(v.strip().lower()):
                ext[k.split(".", 1)[1]] = v.strip().lower()
        text = "[core]\n" + "".join(f"\t{k} = {v}\n" for k, v in core.items())
        if ext:
            text += "[extensions]\n" + "".join(f"\t{k} = {v}\n" for k, v in ext.items())
        (tmp / "config").write_text(text)
        head = _small_file(repo.gitdir / "HEAD") or b"ref: refs/heads/master\n"
        (tmp / "HEAD").write_bytes(head)
        for name in ("refs", "packed-refs", "logs", "reftable"):
            src = repo.common / name
            if os.path.lexists(src):
                (tmp / name).symlink_to(src)
        if not (tmp / "refs").exists():
            (tmp / "refs").mkdir()
        info = repo.common / "info" / "exclude"
        raw = _small_file(info, 1 << 20)
        if raw is not None:
            (tmp / "info").mkdir()
            (tmp / "info" / "exclude").write_bytes(raw)
        data = [(k, v) for k, v in pairs if _DATA_KEYS.match(k) and "\0" not in v]
        n = int(env["GIT_CONFIG_COUNT"])
        for i, (k, v) in enumerate(data, start=n):
            env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = k, v
        env["GIT_CONFIG_COUNT"] = str(n + len(data))
        env.update(GIT_WORK_TREE=str(repo.root), GIT_OBJECT_DIRECTORY=str(repo.common / "objects"),
                   GIT_INDEX_FILE=str(repo.gitdir / "index"))
        yield env
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def git_args(*args: str) -> list[str]:
    """git with the neutralisers as -c flags too (a third layer for a git that ignores GIT_CONFIG_*)."""
    flags = [x for k, v in NEUTRAL_CONFIG for x in ("-c", f"{k}={v}")]
    return [_git_binary() or "git", *flags, *args]
