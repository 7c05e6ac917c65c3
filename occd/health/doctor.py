"""`occd doctor`: is everything in place for occd to do its job? A registry of small check functions.

To add a check (from any module): write a function taking the DoctorContext and returning one Result (that is
occd.checks.CheckResult, the one type of every health check's result) or a list of them, and register it:

    from occd.health.doctor import Result, check

    @check("dbstore", order=35)
    def _dbstore(ctx):
        return Result("dbstore", "ok", "3 agent databases readable")

A check that raises is reported as failed with its message; it never stops the others. Status "ok" (✓),
"warn" (!: optional or informational, exit code unaffected) or "fail" (✗: `occd doctor` exits 1).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from occd import paths
from occd.checks import CheckResult
from occd.config import redact

Result = CheckResult  # the name checks registered here use (see above)


@dataclass
class DoctorContext:
    now: float
    settings: Any = None            # None when the config could not be loaded
    settings_error: Any = None
    env: dict = field(default_factory=lambda: dict(os.environ))
    cache: dict = field(default_factory=dict)
    online: bool = False            # `doctor --online`: checks may use the network (the LLM reachability probe)

    def ledger(self):
        """The ledger opened read-only, or None when there is none (never created by the doctor)."""
        if "ledger" not in self.cache:
            led = None
            if paths.ledger_path().exists():
                from occd.ledger import Ledger

                try:
                    led = Ledger.open(readonly=True)
                except Exception:  # noqa: BLE001 - the ledger check reports why
                    led = None
            self.cache["ledger"] = led
        return self.cache["ledger"]

    def daemon(self) -> tuple[int | None, dict]:
        """(the pid holding the daemon's lock or None, its status file's contents or {}), read once per doctor run
        for the checks that look at the daemon (service, heartbeat, watch, daemon-log)."""
        if "daemon" not in self.cache:
            from occd.runtime.lock import InstanceLock
            from occd.runtime.statusfile import read_status

            self.cache["daemon"] = (InstanceLock.holder(), read_status() or {})
        return self.cache["daemon"]

    def state_dir(self) -> Path:
        from occd.openclaw.state import resolve_state_dir

        return resolve_state_dir(state_dir=getattr(self.settings, "state_dir", None))

    def close(self) -> None:
        led = self.cache.get("ledger")
        if led is not None:
            led.close()


CHECKS: list[tuple[int, str, Callable[[DoctorContext], Any]]] = []


def check(name: str, order: int = 50):
    """Register a check function (see the module docstring)."""

    def deco(fn):
        CHECKS.append((order, name, fn))
        CHECKS.sort(key=lambda x: x[0])
        return fn

    return deco


def run_checks(ctx: DoctorContext, only: list[str] | None = None) -> list[Result]:
    out: list[Result] = []
    for _order, name, fn in list(CHECKS):
        if only and name not in only:
            continue
        try:
            res = fn(ctx)
        except Exception as e:  # noqa: BLE001 - a broken check is a failed line, not a crashed doctor
            msg = getattr(e, "message", None) or f"{type(e).__name__}: {e}"
            res = Result(name, "fail", str(msg).splitlines()[0] if str(msg) else type(e).__name__,
                         getattr(e, "hint", None))
        if res is None:
            continue
        for r in res if isinstance(res, list) else [res]:  # settings in a line (llm.api_base): credentials redacted
            r.detail, r.hint = redact(r.detail), redact(r.hint)
            out.append(r)
    return out


def diagnose(now: float | None = None, only: list[str] | None = None, online: bool = False) -> list[Result]:
    from occd.config import load_settings
    from occd.errors import OccdError

    ctx = DoctorContext(now=time.time() if now is None else now, online=online)
    try:
        ctx.settings = load_settings()
    except OccdError as e:
        ctx.settings_error = e
    try:
        return run_checks(ctx, only)
    finally:
        ctx.close()


def _age(secs: float) -> str:
    secs = max(0.0, secs)
    if secs < 120:
        return f"{secs:.0f}s"
    if secs < 7200:
        return f"{secs / 60:.0f}m"
    if secs < 172800:
        return f"{secs / 3600:.1f}h"
    return f"{secs / 86400:.0f}d"


def _size(n: int) -> str:
    from occd.units import human_bytes

    return human_bytes(n)


# ---- the checks -----------------------------------------------------------------------------------------

@check("config", order=10)
def check_config(ctx: DoctorContext) -> Result:
    p = paths.config_file()
    if ctx.settings_error is not None:
        e = ctx.settings_error
        return Result("config", "fail", e.message, e.hint)
    where = paths.display_path(p) if p.is_file() else f"{paths.display_path(p)} absent: defaults"
    return Result("config", "ok", f"parsed ({where}; no unknown keys)")


@check("openclaw", order=20)
def check_openclaw(ctx: DoctorContext) -> list[Result]:
    from occd.openclaw.state import list_agents

    sd = ctx.state_dir()
    agents = list_agents(sd)
    if not agents:
        return [Result("openclaw", "fail", f"no agents in {paths.display_path(sd)}",
                       "run OpenClaw once, or point OPENCLAW_STATE_DIR at its state directory")]
    out = [Result("openclaw", "ok", f"state dir {paths.display_path(sd)}, {len(agents)} agent{'s' if len(agents) != 1 else ''}")]
    for a in agents:
        bad = a.era == "needs-migration"
        out.append(Result(f"agent {a.id}", "fail" if bad else "ok", f"{a.era} era",
                          "run `openclaw doctor --fix` to import the file-era sessions" if bad else None,
                          data={"agent": a.id, "era": a.era}))
    ctx.cache["agents"] = agents
    return out


@check("openclaw-db", order=25)
def check_openclaw_db(ctx: DoctorContext) -> list[Result] | None:
    """Every agent database occd can read (schema, missing columns) and, when the `openclaw` CLI on PATH is of
    another release than the database, what to do (a newer CLI refuses an older database until `openclaw doctor
    --fix`): occd.openclaw.health.check_stores, the checks `occd status` and the daemon's log name too."""
    from occd.openclaw.health import check_stores

    return check_stores(ctx.state_dir()) or None


