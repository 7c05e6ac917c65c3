"""`occd status [SESSION] [--rotations]`: the ledger, for people and for scripts (history and stats: history_cmd.py)."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import click

from occd.cli.common import (console, emit_json, handle_errors, json_option, load_settings_from_ctx,
                             state_option, use_color)
from occd.openclaw.figure import context_text, percent_text, tokens_text
from occd.paths import display_path
from occd.cli.render import (PIPE_WIDTH, cut_path, headroom_text, human_bytes, human_tokens, plural, relative_time, short_id,
                              sparkline)


def _check(settings, as_json: bool) -> None:
    from occd.report.health import health_problems

    problems = health_problems(settings)
    if as_json:
        err = None
        if problems:
            err = {"code": problems[0]["code"], "message": "; ".join(p["message"] for p in problems),
                   "hint": problems[0]["hint"]}
        emit_json({"healthy": not problems, "problems": problems}, success=not problems, error=err)
    elif problems:
        for p in problems:
            level = "WARNING" if p.get("severity") == "warn" else "CRITICAL"
            click.echo(f"{level} {p['message']} (hint: {p['hint']})", err=True)
    else:
        click.echo("OK occd is running and healthy")
    if problems:
        raise SystemExit(1)


def _watch(ctx, session, rotations, days, agent_filter, interval: float) -> None:
    """Redraw the status until Ctrl-C (like `watch occd status`, without a second process per frame)."""
    try:
        while True:
            click.clear()
            click.echo(f"every {interval:g}s — {time.strftime('%H:%M:%S')} — Ctrl-C stops\n")
            ctx.invoke(status_cmd, session=session, rotations=rotations, days=days, as_json=False,
                       agent_filter=agent_filter, state_dir=ctx.params.get("state_dir"))
            time.sleep(interval)
    except KeyboardInterrupt:
        pass


OUTCOME_WORDS = {"ok": "ok", "failed": "failed", "skipped": "skipped", "deferred": "deferred", "dry_run": "would"}


def counts_summary(acts: dict) -> str:
    """{kind: {outcome: n}} → 'strip 1 ok, 1 deferred, 1 would; rotate 1 ok' (dry runs are what observe mode
    would have done, never added to what was done)."""
    parts = []
    for kind, outcomes in sorted(acts.items()):
        order = [o for o in OUTCOME_WORDS if o in outcomes] + sorted(set(outcomes) - set(OUTCOME_WORDS))
        parts.append(f"{kind} " + ", ".join(f"{outcomes[o]} {OUTCOME_WORDS.get(o, o)}" for o in order))
    return "; ".join(parts) or "none"


def _archive_cell(r: dict) -> str:
    """The ARCHIVE column: the archive while it is there; after an undo, where the seeded session went."""
    if r.get("state") == "UNDONE":
        return f"undone; seeded session archived: {r['seededArchive']}" if r.get("seededArchive") else "undone"
    a = r.get("archive_path") or ""
    return a if not a or r.get("archiveExists") else f"(gone) {a}"


def _first_contact(c, fc: dict) -> None:
    """Before the first cycle: the agents and sessions OpenClaw's state shows, then what is missing."""
    if fc.get("error"):
        c.print(f"OpenClaw state: {fc['error']}", wrap=True, indent=2, markup=False, highlight=False)
    elif not fc["agents"]:
        c.print(f"OpenClaw state {display_path(fc['stateDir'])}: no agents yet", markup=False, highlight=False)
    else:
        c.print(f"OpenClaw state {display_path(fc['stateDir'])} (read now; occd has recorded nothing yet):",
                markup=False, highlight=False)
    for a in fc["agents"]:
        n = "sessions unreadable: " + a["error"] if a.get("error") else plural(a["sessions"] or 0, "session")
        c.print(f"  Agent {a['id']} ({a.get('era') or '?'} era): {n} — `occd list --agent {a['id']}` shows them",
                wrap=True, indent=4, markup=False, highlight=False)
    c.print("Missing:")
    for m in fc["missing"]:
        c.print(f"  - {m}", wrap=True, indent=4, markup=False, highlight=False)


