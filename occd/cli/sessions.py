"""The cleaner commands: list, info, edit, clone, restore. Parse → call one domain function → render."""

from __future__ import annotations

from datetime import datetime, timezone

import click

from occd.cli.common import (
    agent_option, complete_preset, complete_session, console, emit_json, handle_errors, json_option,
    load_settings_from_ctx, looks_like_session_id, ok_mark, require_session, state_option, verbose_option,
)
from occd.cli.render import (clean_data, cut_path, headroom_text, human_bytes, human_tokens, percent_change,
                              relative_time, short_id)
from occd.openclaw.figure import percent_text, tokens_text
from occd.paths import display_path

SOURCE_LABELS = {"usage": "last measured", "estimate": "estimate", "openclaw-estimate": "OpenClaw's estimate",
                 "index": "OpenClaw's index"}


def headroom(fig) -> str:
    """How far from OpenClaw's compaction point (`-` unknown)."""
    return headroom_text(fig.to_compaction if fig is not None else None)

_strip_option = click.option(
    "--strip-tools", "strip_tools", is_flag=False, flag_value="", default=None, metavar="[=PRESET]",
    shell_complete=complete_preset,
    help="Strip old tool calls with a preset: default, aggressive, extreme, or one from the config "
         "(without a value: the configured default).")


def _check_preset_not_id(strip_tools: str | None, session: str | None, command: str) -> None:
    """`occd edit --strip-tools 01a2…` makes the id the preset's value: say how to write it."""
    from occd.config import BUILTIN_PRESETS
    from occd.errors import UsageError

    if strip_tools and strip_tools not in BUILTIN_PRESETS and looks_like_session_id(strip_tools):
        where = f"occd {command} {strip_tools} --strip-tools" if not session else f"--strip-tools=PRESET"
        raise UsageError(f"'{strip_tools}' looks like a session id, but --strip-tools takes it as its preset",
                         f"put the id before the option: `{where}` (a preset is given as --strip-tools=NAME)")


def _settings(agent, state_dir):
    return load_settings_from_ctx(agent=agent, state_dir=state_dir)


@click.command("list")
@agent_option
@state_option
@click.option("-n", "--limit", type=click.IntRange(min=1), default=None, help="Show at most N sessions.")
@click.option("--archived", is_flag=True, help="List sessions occd archived (rotation/cleanup) instead.")
@json_option
@verbose_option
@handle_errors
def list_cmd(agent, state_dir, limit, archived, as_json, verbose):
    """List the agent's sessions, newest first (reads the index and file stats, never whole transcripts)."""
    from occd.report.inspect import list_sessions

    s = _settings(agent, state_dir)
    listing = list_sessions(s, agent=agent, limit=limit, archived=archived)
    if as_json:
        from occd.openclaw.ids import short_forms

        forms = short_forms([row.session_id for row in listing.sessions])
        emit_json([row.to_json(forms.get(row.session_id)) for row in listing.sessions], key="sessions")
        return
    from occd.cli.render import fit_table, terminal_width

    now = datetime.now(timezone.utc)
    era = f" ({listing.era} era)" if listing.era != "file" else ""
    if not listing.sessions:
        click.echo(f"No {'archived ' if archived else ''}sessions for agent '{listing.agent}'{era}.")
        return
    rows = []
    ids = [row.session_id for row in listing.sessions]
    for row in listing.sessions:
        tokens = tokens_text(row.tokens, row.tokens_source)
        if row.tokens is not None and row.context_window:
            tokens += f" ({percent_text(row.context_percent)})"
        flags = (" [running]" if row.running else "") + (" [unindexed]" if row.unindexed else "")
        rows.append([short_id(row.session_id, ids), relative_time(row.updated_at, now), human_bytes(row.size), tokens,
                     headroom(row.figure), str(row.compaction_count if row.compaction_count is not None else "-"),
                     (row.label or "") + flags])
    click.echo(fit_table(["ID", "UPDATED", "SIZE", "TOKENS", "TO COMPACT", "COMPACT", "LABEL / ORIGIN"], rows,
                         right={1, 2, 3, 4, 5}, width=terminal_width()))
    if verbose:
        click.echo(f"{len(listing.sessions)} of {listing.total} sessions · agent {listing.agent}{era} · "
                   f"{display_path(listing.sessions_dir) if listing.sessions_dir else ''}")
    for w in listing.warnings:
        click.echo(f"Warning: {w}", err=True)