@check("ledger", order=30)
def check_ledger(ctx: DoctorContext) -> Result:
    from occd.ledger import migrate

    p = paths.ledger_path()
    if not p.exists():
        return Result("ledger", "warn", f"none yet at {paths.display_path(p)}",
                      "the daemon creates it: `occd service install` or `occd run --once`")
    from occd.ledger.engine import make_engine

    eng = make_engine(p, readonly=True)
    try:
        rev = migrate.current_revision(eng)
    finally:
        eng.dispose()
    if rev != migrate.HEAD_REVISION:
        return Result("ledger", "fail", f"schema {rev}, this occd needs {migrate.HEAD_REVISION}", "run `occd db upgrade`")
    return Result("ledger", "ok", f"revision {rev} at {paths.display_path(p)}")


@check("service", order=40)
def check_service(ctx: DoctorContext) -> Result:
    from occd.runtime import service

    pid, _ = ctx.daemon()
    try:
        st = service.service_state()
    except Exception:  # noqa: BLE001 - an unsupported platform: only the lock tells
        st = {"installed": False}
    if not st.get("installed"):
        if pid:
            return Result("service", "ok", f"not installed; a foreground daemon runs (pid {pid})")
        return Result("service", "fail", "not installed and no daemon running: nothing watches the sessions",
                      "occd service install (observe mode; --act to let it act)")
    where = f"installed ({paths.display_path(st['unitPath'])})"
    if st.get("bus") is False:  # the manager could not be asked: say so, never guess "not active"
        from occd.runtime.service_probe import no_bus_hint

        running = f"a daemon runs (pid {pid})" if pid else "no daemon runs"
        return Result("service", "warn" if pid else "fail",
                      f"{where}, user manager unreachable from this shell ({st.get('busError')}); {running}",
                      no_bus_hint(), data={"service": st})
    bits = [where, "active" if st.get("active") else "not active"]
    status = "ok" if st.get("active") else "fail"
    hint = None if st.get("active") else "systemctl --user start occd (or `occd service install` again)"
    if st.get("enabled") is False:
        bits.append(f"but {st.get('enabledState') or 'not enabled'}: it will not start at the next boot or login")
        status = "warn" if status == "ok" else status
        hint = hint or "systemctl --user enable occd"
    if st.get("lingering") is False:
        from occd.runtime.service_probe import user_name

        bits.append("user not lingering: stops at logout")
        status = "warn" if status == "ok" else status
        hint = hint or f"loginctl enable-linger {user_name()} keeps it running after logout"
    return Result("service", status, ", ".join(bits), hint, data={"service": st})