def outcome_word(a: dict) -> str:
    """An action's outcome as every table shows it: observe mode's dry runs are "would" (what status counts them
    as), not "skipped"; a dry run that failed or was deferred says so."""
    if a.get("dry_run"):
        return "would" if a.get("outcome") in ("ok", "skipped") else f"{a.get('outcome')} (dry run)"
    return str(a.get("outcome"))


def _when(ts, now_dt):
    if not ts:
        return "-"
    return relative_time(datetime.fromtimestamp(ts, tz=timezone.utc), now_dt)


def _watch_text(w: dict | None, now_dt) -> str:
    """'; watched since 18:40' or '; polled since 18:40 (ENOSPC: ...)': how the running daemon sees the agent."""
    if not w or not w.get("mode"):
        return ""
    return f"; {w['mode']} since {_when(w.get('since'), now_dt)}" + (f" ({w['reason']})" if w.get("reason") else "")


@click.command("status")
@click.argument("session", required=False)
@click.option("--rotations", is_flag=True, help="List session rotations.")
@click.option("--days", type=float, default=30, show_default=True, help="History window for SESSION.")
@click.option("-a", "--agent", "agent_filter", metavar="AGENT", default=None, help="Only this agent (default: all).")
@click.option("--check", is_flag=True, help="Exit 1 (one line per problem) when the daemon is down or stale, a "
              "breaker is open, the last scan failed, a problem is open, an emergency is not ended or the lean "
              "view lost OpenClaw's slot; for monitoring.")