@click.command("info")
@click.argument("session", required=False, shell_complete=complete_session)
@agent_option
@state_option
@json_option
@verbose_option
@handle_errors
def info_cmd(session, agent, state_dir, as_json, verbose):
    """Analyse one session (partial ids work; default: the most recently updated)."""
    from occd.report.inspect import session_info

    s = _settings(agent, state_dir)
    info = session_info(s, agent=agent, ref=session)
    if as_json:
        emit_json(info)
        return
    c = console()
    info = clean_data(info)  # keys, paths, warnings from OpenClaw's files: one line each, no control characters
    a = info["analysis"]
    c.print(f"Session {info['sessionId']}  ({info.get('key') or 'no index entry'})")
    # the path (~ for home) with the size after it when both fit; else the size on the next line and a path
    # longer than the line cut in the middle, its file name kept (`occd info --json` has it whole)
    where = display_path(info['path']) if info.get('path') else '(database)'
    line = f"  File:        {where}  {human_bytes(info['size'])}"
    if c.width and len(line) > c.width:
        line = f"  File:        {cut_path(where, max(c.width - 15, 20))}\n{' ' * 15}{human_bytes(info['size'])}"
    c.print(line)
    if a.get("empty"):
        c.print("  Empty session: no entries yet.", wrap=True, indent=15)
        return
    roles = ", ".join(f"{k} {v}" for k, v in sorted(a["messagesByRole"].items()))
    c.print(f"  Messages:    {a['messages']} ({roles}); {a.get('messagesActive', a['messages'])} on the active path", wrap=True, indent=15)
    c.print(f"  Tool calls:  {a['toolCalls']} calls, {a['toolResults']} results, "
            f"{a['turnsWithTools']} of {a['turns']} turns use tools", wrap=True, indent=15)
    c.print(f"  Thinking:    {a['thinkingBlocks']} blocks   Images: {a['images']}", wrap=True, indent=15)
    comp = info.get("compactions")
    if comp is not None and comp != a["compactions"]:
        # two counts of different things: OpenClaw's counter (sessions.json, every compaction of this session
        # id, reset by nothing) and the compaction entries the transcript holds now (a strip or a rotation keeps
        # some, a restore brings others back)
        shown = f"{comp} counted by OpenClaw, {a['compactions']} entries in the transcript"
    else:
        shown = str(comp if comp is not None else a["compactions"])
    c.print(f"  Compactions: {shown}   Branches: {a['branches']}   "
            f"Entries: {a['entries']}", wrap=True, indent=15)
    ctx = info["context"]
    if ctx["tokens"] is not None:
        share = f" = {percent_text(ctx['percent'])} of {human_tokens(ctx['window'])} context" if ctx.get("window") else ""
        label = SOURCE_LABELS.get(ctx["source"], ctx["source"])
        if ctx.get("staleUsage"):
            label += ", after occd's rewrite; the last measurement before it was " + human_tokens(ctx.get("measured"))
        now_est = ""
        if ctx["source"] == "usage" and ctx.get("estimateNow") is not None and info.get("path"):
            now_est = f"; chars/4 estimate of the file as it is now ~{human_tokens(ctx['estimateNow'])}"
        c.print(f"  Context:     {tokens_text(ctx['tokens'], ctx['source'])} tokens ({label}{now_est}){share}", wrap=True, indent=15)
        if ctx.get("compactionPoint") is not None:
            by = "OpenClaw's recorded budget" if ctx.get("compactionPointSource") == "openclaw" else "OpenClaw's defaults"
            left = ctx["toCompaction"]
            where = (f"{human_tokens(left)} tokens before OpenClaw compacts" if left >= 0
                     else f"{human_tokens(-left)} tokens past OpenClaw's compaction point")
            c.print(f"  Compaction:  {where} (at {human_tokens(ctx['compactionPoint'])}, {by})", wrap=True, indent=15)
    if info.get("running"):
        c.print("  Status:      running (transcript lock held by a live process)", wrap=True, indent=15)
    if a.get("version") is not None and a["version"] < 3:
        c.print(f"  Format:      version {a['version']}" + (" (no entry ids)" if a["version"] < 2 else ""), wrap=True, indent=15)
    for w in a.get("warnings") or []:
        c.print(f"  Warning:     {w['message']}", wrap=True, indent=15)
    if a.get("malformedLines"):
        lines = ", ".join(f"{m['line']} ({m['kind']})" for m in a["malformedLines"][:10])
        c.print(f"  Malformed:   {len(a['malformedLines'])} line{'s' if len(a['malformedLines']) != 1 else ''}: {lines} — OpenClaw silently skips these; "
                "`occd edit --drop-malformed` removes them (they stay in the backup)", wrap=True, indent=15)
    if verbose:
        from occd.cli.render import plain

        for k, v in sorted(a.items()):
            if k not in ("messagesByRole", "malformedLines"):
                if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):  # warnings: their messages
                    v = [x.get("message") or plain(x) for x in v]
                c.print(f"  {k}: {plain(v)}", wrap=True, indent=4)


