"""`occd stats` and `occd history`: what the daemon saved, and every action it recorded (filtered, or followed)."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone

import click

from occd.cli.common import (agent_filter_option, console, emit_json, handle_errors, json_option, load_settings_from_ctx,
                             state_option)
from occd.cli.render import human_tokens, short_id
from occd.cli.status_cmd import _money, _priced, _saved_text, _savings_line, _when, outcome_word
from occd.ledger import ACTION_KINDS

@click.command("stats")
@click.option("--since", default="7d", show_default=True, help="e.g. 7d, 12h, 30m.")
@state_option
@json_option
@handle_errors
def stats_cmd(since, as_json, state_dir=None):
    """What the daemon saved: context tokens removed, compactions avoided, net money with the prompt cache priced."""
    from occd.report import status as st

    data = st.stats(load_settings_from_ctx(state_dir=state_dir), since=since)
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
@click.option("--outcome", default=None, metavar="OUTCOME",
              help="ok, failed, skipped, deferred, or would (observe mode's dry runs).")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("-f", "--follow", is_flag=True, help="Then keep printing new actions as they are recorded (Ctrl-C stops).")
@state_option
@json_option
@handle_errors
def history_cmd(agent, session, kind, since, limit, as_json, follow=False, outcome=None, state_dir=None):
    """Actions recorded in the ledger, newest first (manual and automatic, with outcome and reason), for every
    agent unless --agent is given.

    \b
    Examples:
      occd history --since yesterday --kind strip
      occd history --session 3640 --json
      occd history --outcome failed --since 1d
      occd history -f                              new actions as they happen
    """
    from occd.report import status as st

    # the ledger only: no settings to load (that import alone is most of a read command's time); --state-dir is
    # accepted as by every read command, and checked: the ledger holds what occd did for every state it watched
    if state_dir is not None and not os.path.isdir(state_dir):
        from occd.errors import OccdError

        raise OccdError(f"OpenClaw state directory {state_dir} does not exist", "check the --state-dir path",
                        code="STATE_NOT_FOUND")
    rows, total = st.history(agent=agent, session=session, kind=kind, since=since, limit=limit,
                             with_total=True, outcome=outcome)
    if as_json:
        emit_json({"actions": rows, "total": total, "limit": limit})
        return
    c = console()
    if not rows:
        c.print("No actions recorded" + (" for that filter." if any((agent, session, kind, since, outcome)) else "."))
        if follow:
            _follow_actions(_max_action_id(), agent, session, kind, outcome=outcome)
        return
    from occd.cli.render import Table

    now_dt = datetime.now(timezone.utc)
    ids = [a["session_id"] for a in rows if a.get("session_id")]
    t = Table(show_edge=False, box=None)
    for col in ("WHEN", "AGENT", "SESSION", "KIND", "OUTCOME", "TRIGGER", "DETAIL"):
        t.add_column(col, no_wrap=col != "DETAIL")
    for a in rows:
        detail = (a.get("reason") or a.get("error") or "") + _saved_text(a.get("saved"))
        t.add_row(_when(a["ts"], now_dt), a.get("agent_id") or "-", short_id(a.get("session_id"), ids), a["kind"],
                  outcome_word(a), a["trigger"], detail)
    c.print(t)
    if total > len(rows):
        c.print(f"(showing {len(rows)} of {total}; -n {total} shows all, --since/--kind/--session narrow it)")
    if follow:
        _follow_actions(max((a["id"] for a in rows), default=0), agent, session, kind, outcome=outcome)


def _max_action_id() -> int:
    from occd.report import status as st

    rows = st.new_actions(after_id=0, limit=1)
    return rows[-1]["id"] if rows else 0


def _follow_actions(after_id: int, agent, session, kind, poll: float = 2.0, outcome=None) -> None:
    from occd.report import status as st

    try:
        while True:
            time.sleep(poll)
            for a in st.new_actions(after_id=after_id, agent=agent, session=session, kind=kind, outcome=outcome):
                after_id = max(after_id, a["id"])
                when = time.strftime("%H:%M:%S", time.localtime(a["ts"]))
                detail = a.get("reason") or a.get("error") or ""
                click.echo(f"{when}  {a.get('agent_id') or '-'}  {short_id(a.get('session_id'))}  {a['kind']}  "
                           f"{outcome_word(a)}  {a['trigger']}  {detail}".rstrip())
    except KeyboardInterrupt:
        pass