@click.option("--watch", is_flag=True, help="Redraw every --interval seconds until Ctrl-C.")
@click.option("--interval", type=click.FloatRange(min=0.5), default=2.0, show_default=True, help="For --watch.")
@state_option
@json_option
@handle_errors
def status_cmd(session, rotations, days, as_json, agent_filter=None, check=False, watch=False, interval=2.0,
               state_dir=None):
    """Is the daemon running, what did it see and do. With SESSION: that session's history.

    \b
    Examples:
      occd status
      occd status --agent main --watch
      occd status --check || notify-send "occd needs a look"
      occd status 3640 --days 7
    """
    from occd.report import status as st

    settings = load_settings_from_ctx(state_dir=state_dir)
    if check:
        _check(settings, as_json)
        return
    if watch and not as_json:
        _watch(click.get_current_context(), session, rotations, days, agent_filter, interval)
        return
    now = time.time()
    now_dt = datetime.fromtimestamp(now, tz=timezone.utc)
    c = console()
    if rotations:
        rows = st.rotations(settings)
        if as_json:
            emit_json(rows, key="rotations")
            return
        if not rows:
            c.print("No rotations recorded.")
            return
        from occd.cli.render import Table

        t = Table(show_edge=False, box=None)
        for col in ("WHEN", "AGENT", "KEY", "OLD", "NEW", "STATE", "ARCHIVE"):
            t.add_column(col, no_wrap=col != "ARCHIVE", overflow="path")
        ids = [x for r in rows for x in (r.get("old_session_id"), r.get("new_session_id")) if x]
        for r in rows:
            t.add_row(_when(r.get("started") or r.get("updated"), now_dt), str(r.get("agent_id") or ""),
                      str(r.get("session_key") or ""), short_id(r.get("old_session_id"), ids),
                      short_id(r.get("new_session_id"), ids), str(r.get("state")), _archive_cell(r))
        c.print(t)
        return
    if session:
        data = st.session_status(settings, session, now=now, since_days=days)
        if as_json:
            emit_json(data)
            return
        c.print(f"Session {data['sessionId']}  ({data.get('key') or '-'}, agent {data['agent']})", wrap=True,
                indent=2)
        c.print(f"  first seen {_when(data.get('firstSeen'), now_dt)}, last seen {_when(data.get('lastSeen'), now_dt)}"
                + (f", archived {_when(data['archivedAt'], now_dt)}" if data.get("archivedAt") else ""))
        for p in data.get("problems") or []:
            if not p.get("resolvedAt"):
                c.print(f"  PROBLEM ({p['code']}, since {_when(p['firstSeen'], now_dt)}): {p['message']}", highlight=False)
        cx = data.get("context")
        if cx and cx.get("tokens") is not None:
            c.print(f"  context now {context_text(cx['tokens'], cx.get('source'), cx.get('window'))}"
                    + ("  (estimated after occd's strip: the exact figure returns with the next reply)"
                       if cx.get("source") == "estimate" else ""), wrap=True, indent=4)
        b = data["buckets"]
        ascii_only = not use_color()
        if b:
            toks = [x.get("context_tokens") for x in b]
            comps = [x.get("compaction_count") for x in b]
            top = human_tokens(max((t for t in toks if t is not None), default=None))
            now_c = comps[-1] if comps and comps[-1] is not None else "-"
            if sum(t is not None for t in toks) >= 2:  # a trend needs two points: no one-character sparkline
                c.print(f"  context tokens  {sparkline(toks, ascii_only=ascii_only)}  max {top} (observed)")
                c.print(f"  compactions     {sparkline(comps, ascii_only=ascii_only)}  now {now_c}")
            else:
                c.print(f"  context tokens  max {top} (observed)   compactions {now_c}   (no trend yet: too few "
                        "points)", wrap=True, indent=4)
            n_obs = len(data['observations'])
            c.print(f"  ({plural(n_obs, 'recent observation')} over the last {days:g} days)")
        else:
            c.print("  no observations in that window")
        if data["actions"]:
            from occd.cli.render import Table

            c.print("  Actions:")
            t = Table(show_edge=False, box=None)
            for col in ("WHEN", "KIND", "OUTCOME", "TRIGGER", "DETAIL"):
                t.add_column(col, no_wrap=col != "DETAIL", justify="right" if col == "WHEN" else "left")
            for a in data["actions"][:15]:
                t.add_row(_when(a["ts"], now_dt), a["kind"], outcome_word(a), a["trigger"],
                          a.get("reason") or a.get("error") or "")
            c.print(t)
        live = [x for x in data["backups"] if not x.get("pruned_at")]
        if data["backups"]:
            c.print(f"  Backups: {len(live)} kept, {len(data['backups']) - len(live)} pruned")
            width = (c.width or PIPE_WIDTH) - 4
            for x in live[:5]:  # cut before the file name to fit (`occd backups ID` prints each path whole)
                size = human_bytes(x.get("size"))
                c.print(f"    {cut_path(display_path(x['path']), width - len(size) - 2)}  {size}")
        return
    data = st.status(settings, now=now)
    if agent_filter:
        known = [a["id"] for a in data["agents"]]
        if data["agents"] and agent_filter not in known:
            from occd.errors import OccdError

            raise OccdError(f"Agent '{agent_filter}' not found in the ledger", "agents: " + ", ".join(known),
                            code="AGENT_NOT_FOUND")
        data["agents"] = [a for a in data["agents"] if a["id"] == agent_filter]
    if as_json:
        emit_json(data)
        return
    d = data["daemon"]
    if d["running"]:
        c.print(f"Daemon: running (pid {d.get('pid')}, since {_when(d.get('started'), now_dt)}); "
                f"last cycle {_when(d.get('lastCycle'), now_dt)}, next scan {_when(d.get('nextScan'), now_dt)}")
        w = d.get("watch") or {}
        if w.get("mode"):
            c.print(f"Wakes on: {'OpenClaw’s writes (events' if w['mode'] == 'events' else 'a timer (polling'}: "
                    f"{w.get('reason')})")
        if d.get("logDegraded"):
            c.print(f"Log: not written ({d['logDegraded']}); the daemon goes on — free space in OCCD_HOME "
                    "(`occd db path`), the log resumes by itself")
    else:
        last = d.get("lastCycle")
        c.print("Daemon: not running" + (f" (last cycle {_when(last, now_dt)})" if last else "")
                + " — `occd service install` runs it in the background")
    for p in data.get("schemaProblems") or []:  # an agent occd reads but acts on nothing for
        if p["code"] == "SCHEMA_UNVERIFIED":
            c.print(f"! {p['message']} — {p['hint']}", markup=False, highlight=False)
    if data.get("firstContact"):
        _first_contact(c, data["firstContact"])
        return
    if data.get("note"):
        c.print(data["note"])
        return
    ls, sf = data.get("lastScan"), data.get("scanFailure")
    if sf:  # the figures below are the scan before's: never its "0 errors" as if it were now
        c.print(f"Last scan: FAILED {_when(sf['ts'], now_dt)}: {sf.get('error') or '?'} — `occd logs --since 1h`",
                markup=False, highlight=False)
        if ls:
            c.print(f"  the figures below are from the scan before, {_when(ls['started'], now_dt)}", highlight=False)
    elif ls:
        c.print(f"Last scan: {_when(ls['started'], now_dt)}, {plural(ls['sessions_seen'], 'session')}, "
                f"{ls['sessions_changed']} changed, {human_bytes(ls['bytes_read'])} read, {ls['duration_s']:.2f}s, "
                f"{plural(ls['errors'], 'error')}")
        if ls.get("errors") and ls.get("error_text"):  # say what they are (an unreadable store, with what to do)
            lines = ls["error_text"].splitlines()
            for line in lines[:5]:
                c.print(f"  ! {line}", markup=False, highlight=False)
            if len(lines) > 5:
                c.print(f"  ... and {len(lines) - 5} more: `occd status --json`")
    from occd.cli.render import Table

    ids = [s["sessionId"] for a in data["agents"] for s in a["biggest"]] + [
        w["sessionId"] for a in data["agents"] for w in a["wouldDo"] if w.get("sessionId")]
    shown, quiet = data["agents"], []
    if len(shown) > FOLD_OVER:  # a workstation of many agents: the quiet ones in one line (--json lists all)
        split: dict[bool, list] = {True: [], False: []}
        for a in shown:  # each agent judged once
            split[_quiet(a)].append(a)
        quiet, shown = split[True], split[False]
    for a in shown:
        summary = counts_summary(a["actions24h"])
        brk = ", ".join(f"{b['kind']} {b['state']}" for b in a["breakers"]) or "closed"
        src = "" if a.get("modeSource") == "daemon" else ", from the config: the daemon is not running"
        c.print(f"\nAgent {a['id']} ({a.get('era') or '?'} era, {a['mode']} mode{src}): {plural(a['sessions'], 'session')}, "
                f"{plural(a['compactionsTotal'], 'compaction')}; actions 24h: {summary}; breakers: {brk}"
                + _watch_text(a.get("watch"), now_dt), wrap=True, indent=2)
        for e in a.get("emergencies") or []:
            c.print(f"  {e['kind']} {short_id(e['sessionId'] or '', ids)} ({e.get('key') or '-'}): "
                    f"{e['action']} {_when(e.get('ts'), now_dt)} — {e.get('reason') or ''}", wrap=True, indent=4)
        sv = a.get("savings7d")
        if sv and (sv["strips"] or sv["rotations"] or sv.get("undone")):
            c.print("  saved (7 days): " + _savings_line(sv), wrap=True, indent=4)
        if (a.get("idle") or {}).get("sessions"):
            c.print("  " + _idle_line(a["idle"]), wrap=True, indent=4)
        if (a.get("idle") or {}).get("unseen"):
            c.print("  " + _unseen_line(a["idle"]), wrap=True, indent=4)
        if a["biggest"]:
            t = Table(show_edge=False, box=None)
            for col, j in (("SESSION", "left"), ("KEY", "left"), ("CONTEXT", "right"), ("TO COMPACT", "right"),
                           ("COMPACT", "right"), ("SIZE", "right")):
                t.add_column(col, justify=j)
            lean_on = data.get("lean", {}).get("enabled")
            if lean_on:
                t.add_column("LEAN VIEW", justify="left")
            for s in a["biggest"]:
                ctx = tokens_text(s["contextTokens"], s.get("tokensSource"))
                if s.get("contextPercent") is not None:
                    ctx += f" ({percent_text(s['contextPercent'])})"
                mark = f" {s['emergency']}" if s.get("emergency") else ""
                row = [short_id(s["sessionId"], ids) + mark, s.get("key") or "-", ctx, headroom_text(s.get("toCompaction")),
                       str(s.get("compactions") or 0),
                       human_bytes(s.get("size"))]
                if lean_on:
                    lv = s.get("lean")
                    row.append("off" if not lv or not lv["active"] else f"{lv['mode']}" + (
                        f", -{human_tokens(lv['tokensSaved'])} ({lv['savedPercent']:.0f}%)" if "tokensSaved" in lv else ""))
                t.add_row(*row)
            c.print(t)
            if any(s.get("tokensSource") == "estimate" for s in a["biggest"]):
                c.print("  ~ estimated (chars/4) after cleaning: the exact figure returns with the next reply",
                        wrap=True, indent=4)
        for w in a["wouldDo"][:5]:
            why = (w["reason"] or "").split(" (observe mode: would ")[0]  # the line says it once
            c.print(f"  observe mode would {w['kind']} {short_id(w['sessionId'], ids)}: {why}".rstrip(": "),
                    wrap=True, indent=4)
    if quiet:
        idle = sum((a.get("idle") or {}).get("sessions", 0) for a in quiet)
        unseen = sum((a.get("idle") or {}).get("unseen", 0) for a in quiet)
        more = f", {unseen} more not seen run yet" if unseen else ""
        c.print(f"\n{plural(len(quiet), 'more agent')} with no session in use and nothing done in 24 h "
                f"({plural(idle, 'idle session')}{more}, left alone): `occd status --agent ID` shows one, "
                "`occd status --json` all", wrap=True)
    lean = data.get("lean") or {}
    if lean.get("slotLost"):
        from occd.lean.check import SLOT_LOST_HINT

        c.print(f"\nLean view: enabled, but OpenClaw's context-engine slot is {lean['slotLost']}: it covers no "
                f"session — {SLOT_LOST_HINT}", wrap=True, markup=False, highlight=False)
    elif lean.get("enabled"):
        on = [k for k, v in lean["sessions"].items() if v["active"]]
        saved = sum(v.get("tokensSaved", 0) for v in lean["sessions"].values() if v["active"])
        c.print(f"\nLean view: on for {plural(len(on), 'session')}, the model is sent ~{human_tokens(saved)} fewer tokens per turn "
                f"(`occd lean status`)", wrap=True)
    for p in data.get("problems") or []:
        c.print(f"\nPROBLEM {p['subject']}: {p['message']}\n  what to do: {p['hint']}", wrap=True, highlight=False)
    if data.get("llmSpendToday"):
        c.print(f"\nModel spend today: ${data['llmSpendToday']:.4f}")
    sv = data.get("savings7d")
    if sv and (sv["strips"] or sv["rotations"] or sv.get("undone")):
        c.print("\nSaved in the last 7 days: " + _savings_line(sv) + "  (`occd stats` for details)", wrap=True,
                indent=2)