@check("service-openclaw", order=42)
def check_service_openclaw(ctx: DoctorContext) -> Result | None:
    """The openclaw the installed service will run (its unit's OCCD_OPENCLAW_BIN / PATH) against the shell's."""
    from occd.runtime import service
    from occd.runtime.service_openclaw import compare, resolve_openclaw

    svc_env = service.installed_environment()  # None: nothing installed (the service check says so)
    if svc_env is None:
        return None
    r = compare(svc_env, resolve_openclaw(ctx.env))
    return Result("service-openclaw", r["status"], r["detail"], r["hint"],
                  data={"service": r["service"], "shell": r["shell"]})


@check("heartbeat", order=45)
def check_heartbeat(ctx: DoctorContext) -> Result:
    pid, st = ctx.daemon()
    last = st.get("lastCycle")
    interval = ctx.settings.daemon.scan_interval_seconds if ctx.settings else 300
    if not pid:
        if last:
            return Result("heartbeat", "warn", f"daemon not running; last cycle {_age(ctx.now - last)} ago")
        return Result("heartbeat", "warn", "daemon not running (no cycle recorded)")
    if not last:
        return Result("heartbeat", "warn", f"daemon pid {pid} has not finished a cycle yet")
    age = ctx.now - last
    if age > 3 * interval:
        return Result("heartbeat", "fail", f"last cycle {_age(age)} ago (scan every {_age(interval)})",
                      "the daemon seems stuck: `occd logs`, then `systemctl --user restart occd`")
    return Result("heartbeat", "ok", f"last cycle {_age(age)} ago (pid {pid})")


@check("watch", order=46)
def check_watch(ctx: DoctorContext) -> Result:
    """Which mode the daemon runs in: events (it wakes on OpenClaw's writes) or polling, with the reason."""
    pid, st = ctx.daemon()
    w = (st.get("watch") or {}) if pid else {}
    if w.get("mode"):
        mode, reason, who = w["mode"], w.get("reason"), "the daemon runs in"
    elif ctx.settings is not None and not ctx.settings.daemon.watch:
        mode, reason, who = "polling", "daemon.watch is off", "a daemon would run in"
    else:
        from occd.runtime.watch import probe

        try:
            mode, reason = probe(ctx.state_dir())
        except Exception as e:  # noqa: BLE001 - the probe reports, never fails the doctor
            mode, reason = "polling", f"watching could not start: {e}".splitlines()[0]
        who = "a daemon would run in"
    if mode == "events":
        return Result("watch", "ok", f"{who} events mode ({reason}): it looks at a session when its run ends")
    return Result("watch", "warn", f"{who} polling mode ({reason})",
                  "events mode needs the watchdog package and inotify watches (fs.inotify.max_user_watches); "
                  "polling scans every daemon.poll_interval_seconds")


@check("daemon-log", order=47)
def check_daemon_log(ctx: DoctorContext) -> Result | None:
    """Whether the running daemon can write its log file (a full or removed OCCD_HOME makes it go on without)."""
    pid, st = ctx.daemon()
    if not pid:
        return None
    why = st.get("logDegraded")
    if not why:
        return Result("daemon-log", "ok", "the daemon writes its log")
    return Result("daemon-log", "warn", f"the daemon cannot write its log: {why}",
                  "free space in OCCD_HOME (or recreate it); the log resumes by itself on the next write")


