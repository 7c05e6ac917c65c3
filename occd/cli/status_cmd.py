"""`occd status [SESSION] [--rotations]` and `occd history`: the ledger, for people and for scripts."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import click

from occd.cli.common import agent_filter_option, console, emit_json, handle_errors, json_option, load_settings_from_ctx, use_color
from occd.openclaw.figure import percent_text, tokens_text
from occd.ledger import ACTION_KINDS
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
                       agent_filter=agent_filter)
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


def _when(ts, now_dt):
    if not ts:
        return "-"
    return relative_time(datetime.fromtimestamp(ts, tz=timezone.utc), now_dt)


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
@json_option
@handle_errors
def status_cmd(session, rotations, days, as_json, agent_filter=None, check=False, watch=False, interval=2.0):
    """Is the daemon running, what did it see and do. With SESSION: that session's history.

    \b
    Examples:
      occd status
      occd status --agent main --watch
      occd status --check || notify-send "occd needs a look"
      occd status 3640 --days 7
    """
    from occd.report import status as st

    settings = load_settings_from_ctx()
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
                      short_id(r.get("new_session_id"), ids), str(r.get("state")), str(r.get("archive_path") or ""))
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
        b = data["buckets"]
        ascii_only = not use_color()
        if b:
            toks = [x.get("context_tokens") for x in b]
            comps = [x.get("compaction_count") for x in b]
            top = human_tokens(max((t for t in toks if t is not None), default=None))
            now_c = comps[-1] if comps and comps[-1] is not None else "-"
            if sum(t is not None for t in toks) >= 2:  # a trend needs two points: no one-character sparkline
                c.print(f"  context tokens  {sparkline(toks, ascii_only=ascii_only)}  max {top}")
                c.print(f"  compactions     {sparkline(comps, ascii_only=ascii_only)}  now {now_c}")
            else:
                c.print(f"  context tokens  {top}   compactions {now_c}   (no trend yet: too few points)")
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
                dry = "(dry run) " if a["dry_run"] else ""
                t.add_row(_when(a["ts"], now_dt), a["kind"], a["outcome"], a["trigger"],
                          dry + (a.get("reason") or a.get("error") or ""))
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
    for a in data["agents"]:
        summary = counts_summary(a["actions24h"])
        brk = ", ".join(f"{b['kind']} {b['state']}" for b in a["breakers"]) or "closed"
        src = "" if a.get("modeSource") == "daemon" else ", from the config: the daemon is not running"
        c.print(f"\nAgent {a['id']} ({a.get('era') or '?'} era, {a['mode']} mode{src}): {plural(a['sessions'], 'session')}, "
                f"{plural(a['compactionsTotal'], 'compaction')}; actions 24h: {summary}; breakers: {brk}", wrap=True, indent=2)
        for e in a.get("emergencies") or []:
            c.print(f"  {e['kind']} {short_id(e['sessionId'] or '', ids)} ({e.get('key') or '-'}): "
                    f"{e['action']} {_when(e.get('ts'), now_dt)} — {e.get('reason') or ''}", wrap=True, indent=4)
        sv = a.get("savings7d")
        if sv and (sv["strips"] or sv["rotations"] or sv.get("undone")):
            c.print("  saved (7 days): " + _savings_line(sv), wrap=True, indent=4)
        if (a.get("idle") or {}).get("sessions"):
            c.print("  " + _idle_line(a["idle"]), wrap=True, indent=4)
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
            c.print(f"  observe mode would {w['kind']} {short_id(w['sessionId'], ids)}: {w['reason'] or ''}".rstrip(": "),
                    wrap=True, indent=4)
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


@click.command("stats")
@click.option("--since", default="7d", show_default=True, help="e.g. 7d, 12h, 30m.")
@json_option
@handle_errors
def stats_cmd(since, as_json):
    """What the daemon saved: context tokens removed, compactions avoided, net money with the prompt cache priced."""
    from occd.report import status as st

    data = st.stats(load_settings_from_ctx(), since=since)
    if as_json:
        emit_json(data)
        return
    c = console()
    if data.get("note"):
        c.print(data["note"])
        return
    c.print(f"Since {since}: " + _savings_line(data["total"]), wrap=True, indent=2)
    if data["sessions"]:
        from occd.cli.render import Table

        t = Table(show_edge=False, box=None)
        for col, j in (("AGENT", "left"), ("SESSION", "left"), ("STRIPS", "right"), ("TOKENS REMOVED", "right"),
                       ("COMPACTIONS AVOIDED", "right"), ("NET", "right"), ("ROTATIONS", "right")):
            t.add_column(col, justify=j)
        for r in sorted(data["sessions"], key=lambda r: -r["tokensRemoved"]):
            t.add_row(r["agent"] or "-", short_id(r["sessionId"] or "-"), str(r["strips"]),
                      human_tokens(r["tokensRemoved"]), str(r["compactionsAvoided"]),
                      _money(r["usdNet"]) if _priced(r) > 0 else "-",
                      str(r["rotations"]))
        c.print(t)
    a = data["assumptions"]
    ttl = ", ".join(f"{k} {v:g}s" for k, v in a["cacheTtlSeconds"].items())
    c.print(f"tokens removed: {a['tokensRemoved']}; compactions avoided: {a['compactionsAvoided']}; "
            f"money: {a['usdNet']}; prices from {', '.join(a['priceSources']) or 'nothing priced yet'}; cache lifetime "
            f"{ttl}; {a['turnsAssumed']} following turns at most", style="dim", wrap=True, indent=2)


@click.command("history")
@agent_filter_option
@click.option("--session", default=None, help="Session id, key, or a prefix.")
@click.option("--kind", default=None, help=", ".join(ACTION_KINDS) + ", or job:NAME (a job's failure).")
@click.option("--since", default=None, help="A duration (7d, 12h, 30m), today, yesterday, or a date (2026-11-22).")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("-f", "--follow", is_flag=True, help="Then keep printing new actions as they are recorded (Ctrl-C stops).")
@json_option
@handle_errors
def history_cmd(agent, session, kind, since, limit, as_json, follow=False):
    """Actions recorded in the ledger, newest first (manual and automatic, with outcome and reason), for every
    agent unless --agent is given.

    \b
    Examples:
      occd history --since yesterday --kind strip
      occd history --session 3640 --json
      occd history -f                              new actions as they happen
    """
    from occd.report import status as st

    # the ledger only: no settings to load (that import alone is most of a read command's time)
    rows, total = st.history(agent=agent, session=session, kind=kind, since=since, limit=limit,
                             with_total=True)
    if as_json:
        emit_json({"actions": rows, "total": total, "limit": limit})
        return
    c = console()
    if not rows:
        c.print("No actions recorded" + (" for that filter." if any((agent, session, kind, since)) else "."))
        if follow:
            _follow_actions(_max_action_id(), agent, session, kind)
        return
    from occd.cli.render import Table

    now_dt = datetime.now(timezone.utc)
    ids = [a["session_id"] for a in rows if a.get("session_id")]
    t = Table(show_edge=False, box=None)
    for col in ("WHEN", "AGENT", "SESSION", "KIND", "OUTCOME", "TRIGGER", "DETAIL"):
        t.add_column(col, no_wrap=col != "DETAIL")
    for a in rows:
        detail = (a.get("reason") or a.get("error") or "") + _saved_text(a.get("saved"))
        if a["dry_run"]:
            detail = "(dry run) " + detail
        t.add_row(_when(a["ts"], now_dt), a.get("agent_id") or "-", short_id(a.get("session_id"), ids), a["kind"],
                  a["outcome"], a["trigger"], detail)
    c.print(t)
    if total > len(rows):
        c.print(f"(showing {len(rows)} of {total}; -n {total} shows all, --since/--kind/--session narrow it)")
    if follow:
        _follow_actions(max((a["id"] for a in rows), default=0), agent, session, kind)


def _max_action_id() -> int:
    from occd.report import status as st

    rows = st.new_actions(after_id=0, limit=1)
    return rows[-1]["id"] if rows else 0


def _follow_actions(after_id: int, agent, session, kind, poll: float = 2.0) -> None:
    from occd.report import status as st

    try:
        while True:
            time.sleep(poll)
            for a in st.new_actions(after_id=after_id, agent=agent, session=session, kind=kind):
                after_id = max(after_id, a["id"])
                when = time.strftime("%H:%M:%S", time.localtime(a["ts"]))
                detail = ("(dry run) " if a["dry_run"] else "") + (a.get("reason") or a.get("error") or "")
                click.echo(f"{when}  {a.get('agent_id') or '-'}  {short_id(a.get('session_id'))}  {a['kind']}  "
                           f"{a['outcome']}  {a['trigger']}  {detail}".rstrip())
    except KeyboardInterrupt:
        pass
