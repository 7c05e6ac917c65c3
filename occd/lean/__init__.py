"""The lean view: occd's OpenClaw context-engine plugin (occd/lean/plugin/), installed, steered and watched.

The plugin's assemble() hands the model a copy of the history without old tool calls/results, per the rules in
a policy file occd writes; OpenClaw's store keeps everything (../shared/docs/openclaw-context-engine.md).

Files, all under occd's data dir (`lean_dir()`), so a rebuilt venv never breaks OpenClaw:
    lean/plugin/        the copy OpenClaw loads (`openclaw plugins install -l` links it)
    lean/policy.json    the rules: {"version", "default", "agents": {id: rules}, "sessions": {key: rules}}
    lean/stats.json     counts the plugin writes after each assemble (never content)
    lean/state.json     the plugin's sticky boundary: per session, hashes of the hidden turns and counts (never content)
    lean/enabled.json   occd's own record: which state dir and release it was enabled for
    lean/recall/        per session (file named by a hash of its id), the lean turns the plugin recalls when OpenClaw
                        cuts the history it loads: the questions and answer texts (0600; content, no tool results)

Rules (one object, camelCase as the plugin reads them): mode drop|stub|off, keepTurns, keepResults, batchTurns, neverHide,
keepResultsUnderChars, highWater, lowWater (the sticky boundary: plugin/sticky.js).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable, Mapping

from occd import paths
from occd.errors import OccdError
from occd.lean.logscan import (DEGRADED_RE, PLUGIN_ID, QUARANTINE_RE, open_log,  # noqa: F401
                               openclaw_log_files, scan_log_lines)
from occd.lean.folder import PLUGIN_FILES, configured_plugin_paths, plugin_folder_problem, switch_plugin  # noqa: F401

MIN_RELEASE = (2026, 7, 1)  # the e2e tests prove the plugin on 2026.7.1, 2026.8.1 and 2026.9.6
FENCE = "before-current-turn-entry-v1"
IDEMPOTENCY = "atomic-idempotent-v1"
DEFAULT_RULES = {"mode": "drop", "keepTurns": 5, "keepResults": 5, "batchTurns": 4, "neverHide": ["memory_*"],
                 "keepResultsUnderChars": 300, "highWater": 0.9, "lowWater": 0.3,
                 "cacheCostRatio": 11.5, "requestsPerTurn": None,
                 "cacheTtlSeconds": None}


def lean_dir(env=None) -> Path:
    return paths.data_dir(env) / "lean"


def plugin_source() -> Path:
    return Path(__file__).resolve().parent / "plugin"


def installed_plugin_dir(env=None) -> Path:
    return lean_dir(env) / "plugin"


def policy_path(env=None) -> Path:
    return lean_dir(env) / "policy.json"


def stats_path(env=None) -> Path:
    return lean_dir(env) / "stats.json"


def state_path(env=None) -> Path:
    return lean_dir(env) / "state.json"


def marker_path(env=None) -> Path:
    return lean_dir(env) / "enabled.json"


def _read_json(p: Path, *, follow_symlinks: bool = False):
    """A small JSON file, None when it is missing, damaged or not a regular file (a FIFO, a device, a directory or
    a link at the name is never read: paths.read_regular never blocks)."""
    try:
        data = paths.read_regular(p, follow_symlinks=follow_symlinks)
        return None if data is None else json.loads(data)
    except (OSError, ValueError):
        return None


def refused_files(env=None) -> list[str]:
    """The plugin's files present under a name but not regular files (the plugin refuses them and passes the
    history unchanged): lstat only, never an open."""
    import stat as _stat

    out = []
    for p in (policy_path(env), stats_path(env), state_path(env), marker_path(env)):
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if not _stat.S_ISREG(st.st_mode):
            out.append(str(p))
    return out


def write_json_atomic(p: Path, obj) -> None:
    from occd.transcript.rewrite import atomic_write

    paths.ensure_dir(p.parent)
    data = json.dumps(obj, indent=1, sort_keys=True).encode() + b"\n"
    atomic_write(p, lambda fh: fh.write(data), mode=0o600)  # occd's own file: its user's alone (the gateway runs as it)


# ---------------------------------------------------------------------------------------------------------------
# The OpenClaw release
# ---------------------------------------------------------------------------------------------------------------

def openclaw_bin(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    return env.get("OCCD_OPENCLAW_BIN") or shutil.which("openclaw", path=env.get("PATH"))


def openclaw_package_dir(binary: str) -> Path | None:
    """The `openclaw` npm package folder behind the command (node_modules/.bin/openclaw is a link into it)."""
    p = Path(os.path.realpath(binary))
    for d in [p.parent, *p.parents][:6]:
        pkg = _read_json(d / "package.json", follow_symlinks=True)
        if isinstance(pkg, dict) and pkg.get("name") == "openclaw":
            return d
    return None


def release_support(pkg_dir: Path) -> dict:
    """What the installed release offers a context engine, read from its package (type declarations):
    {version, contextEngines, durableTurnContract: None (not in this release) | "v1" | "newer"}."""
    pkg = _read_json(pkg_dir / "package.json", follow_symlinks=True) or {}
    from occd.openclaw.state import parse_version

    version = parse_version(str(pkg.get("version") or ""))
    engines = durable = fence_v1 = False
    for f in sorted((pkg_dir / "dist").glob("*.d.ts")):
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        engines = engines or "registerContextEngine" in text
        if "currentTurnFence" in text:
            durable = True
            fence_v1 = fence_v1 or FENCE in text
        if engines and fence_v1:
            break
    return {"version": ".".join(map(str, version)) if version else None, "versionTuple": version,
            "contextEngines": engines, "durableTurnContract": ("v1" if fence_v1 else "newer") if durable else None}


def check_release(support: dict) -> None:
    v = support.get("versionTuple")
    if not support.get("contextEngines"):
        raise OccdError(f"OpenClaw {support.get('version') or '(unknown release)'} has no context engines",
                        "update OpenClaw; occd keeps cleaning by rewriting transcripts meanwhile", code="LEAN_UNSUPPORTED")
    if v is not None and v < MIN_RELEASE:
        raise OccdError(f"OpenClaw {support['version']} is older than the oldest release the lean view is tested on "
                        f"({'.'.join(map(str, MIN_RELEASE))})", "update OpenClaw", code="LEAN_UNSUPPORTED")
    if support.get("durableTurnContract") == "newer":
        raise OccdError(f"OpenClaw {support.get('version')} asks context engines for a durable-turn contract newer "
                        f"than the plugin's ({FENCE}); it would fall back to legacy",
                        "update occd", code="LEAN_UNSUPPORTED")


def slot_owner(config: dict) -> str | None:
    plugins = config.get("plugins") if isinstance(config.get("plugins"), dict) else {}
    slots = plugins.get("slots") if isinstance(plugins.get("slots"), dict) else {}
    v = slots.get("contextEngine")
    return v if isinstance(v, str) and v else None


def _load_config(state_dir: Path) -> dict:
    from occd.openclaw.state import load_openclaw_config

    try:
        return load_openclaw_config(state_dir)
    except OccdError:
        return {}


# ---------------------------------------------------------------------------------------------------------------
# enable / disable / status
# ---------------------------------------------------------------------------------------------------------------

class _OpenClaw:
    def __init__(self, state_dir: Path, binary: str | None, env: Mapping[str, str] | None = None):
        if not binary:
            raise OccdError("The openclaw command is not on PATH", "install OpenClaw or set OCCD_OPENCLAW_BIN",
                            code="OPENCLAW_MISSING")
        self.bin = binary
        self.env = dict(os.environ if env is None else env)
        self.env["OPENCLAW_STATE_DIR"] = str(state_dir)
        self.env.setdefault("NO_COLOR", "1")
        self.env.setdefault("OPENCLAW_NO_UPDATE_CHECK", "1")

    def run(self, args: list[str], timeout: float = 180.0) -> subprocess.CompletedProcess:
        try:
            return subprocess.run([self.bin, *args], capture_output=True, text=True, timeout=timeout, env=self.env,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise OccdError(f"`openclaw {' '.join(args[:2])}` did not finish in {timeout:.0f} s",
                            "try again; see OpenClaw's logs", code="OPENCLAW_FAILED") from None
        except OSError as e:
            raise OccdError(f"Cannot run {self.bin}: {e.strerror}", "check the OpenClaw install or OCCD_OPENCLAW_BIN",
                            code="OPENCLAW_FAILED") from None


def _last_line(p: subprocess.CompletedProcess) -> str:
    lines = [ln.strip() for ln in (p.stderr + "\n" + p.stdout).splitlines() if ln.strip()]
    return lines[-1][:300] if lines else f"exit {p.returncode}"


PATHS_LINE = "const INSTALLED_PATHS = null; // occd-lean:installed-paths"


def _copy_plugin(dest: Path, env=None) -> None:
    """The shipped plugin copied to `dest` (replacing an older copy in one rename), with the absolute paths of
    the rules and counts files written into it (OpenClaw may run the module from a copy of its own)."""
    paths.ensure_dir(dest.parent)
    tmp = dest.parent / f".plugin.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(plugin_source(), tmp, ignore=shutil.ignore_patterns("__pycache__", "*.tmp"))
    index = tmp / "index.js"
    code = index.read_text()
    if code.count(PATHS_LINE) != 1:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OccdError("The shipped plugin is damaged (no installed-paths line)", "reinstall occd", code="INTERNAL")
    baked = json.dumps({"policyPath": str(policy_path(env)), "statsPath": str(stats_path(env)),
                        "statePath": str(state_path(env))})
    index.write_text(code.replace(PATHS_LINE, f"const INSTALLED_PATHS = {baked}; // occd-lean:installed-paths"))
    _make_private(tmp)
    switch_plugin(tmp, dest)


def _make_private(root: Path) -> None:
    """The copy is occd's own, whatever modes the installed package has (0644/0755 from pip): folders 0700, files
    0600. OpenClaw's gateway loads it as the same user, which is all it needs."""
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o700)
        for n in filenames:
            p = os.path.join(dirpath, n)
            if not os.path.islink(p):
                os.chmod(p, 0o600)