FOLD_OVER = 12  # more agents than this: the quiet ones are one line in the text form


def _quiet(a: dict) -> bool:
    """An agent with nothing to show: every session idle (none in use), no action in 24 h, no emergency, no open
    breaker, nothing observe mode would do, no savings in 7 days."""
    sv = a.get("savings7d") or {}
    idle = a.get("idle") or {}
    return (idle.get("sessions", 0) + idle.get("unseen", 0) >= a.get("sessions", 0) and not a.get("actions24h")
            and not a.get("emergencies") and not a.get("wouldDo")
            and all(b.get("state") == "closed" for b in a.get("breakers") or [])
            and not (sv.get("strips") or sv.get("rotations") or sv.get("undone")))


def _money(v: float) -> str:
    return f"-${-v:.2f}" if v < 0 else f"${v:.2f}"


def _priced(sv: dict) -> int:
    """How many of a savings row's actions were priced (the rest are counted, not priced)."""
    return sv.get("strips", 0) + sv.get("rotations", 0) + sv.get("leanMoves", 0) - sv.get("unpriced", 0)


def _savings_line(sv: dict) -> str:
    priced = _priced(sv)
    writes = sv.get("usdCacheWrites", 0.0)
    # a rewrite after the cache expired makes the next write smaller: then the writes term is a saving too
    writes_part = (f"- cache writes {_money(writes)}" if writes >= 0 else f"+ smaller cache writes {_money(-writes)}")
    money = (f", net {_money(sv.get('usdNet', 0.0))} with the prompt cache priced (saved {_money(sv.get('usdSaved', 0.0))}"
             f" + compactions {_money(sv.get('usdCompactionsAvoided', 0.0))} {writes_part})" if priced > 0 else "")
    em = f", {plural(sv['emergencies'], 'emergency', 'emergencies')} handled" if sv.get("emergencies") else ""
    moves = f", {plural(sv['leanMoves'], 'lean-view boundary move')}" if sv.get("leanMoves") else ""
    waiting = (f" ({sv['awaitingNextTurn']} more awaiting the next turn)" if sv.get("awaitingNextTurn") else "")
    undone = (f"; {sv['undone']} undone (`occd restore`, `rotate --undo`): not counted" if sv.get("undone") else "")
    return (f"{human_tokens(sv['tokensRemoved'])} context tokens removed by {plural(sv['strips'], 'strip')}, "
            f"{plural(sv['compactionsAvoided'], 'compaction')} avoided{waiting}{money}; "
            f"{plural(sv['rotations'], 'rotation')}{moves}{em}{undone}")


