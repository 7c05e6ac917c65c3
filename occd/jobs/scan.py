"""The scan job: observe every agent's sessions cheaply and record what changed in the ledger.

Incremental by design (the daemon runs it every 5 minutes for months):
- every transcript is stat'ed; an unchanged (inode, size, mtime) costs no read at all;
- a file that grew (same inode) is read from where the last scan stopped (only the appended lines);
- a new or replaced file is read from its tail only (the last assistant usage), never parsed whole;
- compaction counts come from OpenClaw's own index (file era: sessions.json; database era: entry_json), plus
  compaction entries seen in appended tails for transcripts the index does not know;
- the database era is read through the read-only store (never written).
Observations are written in one batch, only for sessions whose figures changed.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import datetime
from pathlib import Path

from occd.errors import OccdError
from occd.jobs import scanstate
from occd.jobs.scanconfig import (  # noqa: F401 - _openclaw_config is the jobs' one reader of OpenClaw's config
    _begin_cycle, _cycle_config_mtime, _end_cycle, _openclaw_config, _window)
from occd.jobs.scanagents import (AGENTS_KEY, LISTED_KEY, _agent_fp, _basis, _changed_only, _Seen, _store_for,
                                  _unchanged)
from occd.jobs.scanagents import forget, stat_key  # noqa: F401 - the other jobs import them from here
from occd.jobs.scanstate import ScanResult, SessionObs
from occd.openclaw.figure import compactions as count_compactions, rewrite_marks, session_figure, stale_estimate, window_choice
from occd.openclaw.state import DEFAULT_CONTEXT_WINDOW

log = logging.getLogger("occd.jobs.scan")
CACHE_KEY = "scan.files"


UNVERIFIED_ERA = "db-unverified"  # a database-era agent whose schema occd reads but does not act on


def scan_agent(ctx, agent, result: ScanResult, files: dict, seen_paths: set) -> None:
    store = _store_for(ctx.state_dir, agent)
    try:
        _scan_store(ctx, agent, store, result, files, seen_paths)
    finally:
        close = getattr(store, "close", None)  # the database era's read-only connection
        if close is not None:
            close()


def _scan_store(ctx, agent, store, result: ScanResult, files: dict, seen_paths: set) -> None:
    cfg = _openclaw_config(ctx)
    cfg_mtime = _cycle_config_mtime(ctx)
    era = getattr(store, "era", agent.era)
    result.agents[agent.id] = era
    seen_agents = ctx.cache.setdefault(AGENTS_KEY, {})
    last: _Seen | None = seen_agents.pop(agent.id, None)
    fp, basis = _agent_fp(agent), _basis(ctx)
    if era != "file" or last is None or last.basis != basis:  # (the database era is read each time)
        last = None
    same = last is not None and last.fp == fp
    if same:  # the index and the folder did not change: the sessions listed last time
        infos = last.infos
        result.errors.extend(last.warnings)
        seen_agents[agent.id] = last
    else:
        try:
            infos = store.sessions()
            if era == "db" and not store.actionable:
                # a schema occd was not shown (occd.openclaw.dbschema): read, reported, never acted on: the apply,
                # rotate and lean jobs act only on sessions of era file/db (the Gateway refuses on its own too)
                era = result.agents[agent.id] = UNVERIFIED_ERA
        finally:
            said = [f"{agent.id}: {w}" for w in getattr(store, "warnings", []) or []]
            result.errors.extend(said)
            for w in getattr(store, "pending", []) or []:
                log.debug("%s: %s", agent.id, w)
        if era == "file":
            seen_agents[agent.id] = _Seen(fp, basis, infos, said)
    seen = seen_agents.get(agent.id)
    reuse = seen.obs if seen is not None else None          # this scan's observations, kept for the next
    before = last.obs if last is not None else {}           # the last scan's
    windows: dict = {}
    marks: dict | None = None  # the ledger's post-rewrite estimates, read only when a file was read from its tail
    for info in infos:
        if ctx.stop.is_set():
            return
        if before and info.path is not None:  # the quick way for what did not change: a stat
            spath = str(info.path)
            prev = files.get(spath)
            old = before.get(info.session_id)
            if prev is not None and old is not None and (old[0] is info.entry or (not same and old[0] == info.entry)):
                try:
                    st = os.stat(spath)
                except OSError:
                    st = None
                if st is not None and (prev["ino"], prev["size"], prev["mtime_ns"]) == (st.st_ino, st.st_size,
                                                                                          st.st_mtime_ns):
                    obs = old[1]
                    if not same or obs.running:  # a lock came or went, or a run's lock may have gone stale
                        running = store.is_running(info)
                        if running != obs.running:
                            from dataclasses import replace

                            obs = replace(obs, running=running)
                    reuse[info.session_id] = (info.entry, obs)
                    seen_paths.add(spath)
                    result.sessions.append(obs)
                    result.reused += 1
                    result.kept.add(id(obs))
                    continue
        wkey = (getattr(info, "model", None), getattr(info, "model_provider", None))
        if wkey not in windows:
            windows[wkey] = _window(ctx, cfg, agent.id, info)
        window, wsource = window_choice(info.entry, windows[wkey], cfg_mtime,  # the one rule (occd.openclaw.figure)
                                        None if cfg is None else DEFAULT_CONTEXT_WINDOW, info.session_id)
        if info.path is None:  # database era: figures from OpenClaw's own entry, no transcript read
            fig = session_figure(entry=info.entry, window=window, session_id=info.session_id)
            obs = SessionObs(
                agent.id, era, info.session_id, info.key, None, info.size,
                count_compactions(info.compaction_count, indexed=bool(info.key)) or 0,
                fig.tokens, fig.source, window, None,
                (info.updated_at or 0) / 1000 or None, running=store.is_running(info))
            obs.window_source = wsource
            _budget_records(obs, info, cfg, reserve_cap=_db_reserve_cap(store))
            result.sessions.append(obs)
            continue
        path = info.path if isinstance(info.path, Path) else Path(info.path)
        spath = str(path)
        try:
            st = os.stat(path)
            prev = files.get(spath)
            state = scanstate._file_tokens(path, st, prev, result)
            if state is not prev and state.pop("tail", False):
                # read anew (new, replaced or rewritten file): was it occd that rewrote it after its last usage?
                # (a manual edit while the daemon runs: the ledger has its observation, this cache does not)
                if marks is None:
                    marks = rewrite_marks(agent.id, ledger=ctx.ledger)
                after = stale_estimate(path, marks.get(info.session_id))
                if after is not None:
                    state.update(tokens=after, source="estimate", stale=True)
        except FileNotFoundError:
            result.errors.append(f"{agent.id}/{info.session_id}: transcript vanished during the scan")
            continue
        except (OSError, OccdError) as e:
            msg = getattr(e, "message", None) or str(e)
            result.errors.append(f"{agent.id}/{info.session_id}: {msg}")
            continue
        files[str(path)] = state
        seen_paths.add(str(path))
        compactions = count_compactions(info.compaction_count, state.get("compactions_seen", 0), indexed=bool(info.key))
        tokens, source = state.get("tokens"), state.get("source")
        fig = session_figure(transcript=(tokens, source), entry=info.entry, window=window,
                             after_rewrite=tokens if state.get("stale") else None, session_id=info.session_id)
        tokens, source = fig.tokens, fig.source
        last = max(st.st_mtime, state.get("last_ts") or 0)
        obs = SessionObs(agent.id, era, info.session_id, info.key, path, st.st_size, compactions, tokens, source,
                         window, state.get("entries"), last, running=store.is_running(info))
        obs.window_source = wsource
        _budget_records(obs, info, cfg)
        result.sessions.append(obs)
        if reuse is not None:
            reuse[info.session_id] = (info.entry, obs)


def _db_reserve_cap(store) -> float | None:
    """OpenClaw 2026.9.5 and later cap the compaction reserve at a quarter of the window
    (resolveEffectiveCompactionReserveTokens, MAX_COMPACTION_RESERVE_RATIO); 8.1–9.4 keep 2026.7's rule."""
    from occd.openclaw.state import parse_version

    try:
        v = parse_version((store.schema() or {}).get("appVersion"))
    except Exception:  # noqa: BLE001 - the recorded budget is used whenever OpenClaw recorded one
        return None
    return 0.25 if v is not None and tuple(v)[:3] >= (2026, 9, 5) else None