def _render_strip(c, title, sid, stats, extra_lines):
    st = stats.to_json(clone=False)
    c.print(f"{ok_mark()} {title}: {short_id(sid)}")
    ma, mb = st["messagesOriginal"], st["messagesAfter"]
    c.print(f"  Messages:   {ma} → {mb} ({percent_change(ma, mb)}% fewer)")
    c.print(f"  Tool calls: {st['toolCallsRemoved']} removed, {st['toolCallsTruncated']} truncated, "
            f"{st['toolCallsPreserved']} kept")
    sa, sb = st["sizeOriginal"], st["sizeAfter"]
    c.print(f"  Size:       {human_bytes(sa)} → {human_bytes(sb)} ({percent_change(sa, sb)}% smaller)")
    if st.get("tokensBefore") is not None:
        from occd.openclaw.figure import percent

        w = st.get("contextWindow")
        before, after = st["tokensBefore"], st.get("tokensAfterEstimate")
        shares = (f" ({percent_text(percent(before, w))} → {percent_text(percent(after, w))} of "
                  f"{human_tokens(w)} context)") if w and after is not None else ""
        src = SOURCE_LABELS.get(st.get("tokensBeforeSource"), "estimate")
        c.print(f"  Tokens:     {tokens_text(before, st.get('tokensBeforeSource'))} → ~{human_tokens(after)}"
                f"{shares} ({src} before; after = before − the chars/4 estimate of what was removed)")
    for line in extra_lines:
        c.print(line)


def _render_turns(c, stats):
    t = stats.turns
    if not t:
        return
    limits = ("copied as is" if t.get("keepTurnsWithTools") is None else
              f"preset keeps {t.get('keepTurnsWithTools')}, truncates the oldest {t.get('truncatePercent'):g}% of those")
    c.print(f"  Turns:      {t.get('turns', 0)} on the active path, {t.get('turnsWithTools', 0)} with tools ({limits})")
    for r in t.get("ranges") or []:
        span = f"{r['from']}-{r['to']}" if r["from"] != r["to"] else f"{r['from']}"
        c.print(f"    turns {span:<9} {r['status']:<9} ({r['turnsWithTools']} with tools)")


@click.command("edit")
@click.argument("session", required=False, shell_complete=complete_session)
@_strip_option
@agent_option
@state_option
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option("--force", is_flag=True, help="Skip only the 'changed recently' idle check (never the lock check).")
@click.option("--drop-malformed", is_flag=True, help="Drop malformed lines (they stay in the backup).")
@click.option("--crashed-run", is_flag=True,
              help="The last tool call has no result because its run crashed (no live lock, no change for 10 "
                   "minutes): clean the session anyway, leaving that last turn exactly as it is.")