@check("scan", order=50)
def check_scan(ctx: DoctorContext) -> Result | None:
    led = ctx.ledger()
    if led is None:
        return None
    ls = led.last_scan()
    try:
        failed = led.scan_failure()
    except Exception:  # noqa: BLE001 - an older ledger: the ledger check says to upgrade
        failed = None
    if failed:  # the scan job failed after the last recorded scan: its figures are stale
        return Result("scan", "fail", f"the last scan failed {_age(ctx.now - failed['ts'])} ago: "
                      f"{(failed.get('error') or '?')[:160]}" + (f" (the figures are from the scan "
                      f"{_age(ctx.now - ls['started'])} ago)" if ls else ""), "`occd logs --since 1h` shows why")
    if not ls:
        return Result("scan", "warn", "no scan recorded yet")
    if ls.get("errors"):
        first = (ls.get("error_text") or "").splitlines()[:1]
        return Result("scan", "fail", f"last scan ({_age(ctx.now - ls['started'])} ago) had {ls['errors']} error(s)"
                      + (f": {first[0][:120]}" if first else ""), "`occd logs` shows them in full")
    return Result("scan", "ok", f"last scan {_age(ctx.now - ls['started'])} ago, {ls['sessions_seen']} "
                                f"session{'s' if ls['sessions_seen'] != 1 else ''}, "
                                "no errors")


@check("breakers", order=55)
def check_breakers(ctx: DoctorContext) -> Result | None:
    led = ctx.ledger()
    if led is None:
        return None
    open_ = [b for b in led.breakers() if b.state != "closed"]
    if open_:
        names = ", ".join(f"{b.agent}/{b.kind} {b.state}" for b in open_)
        return Result("breakers", "fail", f"open: {names}", "`occd breaker status` says why; `occd breaker reset AGENT`")
    return Result("breakers", "ok", "all closed")


@check("problems", order=56)
def check_problems(ctx: DoctorContext) -> Result | None:
    """Open problems `occd check` (or a verification of what occd did) recorded: damaged or missing backups
    and archives, a rotation that changed nothing, turns that bypassed the lean view."""
    led = ctx.ledger()
    if led is None:
        return None
    try:
        open_ = led.open_problems()  # fail and warn: what `status SESSION` shows and `status --check` fails on
        last = led.last_check_run()
    except Exception:  # noqa: BLE001 - an older ledger: the ledger check says to upgrade
        return None
    if open_:
        shown = "; ".join(f"{p['subject']}: {p['message']}" for p in open_[:3])
        more = f" (+{len(open_) - 3} more)" if len(open_) > 3 else ""
        return Result("problems", "fail", f"{len(open_)} open: {shown}{more}", open_[0].get("hint") or "occd check")
    if last is None:
        return Result("problems", "warn", "no `occd check` recorded yet", "run `occd check` (the daemon runs it weekly)")
    return Result("problems", "ok", f"none open; last check {_age(ctx.now - last['started'])} ago, "
                                    f"{last['artifacts']} artifact(s)")


@check("locks", order=60)
def check_locks(ctx: DoctorContext) -> Result | None:
    from occd.openclaw.locks import read_lock

    agents = ctx.cache.get("agents")
    if agents is None:
        return None
    stale = []
    for a in agents:
        sdir = a.dir / "sessions"
        try:
            names = os.listdir(sdir)
        except OSError:
            continue
        for n in names:
            if n.endswith(".jsonl.lock"):
                info = read_lock(sdir / n, now=ctx.now)
                if info is not None and not info.alive:
                    stale.append((sdir / n, info.reason))
    if stale:
        shown = ", ".join(f"{paths.display_path(p)} ({why})" for p, why in stale[:3])
        # harmless (its own hint says why): a warning, never a failure
        return Result("locks", "warn", f"{len(stale)} stale transcript lock{'s' if len(stale) != 1 else ''}: {shown}",
                      "OpenClaw removes them on its next run; occd treats them as not running",
                      data={"stale": [str(p) for p, _ in stale]})
    return Result("locks", "ok", "no stale transcript locks")