def midrun_check(cfg: dict | None) -> bool:
    """OpenClaw checks its estimate mid-run too, after the tool results: `agents.defaults.compaction
    .midTurnPrecheck.enabled` is true (false by default in every release 2026.7.1 to 2026.9.6)."""
    v = cfg
    for k in ("agents", "defaults", "compaction", "midTurnPrecheck", "enabled"):
        v = v.get(k) if isinstance(v, dict) else None
    return v is True


def _budget_records(obs: SessionObs, info, cfg: dict | None, reserve_cap: float | None = None) -> None:
    """OpenClaw's last pre-prompt check, its compaction checkpoints and the prompt budget it applies (the one it
    recorded for this window, else computed from its compaction settings; `reserve_cap`: the reserve's cap as a
    share of the window, database era from 2026.9.5)."""
    from occd.policy.budget import prompt_budget
    from occd.policy.emergency import checkpoints_from_entry

    entry = info.entry or {}
    st = entry.get("contextBudgetStatus")
    if isinstance(st, dict) and st.get("sessionId") not in (None, info.session_id):
        st = None  # recorded for the key's previous session (a rotation): not this session's last turn
    obs.budget_status = st if isinstance(st, dict) else None
    obs.checkpoints = checkpoints_from_entry(entry)
    obs.model = getattr(info, "model", None)
    obs.midrun_check = midrun_check(cfg)
    if obs.budget_status and obs.context_window and obs.budget_status.get("contextTokenBudget") == obs.context_window:
        b = obs.budget_status.get("promptBudgetBeforeReserve")
        if isinstance(b, int) and not isinstance(b, bool) and b > 0:
            obs.prompt_budget = b
            return
    if obs.context_window:
        agents = (cfg or {}).get("agents")
        comp = agents.get("defaults") if isinstance(agents, dict) else None
        comp = comp.get("compaction") if isinstance(comp, dict) else None
        comp = comp if isinstance(comp, dict) else {}

        def num(v):
            return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None

        obs.prompt_budget = prompt_budget(obs.context_window, num(comp.get("reserveTokens")),
                                          num(comp.get("reserveTokensFloor")), reserve_cap=reserve_cap)