@json_option
@verbose_option
@handle_errors
def edit_cmd(session, strip_tools, agent, state_dir, dry_run, force, drop_malformed, crashed_run, as_json, verbose):
    """Strip or truncate old tool calls of a session in place, after a backup. The session keeps its id.

    SESSION is an id, any unique part of one (what `occd list` shows), or a session key.

    \b
    Examples:
      occd edit 3640 --strip-tools              strip with the configured preset
      occd edit 3640 --strip-tools=aggressive   keep 10 turns with tools
      occd edit 3640 --strip-tools --dry-run    show what would change
    """
    from occd.actions.edit import edit_session
    from occd.errors import UsageError

    if strip_tools is None:
        raise UsageError("Nothing to do: edit needs --strip-tools[=PRESET]", "e.g. occd edit ID --strip-tools")
    _check_preset_not_id(strip_tools, session, "edit")
    session = require_session(session, "edit", "occd edit 3640 --strip-tools")
    s = _settings(agent, state_dir)
    res = edit_session(s, agent=agent, ref=session, preset=strip_tools or None, force=force,
                       drop_malformed=drop_malformed, dry_run=dry_run, crashed_run=crashed_run)
    if as_json:
        emit_json(res.to_json())
        return
    c = console()
    if not res.changed:
        c.print(f"{ok_mark()} Nothing to strip in {short_id(res.session_id)} with preset '{res.preset}': file left as it was.")
        return
    extra = [f"  Backup:     {display_path(res.backup_path)}"] if res.backup_path else []
    if res.dry_run:
        extra = ["  (dry run: nothing was written)"]
    _render_strip(c, "Session edited" if not res.dry_run else "Would edit session", res.session_id, res.stats, extra)
    if verbose:
        _render_turns(c, res.stats)


@click.command("clone")
@click.argument("session", shell_complete=complete_session)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the clone here (default: beside the source, as <new id>.jsonl).")
@_strip_option
@click.option("--no-register", is_flag=True, help="Do not add the clone to sessions.json.")
@agent_option
@state_option
@json_option
@verbose_option
@handle_errors
def clone_cmd(session, output, strip_tools, no_register, agent, state_dir, as_json, verbose):
    """Copy a session under a new session id (optionally stripped) and register it for resuming.

    \b
    Examples:
      occd clone 3640 --strip-tools=extreme     a clean copy without tool calls; prints how to resume it
      occd clone 3640 -o /tmp/copy.jsonl --no-register
    """
    from occd.actions.clone import clone_session

    _check_preset_not_id(strip_tools, session, "clone")
    s = _settings(agent, state_dir)
    res = clone_session(s, agent=agent, ref=session, output=output,
                        preset=(strip_tools or None) if strip_tools is not None else False,
                        register=not no_register)
    if as_json:
        emit_json(res.to_json())
        return
    c = console()
    extra = [f"  New id:     {res.cloned_session_id}", f"  Path:       {display_path(res.cloned_path)}"]
    if res.registered_key:
        extra.append(f"  Key:        {res.registered_key}")
    extra.append(f"  Resume:     {res.resume_command}" if res.resume_command else
                 "  Resume:     not possible from there: OpenClaw only resumes sessions in the agent's sessions "
                 "folder that its index names (clone without -o/--no-register)")
    _render_strip(c, "Session cloned", res.source_session_id, res.stats, extra)
    if verbose:
        _render_turns(c, res.stats)


@click.command("restore")
@click.argument("session", shell_complete=complete_session)
@agent_option
@state_option
@click.option("--force", is_flag=True, help="Skip only the 'changed recently' idle check.")
@click.option("--backup", "backup", type=click.IntRange(min=0), default=None, metavar="N",
              help="Restore backup number N (`occd backups SESSION` lists them; default: the newest).")
@click.option("--discard-newer", is_flag=True,
              help="Restore even a backup older than turns added since (they stay in a pinned backup, never pruned).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write the backup to FILE (a new file) instead; the session is not touched. The way back for "
                   "an archived (rotated) session.")
