"""Relevance commands: sessions (discovery across OpenClaw agents and Claude Code), project-status, select
(resume / fresh / queue for a task), and mcp (the same answers for agents, over stdio)."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import click

from occd.cli.common import agent_filter_option, emit_json, handle_errors, json_option, load_settings_from_ctx, state_option
from occd.cli.render import clip_words, fit_table, human_bytes, human_tokens, relative_time, short_id, terminal_width, wrap_text
from occd.openclaw.figure import percent_text, tokens_text

_repo_option = click.option("--repo", "repo", type=click.Path(file_okay=False), default=None,
                            help="Only sessions whose working directory is inside this repository.")


def _state_dir(settings):
    from occd.relevance.select import state_dir_of

    return state_dir_of(settings)


def _warn(warnings):
    for w in warnings:
        from occd.cli.render import clean

        click.echo(f"Warning: {clean(w)}", err=True)


@click.command("sessions")
@_repo_option
@agent_filter_option
@state_option
@json_option
@handle_errors
def sessions_cmd(repo, agent, state_dir, as_json):
    """Sessions of every OpenClaw agent and of Claude Code, linked, newest first."""
    from pathlib import Path

    from occd.relevance.discovery import caller_from_env, discover

    s = load_settings_from_ctx(state_dir=state_dir)
    repo_root = None
    if repo is not None:
        from occd.relevance.project import find_root

        repo_root = find_root(repo)
    d = discover(state_dir=_state_dir(s), agent=agent, repo=Path(repo_root) if repo_root else None,
                 caller=caller_from_env())
    if as_json:
        emit_json(d.to_json())
        return
    if not d.sessions:
        click.echo(wrap_text(d.nothing_found(), terminal_width()))
        _warn(d.warnings)
        return
    now = datetime.now(timezone.utc)
    rows = []
    ids = [x.id for x in d.sessions]
    for x in d.sessions:
        tokens = tokens_text(x.context_tokens, x.context_source)
        pct = x.context_percent()
        if pct is not None:
            tokens += f" ({percent_text(pct)})"
        flags = ((" [self]" if x.is_self else "") + (" [running]" if x.running else "")
                 + (f" [open: {x.open_in}]" if x.open_in else "")
                 + (f" [openclaw:agent={x.origin_agent}]" if x.origin_agent else ""))
        task = clip_words(x.shown_texts()[1], 100)  # redacted first (as --json shows it, kept with the file)
        rows.append([short_id(x.id, ids), x.source, x.agent or "-", x.branch or "-", relative_time(x.last_modified, now),
                     str(x.message_count if x.message_count is not None else "-"), human_bytes(x.size), tokens,
                     str(x.compaction_count), task + flags])
    click.echo(fit_table(["ID", "SOURCE", "AGENT", "BRANCH", "UPDATED", "MSGS", "SIZE", "TOKENS", "COMPACT",
                          "LATEST TASK"], rows, right={4, 5, 6, 7, 8}, width=terminal_width()))
    _warn(d.warnings)


@click.command("project-status")
@click.argument("path", required=False, default=".", type=click.Path())
@json_option
@handle_errors
def project_status_cmd(path, as_json):
    """Branch, ahead/behind, changes, stashes, recent commits, key docs, open PRs (with gh) of a repository."""
    from occd.relevance.project import project_status

    st = project_status(path)
    if as_json:
        emit_json(st.to_json())
        return
    from occd.cli.render import clean

    now = datetime.now(timezone.utc)
    head = clean(st.branch) or "(detached HEAD)"
    track = ""
    if st.upstream:
        track = f" → {clean(st.upstream)}" + (f" (ahead {st.ahead}, behind {st.behind})" if st.ahead is not None else "")
    click.echo(f"Repository: {clean(st.root)}")
    click.echo(f"Branch:     {head}{track}")
    click.echo(f"Changes:    {st.uncommitted} uncommitted, {st.untracked} untracked"
               + (f", {st.conflicts} conflicted" if st.conflicts else "") + f"; {st.stashes} stash"
               + ("es" if st.stashes != 1 else ""))
    width = terminal_width()
    if st.commits:
        click.echo("Commits:")
        for c in st.commits:  # a subject too long for the line is cut after a whole word, marked with "…"
            lead = f"  {c.sha[:8]}  {relative_time(c.time, now):>8}  "
            click.echo(lead + (clip_words(clean(c.subject), max(width - len(lead), 20)) if width else clean(c.subject)))
    click.echo("Key docs:   " + (", ".join(st.key_docs) if st.key_docs else "none"))
    if st.pull_requests is not None:
        if not st.pull_requests:
            click.echo("Open PRs:   none")
        for p in st.pull_requests:
            checks = ", ".join(f"{n} {k}" for k, n in sorted(p.checks.items())) or "no checks"
            click.echo(f"  #{p.number} {clip_words(clean(p.title), 70)} ({clean(p.branch) or '?'}; {clean(checks)})"
                       + (" [draft]" if p.draft else ""))
    _warn(st.warnings)


@click.command("select")
@click.option("--task", "task", required=True, help="What the work is, in a sentence.")
@_repo_option
@agent_filter_option
@state_option
@click.option("--label", "label", default=None, help="Pick the session with this label (or key / id) directly.")
@click.option("--no-llm", "no_llm", is_flag=True, help="Keyword relevance only; no model call.")
@click.option("--cost-budget", "cost_budget", type=float, default=None, metavar="USD",
              help="A session that used 70% of this budget must start fresh.")
@json_option
@handle_errors
def select_cmd(task, repo, agent, state_dir, label, no_llm, cost_budget, as_json):
    """Resume a session (which one), start fresh, or queue behind a running one, and why."""
    from occd.relevance.select import select_session

    s = load_settings_from_ctx(state_dir=state_dir)
    # --no-llm: keyword scores cost nothing to recompute, so no ledger (no score cache) and no SQLAlchemy import
    r = select_session(s, task=task, repo=repo, agent=agent, label=label, use_model=not no_llm,
                       cost_budget_usd=cost_budget, now=time.time(), open_ledger=not no_llm)
    if as_json:
        emit_json(r.to_json())
        return
    from occd.cli.render import clean_data

    out = clean_data(r.to_json())  # task, reasons, notes: one line each, no control characters
    verb = {"resume": "Resume", "fresh": "Start fresh", "queue": "Queue"}[out["action"]]
    target = f" {out['sessionId']}" if out["sessionId"] else ""
    width = terminal_width()
    click.echo(wrap_text(f"{verb}{target}: {out['reason']}", width))
    rel = out["relevance"]
    how = rel["method"] if rel["method"] != "model" else f"model {rel['model']}"
    if out["candidates"]:
        click.echo(wrap_text(f"Relevance by {how}" + (f" ({rel['reason']})" if rel["reason"] else "")
                             + (f"; {rel['cached']} cached" if rel["cached"] else "")
                             + (f"; {rel['calls']} call(s), ${rel['costUsd']:.5f}" if rel["calls"] else ""), width))
    if out["candidates"]:
        rows = []
        for c in out["candidates"][:15]:
            p = c["parts"]
            rows.append([short_id(c["id"], [x["id"] for x in out["candidates"]]), c["source"], f"{c['score']:.2f}", f"{c['relevance']:.2f}",
                         c["relevanceMethod"] or "-", f"{p['branch']:.2f}", f"{p['recency']:.2f}",
                         f"{p['health']:.2f}", f"{p['capacity']:.2f}",
                         ("self; " if c["self"] else "") + ("running; " if c["running"] else "")
                         + ("unrelated; " if not c["related"] and not c["self"] else "")
                         + ("; ".join(c["forcedFresh"]) or clip_words(c["latestUserTask"], 80))])
        click.echo(fit_table(["ID", "SOURCE", "SCORE", "REL", "BY", "BRANCH", "RECENT", "HEALTH", "CAPACITY",
                              "NOTE"], rows, right={2, 3, 5, 6, 7, 8}, width=width))
    _warn(out["warnings"])


@click.command("mcp")
@click.option("--json", "as_json", is_flag=True,
              help="Do not serve: describe the server (its tools, whether occd[mcp] is installed) as one JSON object.")
@handle_errors
def mcp_cmd(as_json):
    """Serve openclaw_project_status and openclaw_session_list over stdio (MCP) for agents.

    Its stdout is the protocol channel; --json instead prints what it serves, and exits.
    Needs the optional part: pip install 'occd[mcp]'."""
    if as_json:
        import importlib.util

        from occd.relevance.mcp_server import SERVER_NAME, TOOLS

        emit_json({"server": SERVER_NAME, "transport": "stdio", "installed": importlib.util.find_spec("mcp") is not None,
                   "tools": [{"name": k, "description": v} for k, v in TOOLS.items()]})
        return
    from occd.relevance.extras import require

    require("mcp", "occd mcp")
    from occd.relevance.mcp_server import serve

    serve()