def broken(state_dir: Path | None, env=None) -> str | None:
    """Why an enabled lean view cannot load: OpenClaw is configured for occd's plugin (the slot, a load path, or
    occd's own record) but the folder is missing or incomplete. None when it is fine or not enabled at all."""
    config = _load_config(state_dir) if state_dir is not None else {}
    ours = str(installed_plugin_dir(env))
    wanted = (slot_owner(config) == PLUGIN_ID or ours in configured_plugin_paths(config)
              or isinstance(_read_json(marker_path(env)), dict))
    if not wanted:
        return None
    problem = plugin_folder_problem(installed_plugin_dir(env))
    if problem:
        return f"{problem}: {ours}"
    for p in configured_plugin_paths(config):
        if p == ours or os.path.realpath(p) == os.path.realpath(ours):
            continue
        if PLUGIN_ID in p and plugin_folder_problem(Path(p)):
            return f"{plugin_folder_problem(Path(p))}: {p}"
    return None


def install_args(oc, dest: Path) -> list[str]:
    """`plugins install -l <dest>`, with `--force --accept-capabilities` where the CLI offers them: 2026.8+ (and
    every install on 10.x/11.x): --force confirms a non-registry source, --accept-capabilities is the operator's
    consent (asked by `enable`); 2026.7.x has neither meaning (its --force is refused with --link)."""
    help_p = oc.run(["plugins", "install", "--help"], timeout=120)
    args = ["plugins", "install", "-l", str(dest)]
    if "--accept-capabilities" in help_p.stdout:
        args += ["--force", "--accept-capabilities"]
    return args