@json_option
@handle_errors
def restore_cmd(session, agent, state_dir, force, backup, discard_newer, output, as_json):
    """Put a session back to its newest backup, or to backup N (the current file is backed up first: restore
    can be undone). A backup older than turns added since is refused (it would drop them) unless
    --discard-newer: the current file, with those turns, is then kept as a pinned backup that is never pruned.

    \b
    Examples:
      occd restore 3640
      occd backups 3640 && occd restore 3640 --backup 2
      occd restore 77be --backup 1 -o /tmp/77be.jsonl   (an archived session's backup, to a new file)
    """
    from occd.actions.restore import restore_session
    from occd.errors import OccdError

    s = _settings(agent, state_dir)
    if output is not None:
        from occd.actions.restore_copy import restore_to_file

        out = restore_to_file(s, agent=agent, ref=session, output=output, backup=backup)
        if as_json:
            emit_json(out)
            return
        c = console()
        c.print(f"{ok_mark()} Backup {out['backupNumber']} of {short_id(out['sessionId'])}"
                f"{' (archived)' if out['archived'] else ''} written to a new file ({human_bytes(out['size'])}):")
        c.print(f"  {display_path(out['output'])}")
        return
    try:
        res = restore_session(s, agent=agent, ref=session, force=force, backup=backup, discard_newer=discard_newer)
    except OccdError as e:
        if e.code != "SESSION_ARCHIVED":
            raise
        from occd.actions.restore_copy import archived_hint

        raise OccdError(e.message + ": its key now names another session, which restore never overwrites",
                        archived_hint(session), code=e.code) from None
    if as_json:
        emit_json(res.to_json())
        return
    c = console()
    c.print(f"{ok_mark()} Session restored: {short_id(res.session_id)}")
    c.print(f"  From:       {display_path(res.restored_from)}")
    c.print(f"  Size:       {human_bytes(res.size_before)} → {human_bytes(res.size_after)}")
    if res.pinned:
        c.print(f"  Kept:       {res.discarded_turns} newer turn(s) ({res.discarded_entries} entries) are in the pinned "
                f"backup {display_path(res.backup_of_current)} (never pruned; delete it when you no longer need it)")
    elif res.backup_of_current:
        c.print(f"  Undo:       the replaced file is in {display_path(res.backup_of_current)} (occd restore again)")


@click.command("backups")
@click.argument("session", required=False, shell_complete=complete_session)
@agent_option
@state_option
@json_option
@handle_errors
def backups_cmd(session, agent, state_dir, as_json):
    """The backups occd keeps beside the transcripts: number, size, age (one session's, or all of the agent's).

    \b
    Examples:
      occd backups
      occd backups 3640 && occd restore 3640 --backup 2
    """
    from occd.report.backup_list import list_backups

    s = _settings(agent, state_dir)
    out = list_backups(s, agent=agent, ref=session)
    if as_json:
        emit_json(out)
        return
    c = console()
    if out.get("note"):
        c.print(out["note"])
        return
    if not out["backups"]:
        c.print(f"No backups{' of that session' if session else ''} for agent '{out['agent']}'.")
        return
    from occd.cli.render import format_table, terminal_width

    now = datetime.now(timezone.utc)
    ids = [b["sessionId"] for b in out["backups"]]
    rows = [[short_id(b["sessionId"], ids), (b.get("key") or "-") + (" (archived)" if b.get("archived") else ""),
             str(b["number"]) + (" pinned" if b.get("pinned") else ""), human_bytes(b["size"]), relative_time(b["createdAt"], now), display_path(b["path"])]
            for b in out["backups"]]
    heads, right = ["SESSION", "KEY", "N", "SIZE", "AGE", "PATH"], {2, 3, 4}
    if not session:  # which agent's: the default one unless --agent said another
        c.print(f"Backups of agent '{out['agent']}'" + ("" if agent else " (the default agent; --agent NAME for "
                                                              "another)") + ":")
    table = format_table(heads, rows, right)
    width = terminal_width()
    if width is not None and max(len(line) for line in table.splitlines()) > width:
        # each path on its own line under its row, cut in the middle (its file name kept) when even that does not
        # fit (`occd backups --json` has them whole; restore takes the number N)
        lines = format_table(heads[:-1], [r[:-1] for r in rows], right).splitlines()
        table = "\n".join([lines[0]] + [x for line, r in zip(lines[1:], rows)
                                         for x in (line, f"    {cut_path(r[-1], max(width - 4, 20))}")])
    click.echo(table)
    n = len(out["backups"])
    tail = "; an archived session's: `occd restore SESSION --backup N -o FILE` (to a new file)" if any(
        b.get("archived") for b in out["backups"]) else ""
    c.print(f"{n} backup{'s' if n != 1 else ''}, {human_bytes(out['totalBytes'])}; `occd restore SESSION --backup N` "
            f"restores one{tail}", wrap=True, indent=2)