PENDING_KEY = "scan.unrecorded"   # notes about scans the ledger could not take, recorded with the next one
NOTES_KEY = "scan.notes"          # problems logged last cycle: repeated ones go to DEBUG, not every 5 minutes
FLOOR_KEY = "clock.floor"
FULL_KEY = "scan.full_record"     # when every observation was last written (last_seen), unchanged ones included
FULL_RECORD_S = 300.0         # the latest timestamp written to the ledger (see record_time)


def _note(ctx, notes: dict, key: str, level: int, msg: str) -> None:
    """Log a problem at `level` the first time it shows up (and at DEBUG while it lasts)."""
    notes[key] = msg
    log.log(level if key not in ctx.cache.get(NOTES_KEY, {}) else logging.DEBUG, "%s", msg)


EXAMPLES = 3  # problems named in a cycle's summary line


def _summary(what: str, items: list[str]) -> str:
    shown = "; ".join(items[:EXAMPLES])
    more = f" (and {len(items) - EXAMPLES} more)" if len(items) > EXAMPLES else ""
    return f"{len(items)} {what}: {shown}{more}"


def _note_errors(ctx, notes: dict, errors: list[str]) -> None:
    """The scan's problems, in linear time and at most one line per kind per cycle (an index with 100k entries
    whose transcripts are missing must neither take a quadratic de-duplication nor write 100k lines a cycle):
    problems new this cycle in one WARNING (a count and a few examples), those that went away in one INFO;
    problems that persist are only counted (DEBUG)."""
    before = ctx.cache.get(NOTES_KEY, {})
    said = set(notes.values())
    new: list[str] = []
    lasting = 0
    for e in errors:
        if e in said:
            continue
        said.add(e)
        notes[e] = e
        if e in before:
            lasting += 1
        else:
            new.append(e)
    if len(new) == 1:
        log.warning("%s", new[0])
    elif new:
        log.warning("%s", _summary("new problems in this scan", new))
    if lasting:
        log.debug("%d problem(s) noted before still present", lasting)
    gone = [before[k] for k in before if k not in notes]
    if len(gone) == 1:
        log.info("resolved: %s", gone[0])
    elif gone:
        log.info("resolved: %s", _summary("problems", gone))