def gateway_running(state_dir: Path) -> bool:
    try:
        from occd.openclaw.dbstore import gateway_status

        st = gateway_status(state_dir)
        return bool(st.get("running")) if isinstance(st, dict) else False
    except Exception:  # noqa: BLE001 - a hint, not a check
        return False


def enable(settings, state_dir: Path, *, confirm: Callable[[str], bool] | None = None, yes: bool = False,
           env: Mapping[str, str] | None = None) -> dict:
    """Install the plugin into OpenClaw (after the checks and the user's consent) and select it."""
    binary = openclaw_bin(env)
    oc = _OpenClaw(state_dir, binary, env)
    pkg = openclaw_package_dir(binary)
    if pkg is None:
        raise OccdError(f"Cannot find the openclaw package behind {binary}", "set OCCD_OPENCLAW_BIN to the openclaw "
                        "command of an npm install", code="OPENCLAW_MISSING")
    support = release_support(pkg)
    check_release(support)
    config = _load_config(state_dir)
    owner = slot_owner(config)
    if owner not in (None, "legacy", PLUGIN_ID):
        raise OccdError(f"Another context engine owns OpenClaw's slot: plugins.slots.contextEngine is {owner!r}",
                        "occd keeps cleaning by rewriting transcripts; disable that engine first to use the lean view",
                        code="LEAN_SLOT_TAKEN")
    consent = (f"OpenClaw will load occd's plugin {PLUGIN_ID} (plain JavaScript, {installed_plugin_dir(env)}) with "
               f"the capabilities it declares (a context engine: it chooses what the model is sent). Continue?")
    if not yes and not (confirm and confirm(consent)):
        raise OccdError("Not enabled: the capability grant was declined", "run again and confirm, or pass --yes",
                        code="CANCELLED")
    dest = installed_plugin_dir(env)
    _copy_plugin(dest, env)
    if _read_json(policy_path(env)) is None:
        write_policy(initial_policy(settings), env)
    p = oc.run(install_args(oc, dest))
    after = slot_owner(_load_config(state_dir))
    if p.returncode != 0 or after != PLUGIN_ID:
        raise OccdError(f"OpenClaw did not install the plugin: {_last_line(p)}",
                        "see `openclaw plugins list`; nothing else was changed", code="OPENCLAW_FAILED",
                        details={"slot": after})
    marker = {"stateDir": str(state_dir), "release": support["version"], "enabledAt": time.time(),
              "pluginDir": str(dest), "durableTurnContract": support["durableTurnContract"]}
    write_json_atomic(marker_path(env), marker)
    return {"enabled": True, "plugin": PLUGIN_ID, "pluginDir": str(dest), "release": support["version"],
            "durableTurnContract": support["durableTurnContract"], "gatewayRunning": gateway_running(state_dir),
            "policy": str(policy_path(env))}


