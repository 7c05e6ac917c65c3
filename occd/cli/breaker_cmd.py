"""`occd breaker status|reset [AGENT]`: the circuit breakers that stop automatic actions when too much happens."""

from __future__ import annotations

import time

import click

from occd.cli.common import console, emit_json, handle_errors, json_option


def _settings_for(s, agent: str, kind: str):
    from occd.policy import breaker as b

    pol = s.policy_for(agent)
    return b.rotation_breaker_settings(pol) if kind == "rotate" else pol.breaker


def _to_state(rec):
    from dataclasses import asdict

    from occd.policy.breaker import BreakerState

    return BreakerState(**asdict(rec))


def _fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


@click.group("breaker")
def breaker_group():
    """Circuit breakers per agent and action kind: open ones block automatic actions until reset or cool-off."""


@breaker_group.command("status")
@click.argument("agent", required=False)
@json_option
@handle_errors
def status_cmd(agent, as_json):
    """Show every breaker (or one agent's), its state and when an open one allows its next trial."""
    from occd.cli.common import load_settings_from_ctx
    from occd.ledger import Ledger
    from occd.policy import breaker as b

    from occd import paths

    s = load_settings_from_ctx()
    now = time.time()
    recs, trans = [], []
    if paths.ledger_path().exists():  # a read command: never creates the ledger
        with Ledger.open(readonly=True) as led:
            recs = led.breakers(agent)
            trans = led.breaker_transitions(agent, limit=20)
    rows = [b.describe(_to_state(r), _settings_for(s, r.agent, r.kind), now) for r in recs]
    if as_json:
        emit_json({"success": True, "breakers": rows,
                   "transitions": [{"ts": t["ts"], "agent": t["agent_id"], "kind": t["kind"], "from": t["from_state"],
                                    "to": t["to_state"], "reason": t["reason"]} for t in trans]})
        return
    c = console()
    if not rows:
        c.print("No breakers yet" + (f" for agent '{agent}'" if agent else "") + ": every one is closed.")
        return
    from occd.cli.render import Table

    t = Table(show_edge=False, box=None)
    for col in ("agent", "kind", "state", "failures", "cool-off", "retry at", "reason"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["agent"], r["kind"], r["state"], str(r["failures"]), f"{r['cooloffMinutes']:g} min",
                  _fmt_time(r["retryAt"]), r["reason"] or "")
    c.print(t)


def _check_known(led, agent, kind) -> None:
    """A name that is no agent (or kind) occd knows is a typo, not 'nothing to reset': exit 1 with the names."""
    import difflib

    from occd.errors import OccdError
    from occd.ledger import ACTION_KINDS

    for what, value, known in (("agent", agent, {a["id"] for a in led.agents()} | {r.agent for r in led.breakers()}),
                               ("kind", kind, set(ACTION_KINDS) | {r.kind for r in led.breakers()})):
        if value is None or value in known:
            continue
        near = difflib.get_close_matches(value, sorted(known), n=1)
        names = ", ".join(sorted(known)) or "none yet"
        raise OccdError(f"No {what} '{value}' in occd's ledger", (f"did you mean {near[0]}? " if near else "")
                        + f"known {what}s: {names}; `occd breaker status` shows the breakers",
                        code=f"{what.upper()}_NOT_FOUND")


@breaker_group.command("reset")
@click.argument("agent", required=False)
@click.option("--kind", default=None, metavar="KIND", help="Only this action kind (strip, rotate, archive, ...).")
@json_option
@handle_errors
def reset_cmd(agent, kind, as_json):
    """Close breakers (all, one agent's, or one kind) so automatic actions resume."""
    from occd.ledger import Ledger
    from occd.policy import breaker as b

    now = time.time()
    done = []
    with Ledger.open() as led:
        _check_known(led, agent, kind)
        for rec in led.breakers(agent):
            if kind and rec.kind != kind:
                continue
            new, trans = b.reset(_to_state(rec), now)
            if trans:
                led.set_breaker(new, trans, now=now)
                done.append({"agent": rec.agent, "kind": rec.kind, "from": rec.state})
    if as_json:
        emit_json({"success": True, "reset": done})
        return
    if not done:
        click.echo("Nothing to reset: " + ("no such breaker is open." if (agent or kind) else "every breaker is closed."))
    for d in done:
        click.echo(f"Breaker {d['agent']}/{d['kind']}: {d['from']} → closed")