def record_time(ctx, result: ScanResult | None = None) -> float:
    """`now` for ledger records, never earlier than what was already written: when the wall clock jumps back
    (NTP step, a wrong clock corrected), the ledger's "latest" rows and its ordering stay right. The jump is
    logged and noted in the scan record; the floor advances a second per cycle until the clock catches up."""
    now = ctx.now()
    floor = ctx.cache.get(FLOOR_KEY)
    if floor is None:
        try:
            last = ctx.ledger.last_scan()
            floor = last["started"] if last else None
        except OccdError:
            floor = None
    if floor is not None and now < floor:
        if result is not None:
            msg = (f"the clock moved back {floor - now:.0f}s (now {datetime.fromtimestamp(now).isoformat(timespec='seconds')});"
                   " ledger times are held at the last recorded one until it catches up")
            result.errors.append(msg)
            log.warning("%s", msg)
        now = floor + (1.0 if result is not None else 0.0)
    ctx.cache[FLOOR_KEY] = now
    return now


def ensure_scan(ctx) -> ScanResult:
    """What the jobs chained after the scan act on: the scan this cycle left in `ctx.last_scan`, or, when there is
    none yet (a job run on its own), a scan run now."""
    if ctx.last_scan is None:
        run(ctx)
    return ctx.last_scan


def run(ctx) -> dict:
    from occd.openclaw import list_agents
    from occd.openclaw.state import release_evidence

    t0 = time.monotonic()
    result = ScanResult(started=0.0)
    result.started = record_time(ctx, result)
    notes: dict[str, str] = {}
    cached = ctx.cache.get(CACHE_KEY)
    if cached is None:
        cached = scanstate._load_cache()
    files = dict(cached)  # committed to ctx.cache once the cycle went through
    seen: set = set()
    _begin_cycle(ctx)
    try:
        agents = _changed_only(ctx)
        if agents is None:
            try:
                rel = release_evidence(ctx.state_dir)
                agents = list_agents(ctx.state_dir, release=rel)
            except OccdError as e:
                result.errors.append(e.message)
                _note(ctx, notes, "state", logging.ERROR, f"{e.message} ({e.hint})" if e.hint else e.message)
                agents = []
            ctx.cache[LISTED_KEY] = (agents, _basis(ctx), rel.db_era) if agents else None
        complete = _scan_agents(ctx, agents, result, files, seen, notes)
    finally:
        _end_cycle(ctx)
    if ctx.stop.is_set():
        complete = False
    if complete and ctx.changed is None:  # (a wake for events looks at some agents only: the next whole scan does)
        for p in [p for p in files if p not in seen]:  # forget files that are gone
            del files[p]
    return _finish(ctx, result, files, cached, notes, t0)