def disable(settings, state_dir: Path, *, env: Mapping[str, str] | None = None) -> dict:
    """Uninstall the plugin (OpenClaw puts the slot back to legacy) and remove occd's copy and rules."""
    config = _load_config(state_dir)
    entries = config["plugins"].get("entries") if isinstance(config.get("plugins"), dict) else None
    entries = entries if isinstance(entries, dict) else {}
    installed = slot_owner(config) == PLUGIN_ID or PLUGIN_ID in entries
    if installed:
        oc = _OpenClaw(state_dir, openclaw_bin(env), env)
        p = oc.run(["plugins", "uninstall", PLUGIN_ID, "--force", "--keep-files"])
        if p.returncode != 0 and slot_owner(_load_config(state_dir)) == PLUGIN_ID:
            raise OccdError(f"OpenClaw did not uninstall the plugin: {_last_line(p)}",
                            f"run `openclaw plugins uninstall {PLUGIN_ID}`", code="OPENCLAW_FAILED")
    removed = []
    for p in (installed_plugin_dir(env), lean_dir(env) / "recall"):  # recall: the questions the plugin remembers
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(str(p))
    for p in (policy_path(env), marker_path(env), stats_path(env), state_path(env)):
        if p.exists():
            p.unlink()
            removed.append(str(p))
    return {"enabled": False, "wasInstalled": installed, "removed": removed,
            "gatewayRunning": gateway_running(state_dir)}