@check("backups", order=65)
def check_backups(ctx: DoctorContext) -> Result | None:
    from occd.actions.backups import is_backup_name

    agents = ctx.cache.get("agents")
    if agents is None:
        return None
    n = total = 0
    where = None
    for a in agents:
        sdir = a.dir / "sessions"
        try:
            with os.scandir(sdir) as it:
                for e in it:
                    if is_backup_name(e.name):
                        n += 1
                        total += e.stat().st_size
        except OSError:
            continue
        where = where or sdir
    free = shutil.disk_usage(where).free if where else None
    detail = f"{n} backup file{'s' if n != 1 else ''}, {_size(total)}" + (f"; {_size(free)} free" if free is not None else "")
    if free is not None and free < max(total, 1 << 30):
        return Result("backups", "fail", detail, "low disk space: lower backups_keep or free space",
                      data={"files": n, "bytes": total, "freeBytes": free})
    return Result("backups", "ok", detail, data={"files": n, "bytes": total, "freeBytes": free})


@check("openclaw-plugins", order=78)
def check_openclaw_plugins(ctx: DoctorContext):
    """Every folder OpenClaw is configured to load must exist (a missing one stops its start: "plugin path not
    found"), and occd's lean view, when enabled, must be complete."""
    from occd import lean
    from occd.errors import OccdError
    from occd.openclaw.state import load_openclaw_config

    try:
        state = ctx.state_dir()
        config = load_openclaw_config(state)
    except OccdError:
        return None
    out = []
    missing = [p for p in lean.configured_plugin_paths(config) if not os.path.isdir(p)]
    if missing:
        out.append(Result("openclaw-plugins", "fail", f"openclaw.json's plugins.load.paths names a missing folder: "
                          f"{missing[0]}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
                          "OpenClaw refuses to start (plugin path not found): `occd lean enable` again if it is "
                          "occd's, else fix plugins.load.paths"))
    why = lean.broken(state, ctx.env)
    if why:
        out.append(Result("lean-view", "fail", f"the lean view is enabled but broken: {why}",
                          "`occd lean enable` again (or `occd lean disable`)"))
    from occd.lean.check import SLOT_LOST_HINT, slot_lost

    lost = slot_lost(state, ctx.env)
    if lost:
        out.append(Result("lean-slot", "fail", f"the lean view is enabled but OpenClaw's context-engine slot is "
                          f"{lost}: it covers no session", SLOT_LOST_HINT))
    return out or None


@check("llm", order=80)
def check_llm(ctx: DoctorContext) -> Result:
    from occd.relevance.extras import install_hint, installed

    if ctx.settings is None:
        return Result("llm", "warn", "config not loaded")
    if not ctx.settings.llm.enabled:
        return Result("llm", "warn", "disabled (llm.enabled = false): keyword relevance")
    if not installed("llm"):
        return Result("llm", "warn", "optional part 'llm' not installed: keyword relevance", install_hint("llm"))
    from occd.relevance.llm import key_problem

    model = ctx.settings.llm.model
    problem = key_problem(model, ctx.settings.llm.api_base, ctx.env)
    if problem:
        return Result("llm", "warn", f"{problem}: keyword relevance until then")
    where = f" ({ctx.settings.llm.api_base})" if ctx.settings.llm.api_base else ""
    if not ctx.online:
        return Result("llm", "ok", f"{model}: key present{where}" + " (`occd doctor --online` tries a call)")
    from occd.relevance.llm import probe

    ok, what = probe(ctx.settings.llm, model)
    if not ok:
        return Result("llm", "fail", f"{model}{where}: key present, not reachable: {what}",
                      "check the key, llm.api_base and the network; `occd select` uses keywords until then")
    return Result("llm", "ok", f"{model}: key present, reachable{where}, {what}")


@check("mcp", order=85)
def check_mcp(ctx: DoctorContext) -> Result:
    from occd.relevance.extras import install_hint, installed

    if installed("mcp"):
        return Result("mcp", "ok", "installed (`occd mcp`)")
    return Result("mcp", "warn", "optional part 'mcp' not installed", install_hint("mcp"))


@check("gh", order=90)
def check_gh(ctx: DoctorContext) -> Result:
    gh = shutil.which("gh")
    if gh:
        return Result("gh", "ok", f"{gh} (pull requests in project-status and select)")
    return Result("gh", "warn", "not on PATH: project status without pull requests", "https://cli.github.com")