def _scan_agents(ctx, agents, result: ScanResult, files: dict, seen: set, notes: dict) -> bool:
    complete = True
    for agent in agents:
        if ctx.stop.is_set():
            complete = False
            break
        if _unchanged(ctx, agent, result):
            continue
        if agent.era == "empty":
            result.agents[agent.id] = "empty"
            _note(ctx, notes, f"empty:{agent.id}", logging.INFO,
                  f"agent {agent.id} has no sessions yet ({agent.dir / 'sessions'})")
            continue
        if agent.era == "needs-migration":
            _note(ctx, notes, f"migrate:{agent.id}", logging.WARNING,
                  f"agent {agent.id}: file-era sessions not yet imported by OpenClaw; occd only reports them "
                  "(run `openclaw doctor --fix`)")
        try:
            scan_agent(ctx, agent, result, files, seen)
        except OccdError as e:  # with what to do: `occd status` and the log show it (an unreadable schema...)
            said = f"{agent.id}: {e.message}" + (f" ({e.hint})" if e.hint else "")
            result.errors.append(said)
            _note(ctx, notes, f"agent:{agent.id}", logging.WARNING, said)
            result.agents.setdefault(agent.id, agent.era)
            complete = False  # keep what we know of its files
        except OSError as e:
            result.errors.append(f"{agent.id}: {e.strerror or e}")
            _note(ctx, notes, f"agent:{agent.id}", logging.WARNING, f"{agent.id}: cannot read its sessions: {e}")
            result.agents.setdefault(agent.id, agent.era)
            complete = False
        except Exception as e:  # noqa: BLE001 - what OpenClaw wrote that occd did not expect: this agent's scan
            # failed, recorded and said (status, status --check, doctor); the other agents are still scanned
            said = f"{agent.id}: scan failed: {type(e).__name__}: {e}".splitlines()[0][:300]
            result.errors.append(said)
            _note(ctx, notes, f"agent:{agent.id}", logging.ERROR, said)
            log.debug("scan of %s", agent.id, exc_info=True)
            result.agents.setdefault(agent.id, agent.era)
            complete = False
    return complete


def _finish(ctx, result: ScanResult, files: dict, cached: dict, notes: dict, t0: float) -> dict:
    _note_errors(ctx, notes, result.errors)
    ctx.cache[NOTES_KEY] = notes
    ctx.last_scan = result  # apply may act on what was seen even if the ledger is unavailable right now
    if files != cached or not scanstate._cache_path().exists():
        err = scanstate._save_cache(files)
        if err:
            result.errors.append(err)
    ctx.cache[CACHE_KEY] = files
    try:
        _record(ctx, result, t0)
    except OccdError as e:
        # the ledger is locked, read-only or full: nothing is lost, the next scan compares against what the
        # ledger holds and records the difference (all its observations, those kept unchanged from this scan
        # too); this scan's figures are noted in the next scan record
        ctx.cache.pop(FULL_KEY, None)
        when = datetime.fromtimestamp(result.started).isoformat(timespec="seconds")
        pending = ctx.cache.setdefault(PENDING_KEY, [])
        pending.append(f"scan at {when} not recorded: {e.message}")
        del pending[:-20]
        log.error("scan results not recorded: %s (%s); they are recorded with the next scan", e.message,
                  e.hint or "")
        raise
    return result.summary()


def _record(ctx, result: ScanResult, t0: float) -> None:
    led = ctx.ledger
    now = record_time(ctx)
    known = led.agent_eras()
    with_sessions = {s.agent for s in result.sessions}
    for a, era in result.agents.items():  # agents with sessions are upserted by record_observations
        if a not in known or known[a] != era or a not in with_sessions:
            led.record_agent(a, era, now=now)
    # the observations kept unchanged from the last scan are written (their last_seen) once per FULL_RECORD_S:
    # a wake for one changed session writes that one
    full = now - ctx.cache.get(FULL_KEY, float("-inf")) >= FULL_RECORD_S or now < ctx.cache.get(FULL_KEY, 0)
    rows = [s.ledger_row() for s in result.sessions if full or id(s) not in result.kept]
    result.changed = led.record_observations(rows, now=now)
    if full:
        ctx.cache[FULL_KEY] = now
    result.duration_s = time.monotonic() - t0
    pending = ctx.cache.get(PENDING_KEY) or []
    texts = pending + result.errors
    led.record_scan(result.started, result.duration_s, agents=len(result.agents),
                    sessions_seen=len(result.sessions), sessions_changed=result.changed,
                    bytes_read=result.bytes_read, errors=len(result.errors),
                    error_text="\n".join(texts[:50]) or None)
    ctx.cache.pop(PENDING_KEY, None)