def is_enabled(state_dir: Path | None = None, env=None) -> bool:
    """occd enabled the lean view (for this state dir, when given) and the plugin copy is in place."""
    m = _read_json(marker_path(env))
    if not isinstance(m, dict) or not (installed_plugin_dir(env) / "index.js").is_file():
        return False
    return state_dir is None or m.get("stateDir") == str(state_dir)


# ---------------------------------------------------------------------------------------------------------------
# The rules (policy file) and the counts (stats file)
# ---------------------------------------------------------------------------------------------------------------

def initial_policy(settings=None) -> dict:
    """Every session off until the daemon's policy turns it on (the rules it then gets: `rules_for`)."""
    return {"version": 1, "default": {**DEFAULT_RULES, "mode": "off"}, "agents": {}, "sessions": {}}


def read_policy(env=None) -> dict:
    p = _read_json(policy_path(env))
    if not isinstance(p, dict):
        p = initial_policy()
    for k in ("agents", "sessions"):
        if not isinstance(p.get(k), dict):
            p[k] = {}
    if not isinstance(p.get("default"), dict):
        p["default"] = {**DEFAULT_RULES, "mode": "off"}
    return p


def write_policy(policy: dict, env=None) -> None:
    write_json_atomic(policy_path(env), policy)


def read_stats(env=None) -> dict:
    s = _read_json(stats_path(env))
    return s if isinstance(s, dict) else {}