def _unseen_line(idle: dict) -> str:
    """The recent sessions occd found but has not seen run (policy.act_on_unseen off)."""
    n = idle["unseen"]
    return (f"not seen run yet: {plural(n, 'session')} used before occd first looked ({'it is' if n == 1 else 'they are'}"
            " acted on once a run ends while occd watches; policy.act_on_unseen acts on them now)")


def _idle_line(idle: dict) -> str:
    """The sessions occd leaves alone and what acts on them (issue 29: history is not a to-do list)."""
    arch = (f"; the idle-archive (idle > {idle['archiveAfterDays']:g} days, relevance < "
            f"{idle['archiveBelowRelevance']:g}) archived {idle['archived7d']} in 7 days"
            + (f", {idle['archivePending']} next" if idle.get("archivePending") else ""))
    return (f"left alone: {plural(idle['sessions'], 'idle session')} (no activity in {idle['activeWithinHours']:g} h:"
            f" never stripped or rotated automatically){arch}; on request: `{idle['commands'][0]}`, then "
            f"`{idle['commands'][1]}`")


def _saved_text(sv: dict | None) -> str:
    """One action's savings for `occd history` (the same figures `occd stats` adds up)."""
    if not sv:
        return ""
    if sv.get("undone"):
        return " [undone: savings withdrawn]"
    parts = [f"-{human_tokens(sv['tokensRemoved'])} tokens"] if sv.get("tokensRemoved") else []
    if sv.get("compactionsAvoided"):
        parts.append("compaction avoided")
    elif sv.get("awaitingNextTurn"):
        parts.append("awaiting the next turn")
    if sv.get("priced"):
        parts.append(f"net {_money(sv.get('usdNet', 0.0))}")
    return f" [{', '.join(parts)}]" if parts else ""