def session_view(stats: dict, policy: dict, session_key: str | None) -> dict | None:
    """What the lean view does for one session: its mode and the plugin's last counts (None: nothing known)."""
    if not session_key:
        return None
    rule = policy.get("sessions", {}).get(session_key)
    agent = session_key.split(":")[1] if session_key.startswith("agent:") and session_key.count(":") >= 2 else None
    mode = ((rule or {}).get("mode") or (policy.get("agents", {}).get(agent) or {}).get("mode")
            or policy.get("default", {}).get("mode") or "off")
    counts = (stats.get("sessions") or {}).get(session_key)
    side = counts.get("sideOf") if isinstance(counts, dict) and isinstance(counts.get("sideOf"), str) else None
    if side and rule is None:  # a side session OpenClaw forked from that one (its memory flush): seen with its rules
        mode = (policy.get("sessions", {}).get(side) or {}).get("mode") or mode
    if mode == "off" and not counts:
        return None
    out = {"mode": mode, "active": mode != "off", **({"sideOf": side} if side else {})}
    if isinstance(counts, dict):
        cin, cout = counts.get("charsIn") or 0, counts.get("charsOut") or 0
        out.update({"callsHidden": counts.get("callsHidden", 0), "resultsHidden": counts.get("resultsHidden", 0),
                    "resultsStubbed": counts.get("resultsStubbed", 0), "hiddenTurns": counts.get("hiddenTurns", 0),
                    "tokensSaved": max(0, (cin - cout) // 4),
                    "savedPercent": round(100.0 * (cin - cout) / cin, 1) if cin else 0.0,
                    "lastAssembleAt": (counts.get("at") or 0) / 1000.0 or None})
    return out


# ---------------------------------------------------------------------------------------------------------------
# Health: did OpenClaw degrade or quarantine the engine? (for `occd doctor`)
# ---------------------------------------------------------------------------------------------------------------

def health_checks(state_dir: Path | None = None, env: Mapping[str, str] | None = None) -> list[dict]:
    """Check results for `occd doctor`: [{name, status: ok|warn|fail|skip, message, hint}]."""
    checks = []
    why = broken(state_dir, env)
    if why:
        return [{"name": "lean-view", "status": "fail", "message": f"the lean view is enabled but broken: {why}",
                 "hint": "OpenClaw refuses to start while a configured plugin path is missing: `occd lean enable` "
                         "again (or `occd lean disable`)"}]
    if not is_enabled(None, env):
        return [{"name": "lean-view", "status": "skip", "message": "the lean view is not enabled",
                 "hint": "`occd lean enable` to let the model see old tool calls no more (storage keeps them)"}]
    m = _read_json(marker_path(env)) or {}
    refused = refused_files(env)
    if refused:
        checks.append({"name": "lean-files", "status": "fail",
                       "message": f"not a regular file: {', '.join(refused)}; the plugin refuses it and the model "
                                  "gets the full history",
                       "hint": "remove it: occd and the plugin write a new one"})
    if state_dir is not None:
        owner = slot_owner(_load_config(state_dir))
        if owner != PLUGIN_ID:
            checks.append({"name": "lean-slot", "status": "fail",
                           "message": f"OpenClaw's context-engine slot is {owner or 'legacy'}, not {PLUGIN_ID}",
                           "hint": "`occd lean enable` again, or `occd lean disable`"})
        else:
            checks.append({"name": "lean-slot", "status": "ok", "message": f"{PLUGIN_ID} selected", "hint": None})
    since = m.get("enabledAt")
    found = {"degraded": 0, "quarantined": 0, "last": None}
    for f in openclaw_log_files(env):
        try:
            if since and f.stat().st_mtime < since:
                continue
            with open_log(f) as fh:
                r = scan_log_lines(fh)
        except (OSError, OccdError):
            continue
        for k in ("degraded", "quarantined"):
            found[k] += r[k]
        found["last"] = found["last"] or r["last"]
    if found["quarantined"]:
        checks.append({"name": "lean-engine", "status": "fail",
                       "message": f"OpenClaw quarantined {PLUGIN_ID} ({found['quarantined']} log lines): {found['last']}",
                       "hint": "the model gets the full history until the gateway restarts; update occd or `occd lean disable`"})
    elif found["degraded"]:
        checks.append({"name": "lean-engine", "status": "warn",
                       "message": f"OpenClaw degraded {PLUGIN_ID} to legacy ({found['degraded']} log lines): {found['last']}",
                       "hint": "this OpenClaw release may need a newer occd; `occd lean status` shows the release check"})
    else:
        checks.append({"name": "lean-engine", "status": "ok", "message": "no degradation or quarantine in OpenClaw's log",
                       "hint": None})
    errs = (read_stats(env).get("errors") or {})
    if errs.get("count"):
        checks.append({"name": "lean-errors", "status": "warn",
                       "message": f"the plugin passed the history unchanged {errs['count']} times after an error "
                                  f"(last in {errs.get('lastOp')})", "hint": "see OpenClaw's log for the plugin's warnings"})
    return checks


def sessions_summary(env=None) -> dict:
    """{enabled, sessions: {key: session_view}} for `occd status` (files only: no OpenClaw call)."""
    if not is_enabled(None, env):
        return {"enabled": False, "sessions": {}}
    policy, stats = read_policy(env), read_stats(env)
    views = {k: session_view(stats, policy, k) for k in set(policy["sessions"]) | set(stats.get("sessions") or {})}
    return {"enabled": True, "sessions": {k: v for k, v in views.items() if v}}


def status(state_dir: Path, env=None, rules: dict | None = None) -> dict:
    """`rules`: what a session gets when the daemon turns it on (config [lean], given by the caller); `default`:
    the plugin's policy file's rule for every other session (off until the daemon decides)."""
    config = _load_config(state_dir)
    policy = read_policy(env)
    stats = read_stats(env)
    sessions = {}
    for key in sorted(set(policy["sessions"]) | set(stats.get("sessions") or {})):
        v = session_view(stats, policy, key)
        if v:
            sessions[key] = v
    return {"enabled": is_enabled(state_dir, env), "broken": broken(state_dir, env),
            "slot": slot_owner(config) or "legacy",
            "marker": _read_json(marker_path(env)), "policyPath": str(policy_path(env)),
            "default": policy["default"], "agents": policy["agents"], "sessions": sessions,
            "rules": rules,
            "statsUpdatedAt": (stats.get("updatedAt") or 0) / 1000.0 or None,
            "policyError": stats.get("policyError"), "checks": health_checks(state_dir, env)}
